/**
 * Write cost: the DynamoDB requests each kind of hit makes and the capacity it consumes, read from the engine
 * (ReturnConsumedCapacity) while the real handlers run against it. Index writes, which the engine does not
 * report, are derived from the item before and after: the ledger's indexes project keys only, so an index is
 * written when its keys appear, change or go, one write unit per key-only entry. Run as its own process by
 * `npm run bench`; reports over IPC. With the argument `feed`, the receivers run as a stack with `attemptFeed`
 * deploys them (ATTEMPT_FEED=on), against a table whose feed covers their hits (its start mark two hours back and
 * its probe noted): their attempts stay out of the day index (ledger/feed-coverage.ts).
 */
import { randomUUID } from 'node:crypto';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { FEED_PROBE_SEEN_KEY, FEED_START_KEY } from '../../functions/ledger/feed-keys';
import { attemptKey, LEDGER } from '../../functions/ledger/ledger-schema';
import { createDocumentClient } from '../../functions/ledger/ledger-store';
import type { Channel, Outcome } from '../../functions/receiving/outcome';
import { lambdaContext } from '../../infra/local/api-gateway';
import { ensureLedgerTable, startEngine } from '../../infra/local/engine';
import { apiEvent, filledUrl, type Handler } from '../support/api-events';
import { itemSize } from '../support/item-size';
import { BENCH_KEY_RING } from './measure';
import { type CommandRecord, recordCommands } from './sdk-hooks';

const engine = await startEngine();
const tableName = 'bench-write-cost';
await ensureLedgerTable(engine.endpoint, tableName);
Object.assign(process.env, {
  TABLE_NAME: tableName,
  DYNAMODB_ENDPOINT: engine.endpoint,
  AWS_REGION: 'us-east-1',
  SIGNING_KEYS: BENCH_KEY_RING,
  LANDING_URL_SUCCESS: 'https://panel.example.com/thanks?pid={pid}',
});
const feedCovers = process.argv[2] === 'feed';
if (feedCovers) {
  process.env.ATTEMPT_FEED = 'on';
  const started = new Date(Date.now() - 2 * 3_600_000).toISOString();
  const writer = createDocumentClient({ endpoint: engine.endpoint });
  await writer.send(
    new PutCommand({
      TableName: tableName,
      Item: { ...FEED_START_KEY, kind: 'attempt-feed-start', at: started },
    }),
  );
  await writer.send(
    new PutCommand({
      TableName: tableName,
      Item: { ...FEED_PROBE_SEEN_KEY, kind: 'attempt-feed-probe-seen', seen: started },
    }),
  );
}
let recording = false;
const records = recordCommands(() => recording);
const { handler: redirect } = (await import('../../functions/redirect')) as { handler: Handler };
const { handler: postback } = (await import('../../functions/postback')) as { handler: Handler };
const reader = createDocumentClient({ endpoint: engine.endpoint });

const SURVEY = '40002';
type Item = Record<string, unknown>;
const read = async (ids: { pid: string; token: string }) =>
  ((await reader.send(new GetCommand({ TableName: tableName, Key: attemptKey(SURVEY, ids.pid, ids.token) })))
    .Item ?? undefined) as Item | undefined;

/** Write units the key-only indexes take for a change from `before` to `after`. */
function indexUnits(before: Item | undefined, after: Item | undefined): number {
  let units = 0;
  for (const index of [LEDGER.index, LEDGER.discrepancyIndex]) {
    const keys = (item: Item | undefined) =>
      item?.[index.partitionKey] === undefined
        ? undefined
        : `${item[index.partitionKey]}\u0000${item[index.sortKey]}`;
    const [was, is] = [keys(before), keys(after)];
    const entry = (item: Item) =>
      Math.ceil(
        itemSize({
          pk: item.pk,
          sk: item.sk,
          [index.partitionKey]: item[index.partitionKey],
          [index.sortKey]: item[index.sortKey],
        }) / 1024,
      );
    if (was === is) continue;
    if (was !== undefined && before) units += entry(before);
    if (is !== undefined && after) units += entry(after);
  }
  return units;
}

interface Scenario {
  readonly name: string;
  readonly channel: Channel;
  readonly outcome: Outcome;
  readonly ids: { pid: string; token: string };
  /** Replays this request id (a retry after a lost answer) instead of a fresh one. */
  readonly requestId?: string;
  readonly forged?: boolean;
  readonly expect: number;
}

