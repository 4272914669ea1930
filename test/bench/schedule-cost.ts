/**
 * What the scheduled functions other than reconciliation cost per run, with every DynamoDB command's consumed
 * capacity read from the engine and the marketplace calls counted, over `surveys` live surveys:
 *
 * - the redirect sync in its steady state (every survey applied and verified, nothing new at the marketplace);
 * - the survey health check in its steady state (every survey's health stored, nothing changing), once with no
 *   traffic and once with `attemptsPerSurvey` attempts per survey (a redirect and a postback each) spread over
 *   the span a run reads: the difference is what each attempt costs a run that reads it. A warm container reads
 *   an attempt only until both channels have reported (health-window.ts, `sightingsCache`): the runs after the
 *   first are measured too, and the cost model assumes an attempt read by two runs and by one in twelve of the
 *   rest (a container replaced every hour).
 *
 * Each figure is per run and per survey (or per attempt), so the cost model can scale it to a supplier's size.
 * Run as its own process by `npm run bench`; reports over IPC. With `feed` as its fifth argument the stack keeps the
 * attempt feed (the `attemptFeed` setting: the engine behind the local stand-in for the table's stream, the feed's
 * consumer delivered to before each measured run) and the health check reads its window from the feed.
 */
import { randomUUID } from 'node:crypto';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { DEFAULT_HEALTH_SETTINGS, readFrom } from '../../functions/health/health-rules';
import { createAttemptFeed } from '../../functions/ledger/attempt-feed';
import { FEED_START_KEY } from '../../functions/ledger/feed-keys';
import {
  createDayIndexBackfill,
  createDocumentClient,
  createLedgerStore,
} from '../../functions/ledger/ledger-store';
import { lambdaContext } from '../../infra/local/api-gateway';
import { ensureLedgerTable, startEngine } from '../../infra/local/engine';
import { startLocalMarketplace } from '../../infra/local/marketplace/server';
import { pollTableStream, type StreamHandler, startTableStream } from '../../infra/local/table-stream';
import { acceptedByFeed } from '../../infra/routes';
import { BENCH_KEY_RING, median } from './measure';
import { recordCommands } from './sdk-hooks';

const surveys = Number(process.argv[2] ?? 200);
const runs = Number(process.argv[3] ?? 5);
/** About what a survey of the cost model's traffic shape brings in half an hour (15,000 attempts a month). */
const attemptsPerSurvey = Number(process.argv[4] ?? 10);
const withFeed = process.argv[5] === 'feed';
const TOKEN = 'bench-token';
/** The deployed health schedule's default (`health.scheduleMinutes`, infra/settings.ts). */
const HEALTH_SCHEDULE_MINUTES = 5;
const tableName = 'bench-schedules';

const engine = await startEngine();
await ensureLedgerTable(engine.endpoint, tableName);
// A table past its first hour: the scheduled day-index backfill has found nothing to move and says so.
await createDayIndexBackfill(createDocumentClient({ endpoint: engine.endpoint }), tableName).settle({
  quietMs: 0,
});
// With the feed, every client reaches the engine through the stream's stand-in, as a deployed table streams.
const stream = withFeed ? await startTableStream({ engineEndpoint: engine.endpoint, tableName }) : undefined;
const endpoint = stream?.endpoint ?? engine.endpoint;
const FEED_SINCE = '2026-01-01T00:00:00.000Z';
// A feed running for long (its start marked well before any span, for this stream: the consumer's first batch
// leaves it), so the health check reads it.
if (stream)
  await createDocumentClient({ endpoint: engine.endpoint }).send(
    new PutCommand({
      TableName: tableName,
      Item: { ...FEED_START_KEY, at: FEED_SINCE, stream: stream.arn },
    }),
  );
const marketplace = await startLocalMarketplace({ accessToken: TOKEN, seedSurveys: false });
// Created a day ago: the steady state is surveys the sync has long configured, not ones inside its skew margin.
const created = new Date(Date.now() - 86_400_000);
for (let s = 0; s < surveys; s++) marketplace.state.addSurvey({ surveyId: 70_000 + s, cpi: '1.50' }, created);

Object.assign(process.env, {
  TABLE_NAME: tableName,
  DYNAMODB_ENDPOINT: endpoint,
  ATTEMPT_FEED: withFeed ? 'on' : 'off',
  AWS_REGION: 'us-east-1',
  SIGNING_KEYS: BENCH_KEY_RING,
  MARKETPLACE_BASE_URL: marketplace.url,
  MARKETPLACE_ACCESS_TOKEN: TOKEN,
  // A host that resolves here (the sync checks its public host before touching a survey).
  PUBLIC_BASE_URL: 'https://localhost',
});

let marketplaceCalls = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = (input, init) => {
  if (String(input instanceof Request ? input.url : input).startsWith(marketplace.url)) marketplaceCalls++;
  return realFetch(input, init);
};

let recording = false;
const records = recordCommands(() => recording);
type Scheduled = (event: unknown, context: ReturnType<typeof lambdaContext>) => Promise<unknown>;
const { handler: sync } = (await import('../../functions/redirect-sync')) as { handler: Scheduled };
const { handler: health } = (await import('../../functions/health')) as { handler: Scheduled };
const consumer = stream
  ? pollTableStream(
      stream,
      ((await import('../../functions/attempt-feed')) as { handler: StreamHandler }).handler,
      { accept: acceptedByFeed, background: false, batchSize: 1_000 },
    )
  : undefined;

