/**
 * A simulated week of the real schedule: a few surveys whose attempts arrive every hour, reconciled by the
 * scheduled run every hour on a fake clock for 168 runs, counting the read and write units the reconciler
 * consumes (ReturnConsumedCapacity from the engine) per attempt that arrived in the week. Run as its own process
 * by `reconciliationWeek` (reconciliation-scale.ts); reports over IPC.
 * Usage: reconcile-week <full|default|two|feed|lean> <surveys> <attempts per survey and hour> <hours>
 *
 * `feed`: the defaults with the attempt feed (the `attemptFeed` setting): every write passes the stream stand-in, the
 * real consumer keeps the feed from it before each run, and the reconciler reads a survey's days from it
 * (reconciliation/feed-attempts.ts), as the deployed function does with ATTEMPT_FEED=on. The consumer's own writes
 * are not counted here (`feed-cost.ts` prices them at the shape's batching). `lean`: the feed, and the `matchedVerdicts`
 * setting `implied` (no verdict written on an attempt that tells its agreement by itself).
 *
 * Traffic shape: clicks spread over each hour, the postback ten minutes after the click, one attempt in fifty
 * never arriving here and one in a hundred arriving a day late (a postback the marketplace re-sends, which flags
 * the day its attempt was judged on); each survey's buyer reviews its completes once a day (Pending older than two days becomes
 * Valid, one in twenty Invalid), which changes the rows of settled days. Before the measured hours, a week of the
 * same history is reconciled once, unmeasured, so the window is full from the first run.
 */
import '../../infra/local/environment';
import { createStreamConsumer } from '../../functions/feed/stream-consumer';
import { createAttemptFeed } from '../../functions/ledger/attempt-feed';
import { createDayIndexBackfill } from '../../functions/ledger/day-index-backfill';
import { FEED_PROBE_KEY, FEED_PROBE_SEEN_KEY, FEED_START_KEY } from '../../functions/ledger/feed-keys';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
} from '../../functions/ledger/ledger-store';
import { createMarketplaceClient } from '../../functions/marketplace/marketplace-client';
import { pacificDayRange } from '../../functions/marketplace/pacific-time';
import { feedAttempts } from '../../functions/reconciliation/feed-attempts';
import { reconciler } from '../../functions/reconciliation/reconciler';
import { nextDay } from '../../functions/reconciliation/verdict-rules';
import { ensureLedgerTable, startEngine } from '../../infra/local/engine';
import { startLocalMarketplace } from '../../infra/local/marketplace/server';
import type { SimTransaction } from '../../infra/local/marketplace/state';
import { startTableStream } from '../../infra/local/table-stream';
import { itemSize } from '../support/item-size';
import { billedQueryUnits } from './sdk-hooks';

const [policy = 'default', surveysArg = '3', perHourArg = '4', hoursArg = '168'] = process.argv.slice(2);
const surveys = Number(surveysArg);
const perHour = Number(perHourArg);
const hours = Number(hoursArg);
const HOUR = 3_600_000;
const TOKEN = 'week-token';
const tableName = 'bench-week';

const engine = await startEngine();
await ensureLedgerTable(engine.endpoint, tableName);
// A table past its first hour: the day-index backfill has found nothing to move, so the readers query each survey's
// own partitions only, not the day-wide one of the layout before them.
await createDayIndexBackfill(createDocumentClient({ endpoint: engine.endpoint }), tableName).settle({
  quietMs: 0,
});
const marketplace = await startLocalMarketplace({ accessToken: TOKEN, seedSurveys: false });
// With the feed, every write passes the stream stand-in (the receivers', reconciliation's), the feed's own beside it.
const stream =
  policy === 'feed' || policy === 'lean'
    ? await startTableStream({ engineEndpoint: engine.endpoint, tableName })
    : undefined;
const writes = stream?.endpoint ?? engine.endpoint;
const consume = createStreamConsumer({
  feed: createAttemptFeed(createDocumentClient({ endpoint: engine.endpoint }), tableName),
});
/** Delivers the stream's changes so far to the consumer, a batch of at most 1,000 at a time. */
async function deliverFeed() {
  while (stream && stream.records.length > 0) {
    const result = await consume({ Records: stream.records.splice(0, 1_000) });
    if (result.batchItemFailures.length > 0) throw new Error('the feed could not be written');
  }
}
const seeding = createDocumentClient({ endpoint: writes });
// The ledger changes on the simulation's clock (the flags late hits leave carry its time).
const ledger = createLedgerStore(seeding, tableName, () => new Date(clock));
const registry = createSurveyRegistry(seeding, tableName);

/**
 * The reconciler's own client: every request asks the engine what it consumed, counted by what it touched:
 * attempts (their items, the day index beyond each query's minimum), the run's own records (run state, lease,
 * finished run, the registry listing), or a survey's (its state, day summaries and each day-index query's minimum),
 * which the cost model scales by attempts, runs and survey-runs respectively.
 */