async function measure(scenario: Scenario) {
  const url = filledUrl(BENCH_KEY_RING, scenario.channel, SURVEY, scenario.outcome, scenario.ids);
  const event = apiEvent('GET', scenario.forged ? url.replace(/sig=[^&]+/, `sig=${'A'.repeat(43)}`) : url);
  if (scenario.requestId) event.requestContext.requestId = scenario.requestId;
  const before = await read(scenario.ids);
  const from = records.length;
  recording = true;
  const result = (await (scenario.channel === 'redirect' ? redirect : postback)(
    event,
    lambdaContext(scenario.channel),
  )) as { statusCode: number };
  recording = false;
  if (result.statusCode !== scenario.expect)
    throw new Error(`${scenario.name}: answered ${result.statusCode}, expected ${scenario.expect}`);
  const after = await read(scenario.ids);
  const made: CommandRecord[] = records.slice(from);
  const reads = made.filter((r) => /^(Get|Query|BatchGet|Scan)/.test(r.command));
  const writes = made.filter((r) => /^(Update|Put|Delete|BatchWrite)/.test(r.command));
  const failedWrites = writes.filter((r) => r.error);
  // A failed conditional write is charged like a write of the item it was checked against.
  const failedUnits = failedWrites.length * Math.max(1, Math.ceil(itemSize(before ?? {}) / 1024));
  return {
    hit: scenario.name,
    requests: made.map((r) => (r.error ? `${r.command} (${r.error})` : r.command)).join(', ') || 'none',
    writes: writes.length,
    reads: reads.length,
    tableWriteUnits:
      writes.reduce((sum, r) => sum + (r.capacity?.table ?? r.capacity?.total ?? 0), 0) + failedUnits,
    indexWriteUnits: indexUnits(before, after),
    readUnits: reads.reduce((sum, r) => sum + (r.capacity?.total ?? 0), 0),
    itemBytes: after ? itemSize(after) : 0,
    status: result.statusCode,
  };
}

const attempt = () => ({ pid: `panel-${randomUUID().slice(0, 12)}`, token: randomUUID() });
const a = attempt();
const b = attempt();
const c = attempt();
const replayed = randomUUID();
const scenarios: Scenario[] = [
  { name: 'redirect, first hit of an attempt', channel: 'redirect', outcome: 'success', ids: a, expect: 302 },
  { name: 'postback, same attempt', channel: 'postback', outcome: 'success', ids: a, expect: 200 },
  { name: 'redirect, duplicate (refresh)', channel: 'redirect', outcome: 'success', ids: a, expect: 302 },
  { name: 'postback, duplicate (retry)', channel: 'postback', outcome: 'success', ids: a, expect: 200 },
  { name: 'postback, conflicting outcome', channel: 'postback', outcome: 'fail', ids: a, expect: 200 },
  { name: 'redirect, conflicting outcome', channel: 'redirect', outcome: 'fail', ids: a, expect: 200 },
  { name: 'postback, first hit of an attempt', channel: 'postback', outcome: 'success', ids: b, expect: 200 },
  {
    name: 'postback, first try (answer lost)',
    channel: 'postback',
    outcome: 'success',
    ids: c,
    requestId: replayed,
    expect: 200,
  },
  {
    name: 'postback, same request retried',
    channel: 'postback',
    outcome: 'success',
    ids: c,
    requestId: replayed,
    expect: 200,
  },
  {
    name: 'redirect, forged signature',
    channel: 'redirect',
    outcome: 'success',
    ids: attempt(),
    forged: true,
    expect: 302,
  },
  {
    name: 'postback, forged signature',
    channel: 'postback',
    outcome: 'success',
    ids: attempt(),
    forged: true,
    expect: 403,
  },
];
if (feedCovers) {
  // The containers' read of the feed's start and probe note (once, when each starts) is not a hit's: it is done
  // before the measured hits.
  await measure({ ...scenarios[0], name: 'warm-up', ids: attempt() } as Scenario);
  await new Promise((resolve) => setTimeout(resolve, 200));
}
const rows = [];
for (const scenario of scenarios) rows.push(await measure(scenario));
process.send?.({ rows });
await engine.stop();