/** One scheduled invocation, with the units and calls it made. */
async function measuredRun(name: string, handler: Scheduled) {
  // The feed's consumer keeps up between runs (not measured: feed-cost.ts prices its writes).
  await consumer?.drain();
  records.length = 0;
  marketplaceCalls = 0;
  recording = true;
  const started = performance.now();
  await handler({ source: 'bench' }, lambdaContext(name, randomUUID(), 900_000));
  const ms = performance.now() - started;
  recording = false;
  const errors = records.filter((r) => r.error);
  if (errors.length > 0) throw new Error(`${name}: ${errors.length} store errors (${errors[0]?.error})`);
  const units = records.reduce((sum, r) => sum + (r.capacity?.total ?? 0), 0);
  const writes = records.filter((r) => /^(Put|Update|Delete|BatchWrite)/.test(r.command));
  const writeUnits = writes.reduce((sum, r) => sum + (r.capacity?.total ?? 0), 0);
  return {
    ms,
    requests: records.length,
    readUnits: units - writeUnits,
    writeUnits,
    marketplaceCalls,
  };
}

// The first run applies every survey; the steady state is what follows.
await measuredRun('redirect-sync', sync);
const steady: Awaited<ReturnType<typeof measuredRun>>[] = [];
for (let i = 0; i < runs; i++) steady.push(await measuredRun('redirect-sync', sync));
const per = (key: 'readUnits' | 'writeUnits' | 'requests' | 'marketplaceCalls') =>
  median(steady.map((r) => r[key])) / surveys;

// The health check: the first run stores every survey's health; what follows is the steady state.
const settings = DEFAULT_HEALTH_SETTINGS;
const spanMinutes = (Date.now() - readFrom(settings, new Date()).getTime()) / 60_000;
const runsReadingAnAttempt = Math.ceil(spanMinutes / HEALTH_SCHEDULE_MINUTES);
await measuredRun('health', health);
const quiet: Awaited<ReturnType<typeof measuredRun>>[] = [];
for (let i = 0; i < runs; i++) quiet.push(await measuredRun('health', health));
// Attempts first seen over the last `spanMinutes` less a minute, each answered by its postback a minute later.
const ledger = createLedgerStore(createDocumentClient({ endpoint }), tableName);
const spacing = ((spanMinutes - 2) * 60_000) / attemptsPerSurvey;
for (let s = 0; s < surveys; s++) {
  for (let a = 0; a < attemptsPerSurvey; a++) {
    const seenAt = Date.now() - 120_000 - a * spacing;
    const hit = {
      surveyId: String(70_000 + s),
      outcome: 'success' as const,
      pid: `p${s}-${a}`,
      token: `t${s}-${a}`,
    };
    await ledger.recordHit({ ...hit, channel: 'redirect', source: 'query' }, new Date(seenAt));
    await ledger.recordHit({ ...hit, channel: 'postback', source: 'query' }, new Date(seenAt + 60_000));
  }
}
// The first run after them reads every attempt; the function's container stays warm (one process), so the runs
// after it find them settled (both channels reported) in its cache and read none of them.
const firstBusy = await measuredRun('health', health);
const busy: Awaited<ReturnType<typeof measuredRun>>[] = [];
for (let i = 0; i < runs; i++) busy.push(await measuredRun('health', health));
// Measured from the feed only while its start stood before the span (else the check read the items).
if (
  stream &&
  (await createAttemptFeed(createDocumentClient({ endpoint }), tableName).startedAt()) !== FEED_SINCE
)
  throw new Error("the feed's start mark moved: the health check read the attempt items, not the feed");
const healthPer = (list: typeof quiet, key: 'readUnits' | 'writeUnits' | 'requests') =>
  median(list.map((r) => r[key])) / surveys;
const coldReadsPerAttempt =
  (firstBusy.readUnits / surveys - healthPer(quiet, 'readUnits')) / attemptsPerSurvey;
const warmReadsPerAttempt =
  (healthPer(busy, 'readUnits') - healthPer(quiet, 'readUnits')) / attemptsPerSurvey;
/**
 * Runs that read an attempt from the table: one before its postback arrives (the run between its redirect and
 * its postback), one once it is settled, and one in twelve of the runs whose span holds it again, for a
 * container replaced every hour (an assumption: Lambda keeps a container busy every five minutes warm, without
 * promising how long). From the feed every run of the span reads it (no cache: it costs a Query page's share).
 */
const coldRuns = withFeed
  ? runsReadingAnAttempt
  : Math.min(runsReadingAnAttempt, 2 + runsReadingAnAttempt / 12);

process.send?.({
  surveys,
  runs,
  sync: {
    msPerRun: median(steady.map((r) => r.ms)),
    readUnitsPerSurveyRun: per('readUnits'),
    writeUnitsPerSurveyRun: per('writeUnits'),
    requestsPerSurveyRun: per('requests'),
    marketplaceCallsPerRun: median(steady.map((r) => r.marketplaceCalls)),
  },
  health: {
    msPerRun: median(busy.map((r) => r.ms)),
    spanMinutes,
    runsReadingAnAttempt,
    attemptsPerSurvey,
    readUnitsPerSurveyRun: healthPer(quiet, 'readUnits'),
    writeUnitsPerSurveyRun: healthPer(busy, 'writeUnits'),
    readUnitsPerAttemptRun: coldReadsPerAttempt,
    warmReadUnitsPerAttemptRun: warmReadsPerAttempt,
    coldRuns,
    readUnitsPerAttempt:
      coldReadsPerAttempt * coldRuns + warmReadsPerAttempt * (runsReadingAnAttempt - coldRuns),
    /** What the container-less figure was: every run reading every attempt of its span. */
    readUnitsPerAttemptUncached: coldReadsPerAttempt * runsReadingAnAttempt,
    requestsPerSurveyRun: healthPer(busy, 'requests'),
  },
});
process.once('disconnect', async () => {
  await consumer?.stop();
  await stream?.stop();
  await marketplace.stop();
  await engine.stop();
  process.exit(0);
});
