/**
 * `npm run bench`: every benchmark, each figure a median over several runs next to its floor measured in the same
 * run, with the ratio between them. BENCH_ONLY picks sections (cold,hot,writes,throughput,reconcile,finance,cost);
 * sizes and repeats are set with the variables below. Prints tables; BENCH_JSON=path saves the results as JSON.
 */
import { writeFileSync } from 'node:fs';
import { HIT_PATHS } from '../../functions/receiving/survey-urls';
import { FEED_BATCHING_WINDOW } from '../../infra/constructs/attempt-feed';
import { ACCESS_LOG_FIELDS } from '../../infra/constructs/hit-api';
import { coldStart } from './cold-start';
import {
  ASSUMPTIONS,
  costPerMillionHits,
  feedCostPerMillionHits,
  PRICES,
  SCHEDULE_ASSUMPTIONS,
  type ScheduledUsage,
  scheduledCostPerMillionHits,
  TRAFFIC_SHAPE,
} from './cost';
import { feedWriteCost } from './feed-cost';
import { financeQueries } from './finance-queries';
import { localThroughput } from './local-throughput';
import { fmt, median, runInProcess } from './measure';
import { type ReconcileWeek, reconciliationScale, reconciliationWeek } from './reconciliation-scale';

interface ScheduleCost {
  sync: ScheduledUsage['sync'];
  health: NonNullable<ScheduledUsage['health']> & { spanMinutes: number; runsReadingAnAttempt: number };
}
/** Store requests per survey in a steady-state reconciliation run (section 5: 176 for 8 surveys). */
const RECONCILE_REQUESTS_PER_SURVEY_RUN = 22;

/** An access log line of a redirect hit as the stage's format writes it, with values of their usual length. */
function accessLogLineBytes(): number {
  const sample: Record<string, string> = {
    '$context.requestId': 'dFgXcjV2oAMEb3Q=',
    '$context.requestTimeEpoch': '1795430400123',
    '$context.identity.sourceIp': '203.0.113.254',
    '$context.routeKey': `GET ${HIT_PATHS.redirect}`,
    '$context.path': '/redirect/12345678/success',
    '$context.status': '302',
    '$context.responseLatency': '23',
    '$context.integrationLatency': '21',
    '$context.integrationErrorMessage': '-',
  };
  const line = JSON.stringify(
    Object.fromEntries(
      Object.entries(ACCESS_LOG_FIELDS).map(([key, value]) => [key, sample[value] ?? value]),
    ),
  );
  return Buffer.byteLength(line, 'utf8');
}

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
const numbers = (value: string) => value.split(',').map(Number);
const settings = {
  only: new Set((process.env.BENCH_ONLY ?? 'cold,hot,writes,throughput,reconcile,finance,cost').split(',')),
  repeat: Number(process.env.BENCH_REPEAT ?? 3),
  coldRuns: Number(process.env.BENCH_COLD_RUNS ?? 15),
  senders: numbers(process.env.BENCH_SENDERS ?? '1,8,32'),
  throughputHits: Number(process.env.BENCH_THROUGHPUT_HITS ?? 3000),
  surveys: numbers(process.env.BENCH_SURVEYS ?? '8,16,32'),
  perSurvey: Number(process.env.BENCH_PER_SURVEY ?? 1000),
  financeSurveys: Number(process.env.BENCH_FINANCE_SURVEYS ?? 1000),
  financeDays: Number(process.env.BENCH_FINANCE_DAYS ?? 30),
};
const TARGETS = { coldStartRatio: 1.2, hotPathUs: 100, costUsd: 2.5 };

const started = Date.now();
const results: Record<string, unknown> = { settings: { ...settings, only: [...settings.only] } };
const section = (name: string, title: string) => {
  if (!settings.only.has(name)) return false;
  console.log(`\n${title}`);
  return true;
};

if (
  section(
    'cold',
    `1. Cold start (median import, and the receivers' first hit, of ${settings.coldRuns} fresh processes per bundle)`,
  )
) {
  const cold = await coldStart({
    runs: settings.coldRuns,
    sizeTarget: TARGETS.coldStartRatio,
    importTarget: TARGETS.coldStartRatio,
  });
  results.coldStart = cold;
  console.table(cold.rows);
  console.log('what the redirect bundle holds beyond the floor:');
  console.table(cold.redirectExtra);
}

