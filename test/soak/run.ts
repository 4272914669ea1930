/**
 * `npm run soak`: the durability suite at size. The whole local stack, with the store behind a proxy that
 * throttles, fails and stalls a share of requests; SOAK_HITS hits (default 100,000: postbacks, redirects and
 * replays of both) from SOAK_SENDERS concurrent senders. Then the faults stop, the buffer drains, and every
 * acknowledged hit is looked up in the ledger. Prints the figures RELIABILITY.md records; exits non-zero on loss.
 */
import '../../infra/local/environment';
import { randomUUID } from 'node:crypto';
import { createDocumentClient, createLedgerStore } from '../../functions/ledger/ledger-store';
import { DEV_KEY_RING } from '../../functions/runtime/local-stack-defaults';
import { LOCAL_RESPONDENT_ADDRESS } from '../../infra/local/api-gateway';
import { ensureLedgerTable, startEngine } from '../../infra/local/engine';
import { startLocalStack } from '../../infra/local/stack';
import { respondentAddress } from '../bench/measure';
import { filledUrl } from '../support/api-events';
import { startEngineProxy } from '../support/engine-proxy';

const HITS = Number(process.env.SOAK_HITS ?? 100_000);
const SENDERS = Number(process.env.SOAK_SENDERS ?? 32);
const FAULTS = { throttle: 0.05, 'server-error': 0.02, hang: 0.002 };

const engine = await startEngine();
const tableName = 'soak-ledger';
await ensureLedgerTable(engine.endpoint, tableName);
const proxy = await startEngineProxy(engine.endpoint);
let injected = 0;
let draw = 0;
proxy.faults((operation) => {
  if (operation !== 'UpdateItem') return undefined;
  // Outages rather than scattered errors: in every 1,000 writes, a run of 50 throttled, 20 failing and 2 stalled,
  // long enough to outlast the SDK's retries. A fixed pattern, so every run injects the same faults.
  const slot = draw++ % 1000;
  const fault =
    slot < FAULTS.throttle * 1000
      ? 'throttle'
      : slot < (FAULTS.throttle + FAULTS['server-error']) * 1000
        ? 'server-error'
        : slot < (FAULTS.throttle + FAULTS['server-error'] + FAULTS.hang) * 1000
          ? 'hang'
          : undefined;
  if (fault) injected++;
  return fault;
});
Object.assign(process.env, {
  PORT: '0',
  MARKETPLACE_PORT: '0',
  SQS_PORT: '0',
  DYNAMODB_ENDPOINT: proxy.endpoint,
  TABLE_NAME: tableName,
  SIGNING_KEYS: DEV_KEY_RING,
  STORE_TIMEOUT_MS: '200',
  SIGNING_KEYS_FILE: '',
  RESPONDENT_INTERVAL_MS: '0',
  POWERTOOLS_LOG_LEVEL: 'ERROR',
});
// The local defaults (applied at import) chose an embedded engine and a key file; this run brings its own.
delete process.env.SIGNING_KEYS_FILE;
delete process.env.LOCAL_ENGINE;
const stack = await startLocalStack();

// Each attempt: a success or fail postback and its redirect, each sent once or replayed.
const attempts = Math.ceil(HITS / 4);
interface Expected {
  pid: string;
  token: string;
  outcome: 'success' | 'fail';
  postbacks: number;
  redirects: number;
}
const expected: Expected[] = [];
const requests: { url: string; attempt: number; channel: 'postback' | 'redirect' }[] = [];
for (let i = 0; i < attempts && requests.length < HITS; i++) {
  const ids = { pid: `soak-${i}`, token: randomUUID() };
  const outcome = i % 3 === 0 ? 'fail' : 'success';
  expected.push({ ...ids, outcome, postbacks: 0, redirects: 0 });
  for (let copy = 0; copy < 2 && requests.length < HITS; copy++) {
    requests.push({
      url: filledUrl(DEV_KEY_RING, 'postback', '8888', outcome, ids),
      attempt: i,
      channel: 'postback',
    });
    requests.push({
      url: filledUrl(DEV_KEY_RING, 'redirect', '8888', outcome, ids),
      attempt: i,
      channel: 'redirect',
    });
  }
}
for (let i = requests.length - 1; i > 0; i--) {
  const j = (i * 2654435761) % (i + 1);
  [requests[i], requests[j]] = [requests[j] as (typeof requests)[0], requests[i] as (typeof requests)[0]];
}

