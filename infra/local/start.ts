/**
 * `npm start`: the local stack in the foreground. Runs the redirect sync (now, then on a short schedule) so the
 * local marketplace's live surveys point at the receiver, sends a gentle stream of simulated respondents, and
 * prints the URLs to try. Ctrl-C stops.
 */
import './environment';
import { randomUUID } from 'node:crypto';
import type { HealthRunSummary } from '../../functions/health/health-handler';
import type { SyncSummary } from '../../functions/marketplace/redirect-sync-handler';
import { buildSurveyUrls } from '../../functions/receiving/survey-urls';
import type { ReconcileRunSummary as ReconcileSummary } from '../../functions/reconciliation/reconcile-handler';
import { keyRingSource } from '../../functions/runtime/key-ring-source';
import { DEV_KEY_RING_FILE, LOCAL_DEFAULTS } from '../../functions/runtime/local-stack-defaults';
import { keyRingLocation } from '../../functions/runtime/runtime-config';
import { startRespondentStream } from './marketplace/stream';
import { startLocalSchedule } from './scheduler';
import { startLocalStack } from './stack';

const SAMPLE_SURVEY = '1001';
const SAMPLE_PID = 'demo-pid';

/**
 * The numbers `npm start` reads, each a whole number (milliseconds, or a port; 0 turns a job off, or picks a free
 * port): one that is not (`1m`, `30s`) is refused by name, rather than read as 0 and the job left off without a word.
 */
const NUMBERS = [
  'REDIRECT_SYNC_INTERVAL_MS',
  'RECONCILE_INTERVAL_MS',
  'HEALTH_INTERVAL_MS',
  'RESPONDENT_INTERVAL_MS',
  'PORT',
  'DYNAMODB_PORT',
  'MARKETPLACE_PORT',
  'SQS_PORT',
] as const;
const notNumbers = NUMBERS.filter((name) => {
  const value = process.env[name];
  return (
    value !== undefined &&
    (!/^\d+$/.test(value.trim()) || (name.endsWith('PORT') && Number(value.trim()) > 65_535))
  );
});
if (notNumbers.length > 0) {
  console.error(
    `npm start: ${notNumbers.map((name) => `${name} is "${process.env[name]}"`).join(', ')}: give a whole number of milliseconds (a port from 0 to 65535 for the ports; 0 turns a job off, or picks a free port)`,
  );
  process.exit(1);
}

const stack = await startLocalStack().catch((error: unknown) => {
  const busy = error as { code?: string; address?: string; port?: number };
  if (busy.code !== 'EADDRINUSE') throw error;
  // Another `npm start` (or anything else) holds a port this stack asked for: say which, and how to choose others.
  console.error(
    `npm start: ${busy.address ?? '127.0.0.1'}:${busy.port ?? '?'} is already in use (another npm start?). ` +
      'Stop it, or choose other ports: PORT, DYNAMODB_PORT, MARKETPLACE_PORT, SQS_PORT (0 picks a free one).',
  );
  process.exit(1);
});
const env = process.env;
const ring = await keyRingSource(keyRingLocation(env))();
const urls = buildSurveyUrls(env.PUBLIC_BASE_URL as string, SAMPLE_SURVEY, ring);
// One respondent for every sample URL: its postback and its redirect complete one attempt, as the marketplace's would.
const sampleToken = randomUUID();
const fill = (url: string) => url.replace('[%%pid%%]', SAMPLE_PID).replace('[%%token%%]', sampleToken);
/**
 * A stack on other ports than the defaults is reached by the CLI only with the same ports: the hints say so, or
 * run as printed they would read another stack's ledger (or none).
 */
const portOf = (url: string | undefined) => (url ? new URL(url).port : undefined);
const ports = {
  PORT: portOf(stack.apiUrl),
  DYNAMODB_PORT: stack.embeddedEngine ? portOf(stack.dynamoEndpoint) : undefined,
  SQS_PORT: portOf(stack.buffer.endpoint),
  MARKETPLACE_PORT: stack.marketplace ? portOf(env.MARKETPLACE_BASE_URL) : undefined,
};
/**
 * And what else the CLI would otherwise take from its own defaults: an engine or marketplace of the operator's own
 * (it would read another stack's, or none), a key ring file of its own (it would sign with another key). Never an
 * inline key ring: hints are printed.
 */
const elsewhere = {
  DYNAMODB_ENDPOINT: stack.embeddedEngine ? undefined : stack.dynamoEndpoint,
  MARKETPLACE_BASE_URL: stack.marketplace ? undefined : env.MARKETPLACE_BASE_URL,
  SIGNING_KEYS_FILE: env.SIGNING_KEYS_FILE !== DEV_KEY_RING_FILE ? env.SIGNING_KEYS_FILE : undefined,
};
const moved =
  Object.entries(ports).some(
    ([name, port]) => port !== undefined && port !== LOCAL_DEFAULTS[name as keyof typeof ports],
  ) || Object.values(elsewhere).some((value) => value !== undefined);
const cli = (args: string) =>
  `${
    moved
      ? `${Object.entries({ ...ports, ...elsewhere })
          .filter(([, value]) => value !== undefined)
          .map(([name, value]) => `${name}=${value}`)
          .join(' ')} `
      : ''
  }npm run cli -- ${args}`;
const interactive = process.stdout.isTTY;

const describeSync = (summary: SyncSummary) =>
  `redirect sync: ${
    Object.entries(summary.counts)
      .map(([status, n]) => `${n} ${status}`)
      .join(', ') || 'nothing new'
  }${
    summary.failed.length
      ? ` (failed: ${summary.failed.map((f) => `${f.surveyId}: ${f.error}`).join('; ')})`
      : ''
  }`;