interface HotPath {
  bare: { cpuUs: number; wallUs: number };
  redirect: { cpuUs: number; wallUs: number };
  postback: { cpuUs: number; wallUs: number };
  redirectResponseBytes: number;
}
if (section('hot', '2. Hot path (CPU per hit in one process; medians of 7 rounds of 5,000 hits)')) {
  const handler = await runInProcess<HotPath>('test/bench/hot-path.ts', ['handler']);
  const sdk = await runInProcess<HotPath>('test/bench/hot-path.ts', ['sdk']);
  results.hotPath = { handler, sdk };
  const row = (store: string, run: HotPath, kind: 'redirect' | 'postback') => ({
    hit: kind,
    store,
    floorUs: fmt(run.bare.cpuUs, 2),
    cpuUs: fmt(run[kind].cpuUs, 1),
    ratio: fmt(run[kind].cpuUs / run.bare.cpuUs, 0),
    target: store === 'at send' ? (run[kind].cpuUs < TARGETS.hotPathUs ? 'met' : 'missed') : 'n/a',
  });
  console.table([
    row('at send', handler, 'redirect'),
    row('at send', handler, 'postback'),
    row('at socket', sdk, 'redirect'),
    row('at socket', sdk, 'postback'),
  ]);
}

interface WriteCostRow {
  hit: string;
  tableWriteUnits: number;
  indexWriteUnits: number;
}
if (section('writes', '3. Write cost (requests and capacity per hit, from the engine)')) {
  const writes = await runInProcess<{ rows: WriteCostRow[] }>('test/bench/write-cost.ts');
  results.writeCost = writes;
  console.table(writes.rows);
  // With attemptFeed, against a table whose feed covers the hits: their attempts stay out of the day index.
  const withFeed = await runInProcess<{ rows: WriteCostRow[] }>('test/bench/write-cost.ts', ['feed']);
  results.writeCostWithFeed = withFeed;
  console.log('with the attempt feed covering the hits (attemptFeed):');
  console.table(withFeed.rows);
}

if (
  section(
    'throughput',
    `4. Local throughput (${settings.throughputHits} hits per run; stack and engine in processes of their own)`,
  )
) {
  const throughput = await localThroughput({ senders: settings.senders, hits: settings.throughputHits });
  results.throughput = throughput;
  console.table(throughput.rows);
}

if (
  section(
    'reconcile',
    `5. Reconciliation scale (${settings.perSurvey} transactions and attempts per survey; medians of ${settings.repeat})`,
  )
) {
  const reconciliation = await reconciliationScale(settings.surveys, settings.perSurvey, settings.repeat);
  results.reconciliation = reconciliation;
  console.table(reconciliation.rows);
  console.log('first run (writes every verdict):');
  console.table([reconciliation.first]);
  const week = await reconciliationWeek({
    surveys: Number(process.env.BENCH_WEEK_SURVEYS ?? 2),
    perHour: Number(process.env.BENCH_WEEK_PER_HOUR ?? 2),
    hours: Number(process.env.BENCH_WEEK_HOURS ?? 168),
  });
  results.reconciliationWeek = week;
  console.log('a simulated week of the hourly schedule (capacity units per attempt over its week):');
  console.table(week);
}

if (
  section(
    'finance',
    `6. Finance queries (${settings.financeDays} days x ${settings.financeSurveys} surveys; medians of ${settings.repeat})`,
  )
) {
  const finance = await financeQueries({
    surveys: settings.financeSurveys,
    days: settings.financeDays,
    discrepanciesPerSurveyDay: 2,
    repeat: settings.repeat,
  });
  results.finance = finance;
  console.error(`finance fixture seeded in ${fmt(finance.seedSeconds, 1)} s`);
  console.table(finance.rows);
  const ten = finance.tenTimes;
  console.log(
    `at ten times (${ten.surveys} surveys, ${ten.rows} survey-days, the store's answers from memory): added up in ${fmt(ten.totalsMs, 0)} ms, holding ${fmt(ten.totalsHeapMb, 1)} MB; by day refused after ${ten.byDayDaysRead} of ${settings.financeDays} days read, in ${fmt(ten.byDayRefusedMs, 0)} ms`,
  );
}