const units = { read: 0, write: 0, attemptRead: 0, attemptWrite: 0, runRead: 0, runWrite: 0 };
type Bucket = 'attempt' | 'run' | 'survey';
function bucketOf(input: Record<string, unknown>): Bucket {
  const key = (input.Key ?? input.Item) as { pk?: unknown } | undefined;
  const requested = Object.values(
    (input.RequestItems ?? {}) as Record<string, { Keys?: { pk?: unknown }[] }>,
  )[0]?.Keys?.[0];
  const values = (input.ExpressionAttributeValues ?? {}) as Record<string, unknown>;
  const pk = String(key?.pk ?? requested?.pk ?? values[':pk'] ?? '');
  // The feed's days are read per bucket and day as the day index is per survey and day: attempts beyond the minimum.
  if (pk === FEED_START_KEY.pk || pk === FEED_PROBE_KEY.pk || pk === FEED_PROBE_SEEN_KEY.pk) return 'run';
  if (pk.startsWith('ATTEMPT') || pk.startsWith('FEED#')) return 'attempt';
  if (pk.startsWith('RUN#') || pk === 'SURVEYS') return 'run';
  return 'survey';
}
/** Read units of the smallest Query of the day index or the feed (eventually consistent, as every such query). */
const QUERY_MINIMUM = 0.5;
let measuring = false;
const client = createDocumentClient({ endpoint: writes });
const WRITES = new Set(['PutItemCommand', 'UpdateItemCommand', 'DeleteItemCommand', 'BatchWriteItemCommand']);
client.middlewareStack.add(
  (next, context) => async (args) => {
    const input = args.input as Record<string, unknown>;
    if ('TableName' in input || 'RequestItems' in input) input.ReturnConsumedCapacity = 'TOTAL';
    const result = await next(args);
    if (!measuring) return result;
    const consumed = (result.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
    const list = (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) as {
      CapacityUnits?: number;
    }[];
    const command = String(context.commandName);
    const reported = list.reduce((sum, c) => sum + (c.CapacityUnits ?? 0), 0);
    const bucket = bucketOf(input);
    // A feed Query's pages here hold the few attempts of this week's surveys, under the 4 KB a read unit's half
    // covers: at the stated shape a bucket's day is megabytes. So its attempts are charged what their bytes cost at
    // any size (half a unit per 4 KB, not rounded up), the query its minimum.
    const feedBytes =
      command === 'QueryCommand' &&
      bucket === 'attempt' &&
      String(
        input.ExpressionAttributeValues &&
          (input.ExpressionAttributeValues as Record<string, unknown>)[':pk'],
      ).startsWith('FEED#')
        ? ((result.output as { Items?: Record<string, unknown>[] }).Items ?? []).reduce(
            (sum, item) => sum + itemSize(item),
            0,
          )
        : undefined;
    const total =
      feedBytes !== undefined
        ? QUERY_MINIMUM + (feedBytes / 4096) * QUERY_MINIMUM
        : command === 'QueryCommand'
          ? billedQueryUnits(reported, input)
          : reported;
    if (WRITES.has(command)) {
      units.write += total;
      if (bucket === 'attempt') units.attemptWrite += total;
      if (bucket === 'run') units.runWrite += total;
    } else {
      units.read += total;
      // A day-index query costs half a unit however few attempts it returns: that minimum is the survey's (one
      // per survey, day and index partition read), what it costs beyond it the attempts'. Charged to the attempts,
      // the minimum would be scaled by the attempts of the stated shape, ten times this week's per survey.
      const attemptShare =
        command === 'QueryCommand' && bucket === 'attempt' ? Math.max(0, total - QUERY_MINIMUM) : total;
      if (bucket === 'attempt') units.attemptRead += attemptShare;
      if (bucket === 'run') units.runRead += total;
    }
    return result;
  },
  { step: 'initialize', name: 'consumedCapacity' },
);

// A week that starts on a Monday at Pacific midnight, clear of daylight-saving changes.
const T0 = pacificDayRange('2026-06-08').start.getTime();
let clock = T0;
const STATUSES = ['Completed', 'Completed', 'Completed', 'Failed', 'Over Quota'] as const;
let sequence = 0;

for (let s = 0; s < surveys; s++) {
  marketplace.state.addSurvey({ surveyId: 95_000 + s, cpi: '1.75' }, new Date(T0 - 30 * 24 * HOUR));
  await registry.put({
    surveyId: String(95_000 + s),
    state: 'active',
    verified: true,
    failures: 0,
    expectedCpi: '1.75',
    updatedAt: new Date(T0 - 30 * 24 * HOUR).toISOString(),
  });
}

/** Postbacks that arrive a day late, and when. */
const late: { hit: Parameters<typeof ledger.recordHit>[0]; at: number }[] = [];

/** The attempts of the hour ending at `end`: transactions at the marketplace, postbacks here. */
async function arrive(end: number): Promise<number> {
  let arrived = 0;
  for (const due of late.filter((l) => l.at <= end)) {
    late.splice(late.indexOf(due), 1);
    await ledger.recordHit(due.hit, new Date(due.at));
  }
  for (let s = 0; s < surveys; s++) {
    for (let i = 0; i < perHour; i++) {
      const n = ++sequence;
      const clickedAt = new Date(end - HOUR + (i * (HOUR - 15 * 60_000)) / perHour);
      const status = STATUSES[n % STATUSES.length] as (typeof STATUSES)[number];
      const t: SimTransaction = {
        surveyId: 95_000 + s,
        token: `w-${n}`,
        pid: `p-${n}`,
        status,
        ip: '198.51.100.1',
        trackId: `w-${n}`,
        termReason: '',
        clickedAt,
        ...(status === 'Completed' ? { completedAt: new Date(clickedAt.getTime() + 10 * 60_000) } : {}),
        verifyToken: 'Pending',
        notified: true,
      };
      marketplace.state.transactions.push(t);
      arrived++;
      if (n % 50 === 0) continue;
      const hit = {
        channel: 'postback' as const,
        surveyId: String(t.surveyId),
        outcome: status === 'Completed' ? ('success' as const) : ('fail' as const),
        pid: t.pid,
        token: t.token,
        source: 'query' as const,
      };
      if (n % 100 === 25) late.push({ hit, at: clickedAt.getTime() + 24 * HOUR });
      else await ledger.recordHit(hit, new Date(clickedAt.getTime() + 10 * 60_000));
    }
  }
  return arrived;
}

/** Each survey's buyer reviews once a day, at its own hour: Pending completes older than two days are decided. */
function review(at: number, everySurvey = false) {
  const hour = Math.floor((at - T0) / HOUR);
  for (const t of marketplace.state.transactions) {
    const reviewHour = (((t.surveyId - 95_000) * 7) % 24) + 24 * Math.floor(hour / 24);
    if (hour !== reviewHour && !everySurvey) continue;
    if (
      t.status === 'Completed' &&
      t.verifyToken === 'Pending' &&
      (t.completedAt?.getTime() ?? at) < at - 48 * HOUR
    )
      t.verifyToken = Number(t.token.slice(2)) % 20 === 0 ? 'Invalid' : 'Valid';
  }
}

const attemptStore = createLedgerStore(client, tableName);
// Read as the deployed function reads it with ATTEMPT_FEED=on, on the simulation's clock; on since before the week.
const fromFeed = feedAttempts({
  feed: createAttemptFeed(client, tableName),
  items: attemptStore,
  feedLagMs: 420_000,
  now: () => new Date(clock),
  // Delivered before every run: a fallback to the items would measure them, not the feed.
  onBehind: (touchedAt) => {
    throw new Error(`the feed's probe (touched ${touchedAt}) went unseen: the week would read the items`);
  },
});
if (stream)
  await createAttemptFeed(seeding, tableName).markStart(
    new Date(T0 - 60 * 24 * HOUR).toISOString(),
    stream.arn,
  );
const engineOf = () =>
  reconciler({
    marketplace: createMarketplaceClient({ baseUrl: marketplace.url, accessToken: () => TOKEN }),
    attempts: stream ? { ...attemptStore, attemptsOfSurvey: fromFeed.attemptsOfSurvey } : attemptStore,
    ...(stream
      ? {
          attemptsLagMs: fromFeed.lagMs,
          attemptsAsOf: fromFeed.asOf,
          readOrder: fromFeed.inReadOrder,
        }
      : {}),
    registry: createSurveyRegistry(client, tableName),
    results: createReconciliationStore(client, tableName),
    now: () => new Date(clock),
    settleMs: 600_000,
    ...(policy === 'full' ? { freshDays: 7 } : policy === 'two' ? { freshDays: 2 } : {}),
    ...(policy === 'lean' ? { impliedMatches: true } : {}),
  });

// The week before: arrived and reconciled once, unmeasured.
for (let end = T0 - 7 * 24 * HOUR + HOUR; end <= T0; end += HOUR) await arrive(end);
review(T0, true);
const firstDay = nextDay('2026-06-08', -7);
await deliverFeed();
await engineOf().run(firstDay, '2026-06-07');

let attempts = 0;
let wallMs = 0;
measuring = true;
for (let h = 1; h <= hours; h++) {
  clock = T0 + h * HOUR;
  measuring = false;
  attempts += await arrive(clock);
  review(clock);
  await deliverFeed();
  measuring = true;
  const started = performance.now();
  const report = await engineOf().scheduled(7, { deadline: new Date(clock + HOUR) });
  wallMs += performance.now() - started;
  if (!report?.complete || report.outcomes.some((o) => o.status !== 'reconciled'))
    throw new Error(`run ${h} did not reconcile every survey`);
}

process.send?.({
  policy,
  runs: hours,
  surveys,
  attempts,
  readUnits: units.read,
  attemptReadUnits: units.attemptRead,
  writeUnits: units.write,
  attemptWriteUnits: units.attemptWrite,
  runReadUnits: units.runRead,
  runWriteUnits: units.runWrite,
  msPerRun: wallMs / hours,
});
process.on('disconnect', async () => {
  await marketplace.stop();
  await stream?.stop();
  await engine.stop();
  process.exit(0);
});