let first = true;
const sync = await startLocalSchedule(
  'redirect-sync',
  Number(env.REDIRECT_SYNC_INTERVAL_MS),
  (result, error) => {
    if (first) return;
    const line = error
      ? `redirect sync failed: ${error instanceof Error ? error.message : String(error)}`
      : describeSync(result as SyncSummary);
    if (error || (result as SyncSummary).counts.applied || (result as SyncSummary).failed.length) {
      console.log(`${interactive ? '\n' : ''}${line}`);
    }
  },
);
const firstSync = (await sync.runNow()) as SyncSummary | undefined;
first = false;
const reconcileInterval = Number(env.RECONCILE_INTERVAL_MS);
const reconcile =
  reconcileInterval > 0
    ? await startLocalSchedule(
        'reconcile',
        reconcileInterval,
        (result, error) => {
          if (error)
            console.log(
              `${interactive ? '\n' : ''}reconciliation failed: ${error instanceof Error ? error.message : String(error)}`,
            );
          else if (result && 'verdicts' in (result as object)) {
            const r = result as Exclude<ReconcileSummary, { busy: true }>;
            const found = Object.entries(r.verdicts)
              .map(([kind, n]) => `${n} ${kind}`)
              .join(', ');
            const [failure] = r.failures;
            const failed = failure
              ? `${r.failures.length} of ${r.surveys} surveys failed (${failure.surveyId}: ${failure.error}); ${cli('reconcile')} retries now`
              : '';
            console.log(
              `${interactive ? '\n' : ''}reconciliation: ${[found, failed].filter(Boolean).join('; ') || 'nothing to reconcile yet'}`,
            );
          }
        },
        900_000,
      )
    : undefined;

const healthInterval = Number(env.HEALTH_INTERVAL_MS);
const health =
  healthInterval > 0
    ? await startLocalSchedule('health', healthInterval, (result, error) => {
        const prefix = interactive ? '\n' : '';
        if (error) {
          console.log(
            `${prefix}survey health check failed: ${error instanceof Error ? error.message : String(error)}`,
          );
          return;
        }
        for (const t of (result as HealthRunSummary).transitions) {
          console.log(
            `${prefix}survey ${t.surveyId} health: ${t.from} -> ${t.to}${t.reasons.length ? ` (${t.reasons.join(', ')})` : ''}; ${cli(`health --survey ${t.surveyId}`)}`,
          );
        }
      })
    : undefined;

let stopStream: (() => Promise<void>) | undefined;
const lines = [
  'Survey receiver, local stack',
  `  API          ${stack.apiUrl}`,
  `  DynamoDB     ${stack.dynamoEndpoint} (table ${stack.tableName}${stack.embeddedEngine ? ', embedded, in memory' : ''})`,
  `  Marketplace  ${env.MARKETPLACE_BASE_URL}${stack.marketplace ? ' (local)' : ''}`,
  `  Hit buffer   ${stack.buffer.endpoint} (SQS stand-in: queue hits, dead letters hits-dlq; ${cli('buffer redrive')})`,
  `  Signing keys ${env.SIGNING_KEYS_FILE ?? env.SIGNING_KEYS_SECRET_ID ?? 'SIGNING_KEYS'} (current key ${ring.current.kid})`,
  `  ${firstSync ? describeSync(firstSync) : 'redirect sync failed; see above'}; ${Number(env.REDIRECT_SYNC_INTERVAL_MS) > 0 ? `it runs again every ${env.REDIRECT_SYNC_INTERVAL_MS} ms` : `it does not run again (REDIRECT_SYNC_INTERVAL_MS=0; ${cli('redirects sync')} runs it)`}.`,
  reconcile
    ? `  Reconciliation runs every ${reconcileInterval} ms (or now: ${cli('reconcile')}).`
    : `  Scheduled reconciliation is off (RECONCILE_INTERVAL_MS=0); ${cli('reconcile')} runs it.`,
  health
    ? `  Survey health is checked every ${healthInterval} ms (or now: ${cli('health')}); notices go to the log${env.HEALTH_WEBHOOK_URL ? ` and ${env.HEALTH_WEBHOOK_URL}` : ' (and HEALTH_WEBHOOK_URL, if set)'}.`
    : `  The survey health check is off (HEALTH_INTERVAL_MS=0); ${cli('health')} shows it.`,
];
if (stack.marketplace) {
  const interval = Number(env.RESPONDENT_INTERVAL_MS);
  if (interval > 0) {
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
  `Sample signed URLs for survey ${SAMPLE_SURVEY} (${cli('urls --survey <id>')} prints any survey's):`,
  `  success postback  ${fill(urls.pstbck)}`,
  `  success redirect  ${fill(urls.sUrl)}`,
  '',
  'Try:',
  `  curl -i '${fill(urls.pstbck)}'`,
  `  ${cli(`attempt --survey ${SAMPLE_SURVEY} --pid ${SAMPLE_PID}`)}`,
  `  ${cli(`redirects show --survey ${SAMPLE_SURVEY}`)}`,
  '',
  'Ctrl-C stops.',
);
console.log(lines.join('\n'));

const shutdown = async () => {
  await stopStream?.();
  await sync.stop();
  await reconcile?.stop();
  await health?.stop();
  await stack.stop();
  process.exit(0);
};
process.once('SIGINT', shutdown);
process.once('SIGTERM', shutdown);