const cold = results.coldStart as Awaited<ReturnType<typeof coldStart>> | undefined;
const hot = results.hotPath as { sdk: HotPath } | undefined;
const writes = results.writeCost as { rows: WriteCostRow[] } | undefined;
const writesWithFeed = results.writeCostWithFeed as { rows: WriteCostRow[] } | undefined;
if (section('cost', `7. Cost per million hits in AWS (${PRICES.asOf})`)) {
  if (!cold || !hot || !writes) {
    console.log('needs the cold, hot and writes sections in the same run');
  } else {
    const units = (rows: readonly WriteCostRow[], name: string) => {
      const row = rows.find((r) => r.hit === name);
      if (!row) throw new Error(`write cost has no row "${name}"`);
      return row.tableWriteUnits + row.indexWriteUnits;
    };
    const memoryMb = Number(cold.rows.find((r) => r.function === 'redirect')?.memoryMb);
    const hitPath = (rows: readonly WriteCostRow[]) =>
      costPerMillionHits({
        memoryMb,
        cpuUsPerHit: median([hot.sdk.redirect.cpuUs, hot.sdk.postback.cpuUs]),
        importMs: median([cold.importMs.redirect ?? 0, cold.importMs.postback ?? 0]),
        firstHitWriteUnits: units(rows, 'redirect, first hit of an attempt'),
        secondHitWriteUnits: units(rows, 'postback, same attempt'),
        responseBytes: hot.sdk.redirectResponseBytes,
        accessLogLineBytes: accessLogLineBytes(),
      });
    const cost = hitPath(writes.rows);
    results.cost = { ...cost, prices: PRICES, assumptions: ASSUMPTIONS };
    console.table(cost.lines);
    console.log(
      `hit path: USD ${fmt(cost.totalUsd, 2)} per million hits; assumptions: ${JSON.stringify(ASSUMPTIONS)}`,
    );
    const week = (results.reconciliationWeek as ReconcileWeek[] | undefined)?.find(
      (w) => w.policy === 'default',
    );
    if (!week) {
      console.log('the all-in figure needs the reconcile section in the same run');
    } else {
      const schedules = await runInProcess<ScheduleCost>('test/bench/schedule-cost.ts', ['200', '3']);
      /** The units a simulated week's policy consumed, as the cost model takes them. */
      const unitsOfWeek = (w: ReconcileWeek) => ({
        readUnitsPerAttemptWeek: w.attemptReadUnitsPerAttemptWeek,
        readUnitsPerSurveyRun: w.otherReadUnitsPerSurveyRun,
        writeUnitsPerAttemptWeek: w.attemptWriteUnitsPerAttemptWeek,
        writeUnitsPerSurveyRun: w.otherWriteUnitsPerSurveyRun,
        readUnitsPerRun: w.runReadUnitsPerRun,
        writeUnitsPerRun: w.runWriteUnitsPerRun,
      });
      const reconcileUsage: ScheduledUsage['reconcile'] = {
        ...unitsOfWeek(week),
        requestsPerSurveyRun: RECONCILE_REQUESTS_PER_SURVEY_RUN,
        marketplaceCallsPerSurveyRun: 1,
      };
      const scheduled = scheduledCostPerMillionHits({
        reconcile: reconcileUsage,
        sync: schedules.sync,
        health: schedules.health,
      });
      const allIn = cost.totalUsd + scheduled.totalUsd;
      results.scheduledCost = { ...scheduled, schedules, assumptions: SCHEDULE_ASSUMPTIONS };
      console.log(`scheduled functions at ${JSON.stringify(scheduled.shape)}:`);
      console.table(scheduled.lines);
      console.log(
        `all in: USD ${fmt(allIn, 2)} per million hits (target at most ${fmt(TARGETS.costUsd, 2)}: ${allIn <= TARGETS.costUsd ? 'met' : 'missed'})`,
      );
      // The attempt feed (the attemptFeed setting, off by default): priced apart, with the health check reading it.
      // Each verdict written is a change the feed keeps: as many per attempt as the simulated week wrote.
      const weekOf = (policy: string) =>
        (results.reconciliationWeek as ReconcileWeek[] | undefined)?.find((w) => w.policy === policy);
      const verdictWritesOf = (policy: string) => {
        const week = weekOf(policy);
        return week ? { verdictWrites: week.attemptWriteUnitsPerAttemptWeek } : {};
      };
      const feeds = [];
      for (const shards of [1, 4, 16]) {
        const measured = await feedWriteCost({
          ...TRAFFIC_SHAPE,
          windowSeconds: FEED_BATCHING_WINDOW.toSeconds(),
          shards,
          ...verdictWritesOf('feed'),
        });
        feeds.push({ shards, ...measured, cost: feedCostPerMillionHits(measured) });
      }
      results.attemptFeed = feeds;
      const deployed = feeds.find((f) => f.shards === 4);
      console.log(
        `attempt feed (attemptFeed, off by default: priced apart), ${FEED_BATCHING_WINDOW.toSeconds()} s batches, 4 stream shards assumed:`,
      );
      if (deployed) console.table(deployed.cost.lines);
      // With the feed the health check reads its window from it: measured the same way, the feed's consumer
      // delivered to before each run.
      const feedSchedules = await runInProcess<ScheduleCost>('test/bench/schedule-cost.ts', [
        '200',
        '3',
        '10',
        'feed',
      ]);
      // And reconciliation reads its attempts from it: the simulated week's `feed` policy.
      const reconcileOfWeek = (w: ReconcileWeek | undefined): ScheduledUsage['reconcile'] =>
        w ? { ...reconcileUsage, ...unitsOfWeek(w) } : reconcileUsage;
      const reconcileWithFeed = reconcileOfWeek(weekOf('feed'));
      const scheduledWithFeed = scheduledCostPerMillionHits({
        reconcile: reconcileWithFeed,
        sync: schedules.sync,
        health: feedSchedules.health,
      });
      // The hit path with the feed covering its hits (no day-index write on an attempt's first hit).
      const hitPathWithFeed = writesWithFeed ? hitPath(writesWithFeed.rows) : cost;
      results.costWithFeed = hitPathWithFeed;
      console.log(
        `hit path with the attempt feed covering its hits: USD ${fmt(hitPathWithFeed.totalUsd, 2)} per million hits (${hitPathWithFeed.lines.find((l) => l.item === 'DynamoDB writes')?.basis})`,
      );
      const allInWithFeed =
        hitPathWithFeed.totalUsd + scheduledWithFeed.totalUsd + (deployed?.cost.totalUsd ?? 0);
      results.scheduledCostWithFeed = { ...scheduledWithFeed, schedules: feedSchedules };
      console.log('with the attempt feed, reconciliation and the survey health check read it:');
      console.table(
        scheduledWithFeed.lines.filter(
          (line) => line.item.startsWith('Survey health') || line.item.startsWith('Reconciliation'),
        ),
      );
      console.log(
        `all in with the attempt feed (attemptFeed): USD ${fmt(allInWithFeed, 2)} per million hits (hit path ${fmt(hitPathWithFeed.totalUsd, 2)}, the feed ${fmt(deployed?.cost.totalUsd ?? 0, 3)}, health ${fmt(Number(scheduledWithFeed.lines.find((l) => l.item === 'Survey health')?.usd), 3)}; target at most ${fmt(TARGETS.costUsd, 2)}: ${allInWithFeed <= TARGETS.costUsd ? 'met' : 'missed'})`,
      );
      // The lean configuration: the feed, and matched verdicts implied (the `lean` week; its feed keeps what it
      // writes).
      const leanFeed = await feedWriteCost({
        ...TRAFFIC_SHAPE,
        windowSeconds: FEED_BATCHING_WINDOW.toSeconds(),
        shards: 4,
        ...verdictWritesOf('lean'),
      });
      const leanFeedCost = feedCostPerMillionHits(leanFeed);
      const scheduledLean = scheduledCostPerMillionHits({
        reconcile: reconcileOfWeek(weekOf('lean')),
        sync: schedules.sync,
        health: feedSchedules.health,
      });
      const allInLean = hitPathWithFeed.totalUsd + scheduledLean.totalUsd + leanFeedCost.totalUsd;
      results.leanConfiguration = {
        feed: { ...leanFeed, cost: leanFeedCost },
        scheduled: scheduledLean,
        allInLean,
      };
      console.table(scheduledLean.lines.filter((line) => line.item.startsWith('Reconciliation')));
      console.log(
        `all in with the attempt feed and matched verdicts implied (attemptFeed, matchedVerdicts implied): USD ${fmt(allInLean, 2)} per million hits (hit path ${fmt(hitPathWithFeed.totalUsd, 2)}, the feed ${fmt(leanFeedCost.totalUsd, 3)}, reconciliation writes ${fmt(Number(scheduledLean.lines.find((l) => l.item === 'Reconciliation writes')?.usd), 3)}; target at most ${fmt(TARGETS.costUsd, 2)}: ${allInLean <= TARGETS.costUsd ? 'met' : 'missed'})`,
      );
      console.table(
        feeds.map((f) => ({
          shards: f.shards,
          'records per item': (f.records / f.items).toFixed(1),
          'bytes per change': f.bytesPerRecord.toFixed(0),
          'write units per attempt': f.writeUnitsPerAttempt.toFixed(3),
          'USD per million hits': f.cost.totalUsd.toFixed(4),
        })),
      );
    }
  }
}

console.log(`\nbenchmarks took ${fmt((Date.now() - started) / 1000)} s`);
if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, `${JSON.stringify(results, null, 2)}\n`);
