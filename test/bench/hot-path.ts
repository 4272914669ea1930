/**
 * Hot path: CPU time per redirect hit and per postback inside one process, against a bare handler that returns a
 * constant for the same events. Run as its own process by `npm run bench`, once per mode, reporting over IPC:
 *
 * - `handler`: the store call answered in memory at the client's `send`: the middleware stack, parsing, the
 *   signature check and building the update, which is the receiver's own work;
 * - `sdk`: answered in memory at the HTTP handler instead, so the AWS SDK's request pipeline (marshalling,
 *   endpoint, SigV4 signing, retry bookkeeping, response parsing) runs too: what a Lambda spends besides waiting.
 */
import { randomUUID } from 'node:crypto';
import { marshall } from '@aws-sdk/util-dynamodb';
import { firstHitItem } from '../../functions/ledger/ledger-store';
import type { Channel, Outcome } from '../../functions/receiving/outcome';
import { lambdaContext } from '../../infra/local/api-gateway';
import { apiEvent, filledUrl, type Handler } from '../support/api-events';
import { BENCH_KEY_RING, median } from './measure';
import { answerInMemory, answerSendInMemory } from './sdk-hooks';

const MODE = process.argv[2] === 'sdk' ? 'sdk' : 'handler';
const ROUNDS = Number(process.env.BENCH_HOT_ROUNDS ?? 7);
const PER_ROUND = Number(process.env.BENCH_HOT_HITS ?? 5000);
const SURVEY = '40001';

Object.assign(process.env, {
  TABLE_NAME: 'bench-hot-path',
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'bench',
  AWS_SECRET_ACCESS_KEY: 'bench',
  SIGNING_KEYS: BENCH_KEY_RING,
  LANDING_URL_SUCCESS: 'https://panel.example.com/thanks?pid={pid}&survey={surveyId}',
  // As deployed: successful hits log at DEBUG, so nothing is written per hit.
  POWERTOOLS_LOG_LEVEL: 'INFO',
});

// The store's answer: the item a first hit creates, as the table would return it (ALL_NEW).
const itemFor = (channel: Channel, outcome: Outcome) =>
  firstHitItem(
    { surveyId: SURVEY, pid: 'panel-1', token: randomUUID(), channel, outcome, source: 'query' },
    new Date(),
  );
const items = { redirect: itemFor('redirect', 'success'), postback: itemFor('postback', 'success') };
const channelOf = (input: unknown) =>
  (input as { ExpressionAttributeNames?: Record<string, string> }).ExpressionAttributeNames?.['#standing'] ===
  'postbackOutcome'
    ? 'postback'
    : 'redirect';
const storeRequests =
  MODE === 'sdk'
    ? answerInMemory((operation, request) =>
        operation === 'UpdateItem'
          ? { Attributes: marshall(items[channelOf(request)], { removeUndefinedValues: true }) }
          : {},
      )
    : answerSendInMemory((command, input) =>
        command === 'Update' ? { Attributes: items[channelOf(input)] } : {},
      );

const { handler: redirect } = (await import('../../functions/redirect')) as { handler: Handler };
const { handler: postback } = (await import('../../functions/postback')) as { handler: Handler };
const bare: Handler = async () => ({ statusCode: 200, body: '' });

const events = (channel: Channel) =>
  Array.from({ length: 1000 }, (_, i) =>
    apiEvent(
      'GET',
      filledUrl(BENCH_KEY_RING, channel, SURVEY, 'success', { pid: `panel-${i}`, token: randomUUID() }),
      // A respondent each, as in life (one address would meet the redirects' per-sender bound).
      { sourceIp: `198.51.${i >> 8}.${i & 255}` },
    ),
  );
const contexts = Array.from({ length: 1000 }, () => lambdaContext('bench'));
const cases = {
  bare: { handler: bare, events: events('redirect'), expect: 200 },
  redirect: { handler: redirect, events: events('redirect'), expect: 302 },
  postback: { handler: postback, events: events('postback'), expect: 200 },
} as const;
type Case = keyof typeof cases;

async function run(name: Case, hits: number) {
  const { handler, events: list, expect } = cases[name];
  const before = storeRequests();
  const cpu = process.cpuUsage();
  const started = performance.now();
  let unexpected = 0;
  for (let i = 0; i < hits; i++) {
    const result = (await handler(
      list[i % list.length] as never,
      contexts[i % contexts.length] as never,
    )) as {
      statusCode: number;
    };
    if (result.statusCode !== expect) unexpected++;
  }
  const wallMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  if (unexpected > 0) throw new Error(`${name}: ${unexpected} of ${hits} answers were not ${expect}`);
  const requests = storeRequests() - before;
  if (name !== 'bare' && requests !== hits)
    throw new Error(`${name}: ${requests} store requests for ${hits} hits`);
  return { cpuUs: (used.user + used.system) / hits, wallUs: (wallMs * 1000) / hits };
}

// Warm up every path (JIT, caches, the key ring), then interleave the cases round by round.
for (const name of Object.keys(cases) as Case[]) await run(name, 2000);
const samples: Record<Case, { cpuUs: number; wallUs: number }[]> = { bare: [], redirect: [], postback: [] };
for (let round = 0; round < ROUNDS; round++) {
  const order = (Object.keys(cases) as Case[]).sort(() => Math.random() - 0.5);
  for (const name of order) samples[name].push(await run(name, PER_ROUND));
}
const summary = Object.fromEntries(
  (Object.keys(samples) as Case[]).map((name) => [
    name,
    {
      cpuUs: median(samples[name].map((s) => s.cpuUs)),
      wallUs: median(samples[name].map((s) => s.wallUs)),
    },
  ]),
);
const response = (await redirect(cases.redirect.events[0] as never, contexts[0] as never)) as {
  headers?: Record<string, string>;
  body?: string;
};
process.send?.({
  mode: MODE,
  rounds: ROUNDS,
  hitsPerRound: PER_ROUND,
  ...summary,
  // Bytes the receiver adds to a redirect answer (headers and body), for the data-transfer estimate.
  redirectResponseBytes:
    Buffer.byteLength(response.body ?? '') +
    Object.entries(response.headers ?? {}).reduce((sum, [k, v]) => sum + k.length + String(v).length + 4, 0),
});
