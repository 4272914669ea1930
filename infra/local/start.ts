/**
 * `npm start`: the local stack in the foreground. Points the local marketplace's live surveys at the receiver,
 * sends a gentle stream of simulated respondents, and prints the URLs to try. Ctrl-C stops.
 */
import { randomUUID } from 'node:crypto';
import { desiredRedirectSettings } from '../../functions/core/redirect-settings';
import { parseKeyRing } from '../../functions/core/signing';
import { buildSurveyUrls } from '../../functions/core/survey-urls';
import { marketplaceFromEnvironment } from '../../functions/lambda/marketplace-access';
import { startRespondentStream } from './marketplace/stream';
import { startLocalStack } from './stack';

const SAMPLE_SURVEY = '1001';
const SAMPLE_PID = 'demo-pid';

const explicitEngine = process.env.DYNAMODB_ENDPOINT !== undefined;
const stack = await startLocalStack();
const env = process.env;
const ring = parseKeyRing(env.SIGNING_KEYS as string);
const urlsOf = (surveyId: string) => buildSurveyUrls(env.PUBLIC_BASE_URL as string, surveyId, ring);
const urls = urlsOf(SAMPLE_SURVEY);
const fill = (url: string) => url.replace('[%%pid%%]', SAMPLE_PID).replace('[%%token%%]', randomUUID());

let stopStream: (() => Promise<void>) | undefined;
const lines = [
  'Survey receiver, local stack',
  `  API          ${stack.apiUrl}`,
  `  DynamoDB     ${stack.dynamoEndpoint} (table ${stack.tableName}${explicitEngine ? '' : ', embedded, in memory'})`,
  `  Marketplace  ${env.MARKETPLACE_BASE_URL}${stack.marketplace ? ' (local)' : ''}`,
];
if (stack.marketplace) {
  // Until `redirects sync` exists, point every live survey of the local marketplace at this receiver here.
  const marketplace = marketplaceFromEnvironment();
  const { rows: surveys } = await marketplace.getAllocatedSurveys();
  for (const survey of surveys) {
    await marketplace.setRedirectionForSurvey(
      survey.surveyId,
      desiredRedirectSettings(urlsOf(survey.surveyId)),
    );
  }
  lines.push(
    `  Redirects of live surveys ${surveys.map((s) => s.surveyId).join(', ')} point at the receiver.`,
  );
  const interval = Number(env.RESPONDENT_INTERVAL_MS);
  if (interval > 0) {
    const interactive = process.stdout.isTTY;
    stopStream = startRespondentStream(stack.marketplace, interval, (p) => {
      const line = `respondents ${p.respondents} · completes ${p.completes} · redirects ${p.redirectsSent} · postbacks ${p.postbacksSent} · failed deliveries ${p.failures}`;
      if (interactive) process.stdout.write(`\r${line}`);
      else if (p.respondents % 10 === 0) console.log(line);
    });
    lines.push(
      `  Simulated respondents: one every ${interval} ms (RESPONDENT_INTERVAL_MS=0 turns them off).`,
    );
  }
}
lines.push(
  '',
  `Sample signed URLs for survey ${SAMPLE_SURVEY} (npm run cli -- urls --survey <id> prints any survey's):`,
  `  success postback  ${fill(urls.pstbck)}`,
  `  success redirect  ${fill(urls.sUrl)}`,
  '',
  'Try:',
  `  curl -i '${fill(urls.pstbck)}'`,
  `  npm run cli -- attempt --survey ${SAMPLE_SURVEY} --pid ${SAMPLE_PID}`,
  '',
  'Ctrl-C stops.',
);
console.log(lines.join('\n'));

const shutdown = async () => {
  await stopStream?.();
  await stack.stop();
  process.exit(0);
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