const statusCounts: Record<number, number> = {};
let buffered = 0;
let next = 0;
let done = 0;
const started = Date.now();
// Progress on stderr every tenth of the run, so a long soak on a slow machine shows it is moving.
const progressEvery = Math.max(1, Math.floor(requests.length / 10));
const progress = () =>
  process.stderr.write(
    `soak: ${done}/${requests.length} hits sent, ${Math.round((Date.now() - started) / 1000)} s\n`,
  );
await Promise.all(
  Array.from({ length: SENDERS }, async () => {
    while (next < requests.length) {
      const request = requests[next++] as (typeof requests)[0];
      const response = await fetch(request.url.replace('https://hits.test', stack.apiUrl), {
        redirect: 'manual',
        // Each attempt its respondent's address (the local gateway's header), as in life.
        headers: { [LOCAL_RESPONDENT_ADDRESS]: respondentAddress(request.attempt) },
      });
      const text = await response.text();
      statusCounts[response.status] = (statusCounts[response.status] ?? 0) + 1;
      const record = expected[request.attempt] as Expected;
      if (request.channel === 'postback' && response.status === 200) {
        record.postbacks++;
        if (text.includes('"buffered"')) buffered++;
      }
      if (request.channel === 'redirect' && (response.status === 302 || response.status === 200))
        record.redirects++;
      if (++done % progressEvery === 0) progress();
    }
  }),
);
const sendSeconds = (Date.now() - started) / 1000;
proxy.faults(undefined);
await stack.drainBuffer();
for (let i = 0; i < 100 && stack.buffer.depth().waiting > 0; i++)
  await new Promise((resolve) => setTimeout(resolve, 200));

const ledger = createLedgerStore(createDocumentClient({ endpoint: engine.endpoint }), tableName);
// Each channel is counted on its own: a hit acknowledged but missing from the ledger is lost; a count above
// what was acknowledged is a double count. Attempts with either are listed (first ten) so a wrong count can be
// attributed, not only counted.
const channels = {
  postback: { lost: 0, overcounted: 0 },
  redirect: { lost: 0, overcounted: 0 },
};
const wrong: { pid: string; channel: string; acknowledged: number; recorded: number }[] = [];
let cursor = 0;
await Promise.all(
  Array.from({ length: 16 }, async () => {
    while (cursor < expected.length) {
      const e = expected[cursor++] as Expected;
      const [attempt] = await ledger.attemptsOf('8888', e.pid);
      const recorded = {
        postback: attempt?.postback?.hits ?? 0,
        redirect: attempt?.redirect?.hits ?? 0,
      };
      for (const channel of ['postback', 'redirect'] as const) {
        const acknowledged = channel === 'postback' ? e.postbacks : e.redirects;
        const difference = recorded[channel] - acknowledged;
        if (difference === 0) continue;
        if (difference < 0) channels[channel].lost += -difference;
        else channels[channel].overcounted += difference;
        wrong.push({ pid: e.pid, channel, acknowledged, recorded: recorded[channel] });
      }
    }
  }),
);
const figures = {
  hitsSent: requests.length,
  senders: SENDERS,
  faultsInjected: injected,
  postbacksBuffered: buffered,
  answers: statusCounts,
  fiveHundreds: Object.entries(statusCounts)
    .filter(([s]) => Number(s) >= 500)
    .reduce((sum, [, n]) => sum + n, 0),
  postbacksLost: channels.postback.lost,
  postbacksCountedTwice: channels.postback.overcounted,
  redirectsLost: channels.redirect.lost,
  redirectsCountedTwice: channels.redirect.overcounted,
  wrongCounts: wrong.slice(0, 10),
  deadLetters: stack.buffer.depth().deadLetters,
  hitsPerSecond: Math.round(requests.length / sendSeconds),
};
console.log(JSON.stringify(figures, null, 2));
await stack.stop();
await proxy.stop();
await engine.stop();
const failed =
  channels.postback.lost > 0 ||
  channels.postback.overcounted > 0 ||
  channels.redirect.lost > 0 ||
  channels.redirect.overcounted > 0 ||
  figures.deadLetters > 0;
process.exit(failed ? 1 : 0);
