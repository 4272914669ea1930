/**
 * `npm start`: the local stack in the foreground, with the URLs to try printed. Ctrl-C stops it.
 */
import { randomUUID } from 'node:crypto';
import { parseKeyRing } from '../../functions/core/signing';
import { buildSurveyUrls } from '../../functions/core/survey-urls';
import { applyLocalDefaults } from './defaults';
import { startLocalStack } from './stack';

const SAMPLE_SURVEY = '1001';
const SAMPLE_PID = 'demo-pid';

const explicitEngine = process.env.DYNAMODB_ENDPOINT !== undefined;
const stack = await startLocalStack();
const env = applyLocalDefaults();
const urls = buildSurveyUrls(
  env.PUBLIC_BASE_URL as string,
  SAMPLE_SURVEY,
  parseKeyRing(env.SIGNING_KEYS as string),
);
const fill = (url: string) => url.replace('[%%pid%%]', SAMPLE_PID).replace('[%%token%%]', randomUUID());

console.log(`Survey receiver, local stack
  API        ${stack.apiUrl}
  DynamoDB   ${stack.dynamoEndpoint} (table ${stack.tableName}${explicitEngine ? '' : ', embedded, in memory'})

Sample signed URLs for survey ${SAMPLE_SURVEY} (npm run cli -- urls --survey <id> prints any survey's):
  success postback  ${fill(urls.pstbck)}
  success redirect  ${fill(urls.sUrl)}

Try:
  curl -i '${fill(urls.pstbck)}'
  npm run cli -- attempt --survey ${SAMPLE_SURVEY} --pid ${SAMPLE_PID}

Ctrl-C stops.`);

const shutdown = async () => {
  await stack.stop();
  process.exit(0);
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
