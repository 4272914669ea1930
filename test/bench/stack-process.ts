/**
 * The local stack in a process of its own (API adapter, real handlers, buffer), against an engine running
 * elsewhere, so the benchmark can tell the two processes' CPU apart. Reports its URL over IPC; stops on disconnect.
 */
import '../../infra/local/environment';
import { startLocalStack } from '../../infra/local/stack';
import { BENCH_KEY_RING } from './measure';

const [endpoint, tableName] = process.argv.slice(2);
Object.assign(process.env, {
  PORT: '0',
  MARKETPLACE_PORT: '0',
  SQS_PORT: '0',
  DYNAMODB_ENDPOINT: endpoint,
  TABLE_NAME: tableName,
  SIGNING_KEYS: BENCH_KEY_RING,
  RESPONDENT_INTERVAL_MS: '0',
  LANDING_URL_SUCCESS: 'https://panel.example.com/thanks?pid={pid}',
  // As deployed: successful hits log nothing.
  POWERTOOLS_LOG_LEVEL: 'INFO',
});
// The local defaults (applied at import) chose an embedded engine and a key file; this run brings its own.
delete process.env.SIGNING_KEYS_FILE;
delete process.env.LOCAL_ENGINE;
const stack = await startLocalStack();
process.send?.({ apiUrl: stack.apiUrl });
process.on('disconnect', async () => {
  await stack.stop();
  process.exit(0);
});
