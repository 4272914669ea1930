/**
 * Finance's figures against a ground truth, to the cent. A seeded week of traffic (ground-truth.ts: late, lost,
 * repeated and forged hits, pids used twice, rows listed late, twice, never or withdrawn, reviews and reversals
 * days later, a price change, a clock change) is driven through the real receivers with signed URLs, on a fake
 * clock, the receivers' store down for three spells (their hits buffered and drained hours later); a marketplace
 * answering from the same truth as it stands at that clock is reconciled by the scheduled
 * runs (hourly, then every three hours for the days of reviews); then every attempt's verdict, every day's
 * figures, the period's amounts and the finance API's JSON and CSV are compared with what the truth says. On the
 * way, every stored day's verdict counts must agree with its discrepancy list once a run ends.
 */
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { parse } from 'csv-parse/sync';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createStreamConsumer } from '../../functions/feed/stream-consumer';
import { createFinanceHandler } from '../../functions/finance/finance-api';
import { finance } from '../../functions/finance/finance-queries';
import { createAttemptFeed } from '../../functions/ledger/attempt-feed';
import { feedCoverage } from '../../functions/ledger/feed-coverage';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
} from '../../functions/ledger/ledger-store';
import { createMarketplaceClient } from '../../functions/marketplace/marketplace-client';
import { pacificDay, pacificDayRange } from '../../functions/marketplace/pacific-time';
import { feedAttempts } from '../../functions/reconciliation/feed-attempts';
import { reconciler } from '../../functions/reconciliation/reconciler';
import { nextDay, pacificDays } from '../../functions/reconciliation/verdict-rules';
import type { BufferedHit } from '../../functions/runtime/hit-buffer';
import { startTableStream } from '../../infra/local/table-stream';
import { apiEvent, filledUrl, invoke, jsonBody } from '../support/api-events';
import { startEngineProxy } from '../support/engine-proxy';
import {
  cents,
  DAY,
  dayKey,
  expectedFigures,
  formatCents,
  generateScenario,
  type Hit,
  HOUR,
  MINUTE,
  type Scenario,
  story,
  type Truth,
  transactionRow,
  viewAt,
} from '../support/ground-truth';
import { receivers } from '../support/handlers';
import { freshTable, TEST_KEY_RING } from '../support/ledger';

const ATTEMPTS = 300;
/** How far the feed trails the table: the deployed stack's batching window and margin. */
const FEED_LAG = 7 * MINUTE;
const FINANCE_TOKEN = 'ground-truth-finance-token-0123456789';

afterEach(() => {
  vi.useRealTimers();
});

describe.each([
  // Seed 8's week once showed a respondent sent again days later paired by pid with an earlier attempt of the same
  // id (a complete not paid and one not received both hidden).
  { week: 'of the autumn clock change', seed: 8, first: '2026-10-28', dstDay: '2026-11-01', feed: false },
  { week: 'of the spring clock change', seed: 5, first: '2027-03-11', dstDay: '2027-03-14', feed: false },
  // Reconciliation reading the attempt feed (the stack's attemptFeed): the table's every change through the stream
  // stand-in, delivered to the consumer before each run only up to the feed's lag behind the clock. And with the
  // matchedVerdicts setting `implied`: agreements the attempts tell by themselves are written on none of them.
  {
    week: 'of the autumn clock change, read from the attempt feed, matched verdicts implied',
    seed: 8,
    first: '2026-10-28',
    dstDay: '2026-11-01',
    feed: true,
  },
])('a week $week (seed $seed)', ({ seed, first, dstDay, feed }) => {
  it('every verdict, day and amount finance shows is what the ground truth says', async () => {
    const scenario = generateScenario(seed, { first, dstDay, attempts: ATTEMPTS });
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date(scenario.start - DAY));
    const world = await ledgerWithReceivers(scenario, { feed });
    try {
      const problems = await driveTheWeek(scenario, world);
      const truth = expectedFigures(scenario, Date.now(), world.everListedComplete);
      const mismatches = [
        ...(await verdictMismatches(world, truth.verdicts, feed)),
        ...(await figureMismatches(scenario, world, truth)),
      ];
      vi.useRealTimers();
      expect({ problems, mismatches }).toEqual({ problems: [], mismatches: [] });
      expect(world.drained).toBeGreaterThan(0);
      if (world.stream) {
        expect(world.feedReads()).toBeGreaterThan(0);
        // Delivered up to seven minutes behind before each run: never far enough behind to read the items.
        expect(world.feedBehind()).toEqual([]);
        // Most attempts were in the feed alone (their hits came after the first run's probe touch was noted).
        expect(await world.unindexedAttempts()).toBeGreaterThan(ATTEMPTS / 2);
        // And most agreements were left unwritten.
        expect(world.impliedAgreements).toBeGreaterThan(ATTEMPTS / 4);
      }
    } finally {
      await world.proxy.stop();
      await world.stream?.stop();
    }
    // About 400 scheduled runs of three surveys each: a minute alone, over three on a loaded machine.
  }, 600_000);
});

type World = Awaited<ReturnType<typeof ledgerWithReceivers>>;

/**
 * A fresh ledger with the receivers in front of it (through a proxy that can take their store down, their hits then
 * buffered), the surveys registered, and the truth's marketplace.
 */
async function ledgerWithReceivers(scenario: Scenario, options: { feed: boolean }) {
  const table = await freshTable();
  // With the feed, every write (the receivers', the drains', reconciliation's) goes through the stream stand-in.
  const stream = options.feed
    ? await startTableStream({ engineEndpoint: table.endpoint, tableName: table.tableName })
    : undefined;
  const writes = stream?.endpoint ?? table.endpoint;
  const proxy = await startEngineProxy(writes);
  const buffered: BufferedHit[] = [];
  // With the feed, the receivers and the drains leave the attempts it covers out of the day index, as deployed
  // (feed-coverage.ts: once the first run's probe touch is noted, on the fake clock).
  const coverage = stream
    ? feedCoverage(createDocumentClient({ endpoint: table.endpoint }), table.tableName)
    : undefined;
  const storeOptions = coverage ? { indexFree: coverage.covers } : {};
  const rx = await receivers({
    storeOptions,
    endpoint: proxy.endpoint,
    tableName: table.tableName,
    storeBudgetMs: 200,
    buffer: {
      put: async (hit, at, id) => {
        const message = { id, at: at.toISOString(), hit };
        buffered.push(message);
        return message;
      },
    },
  });
  const client = createDocumentClient({ endpoint: writes });
  const attempts = createLedgerStore(client, table.tableName, undefined, storeOptions);
  const registry = createSurveyRegistry(client, table.tableName);
  const results = createReconciliationStore(client, table.tableName);
  for (const survey of scenario.surveys) {
    const cpi = survey.prices[0]?.cpi as string;
    await registry.put({
      surveyId: survey.surveyId,
      state: 'active',
      verified: true,
      failures: 0,
      expectedCpi: cpi,
      cpiHistory: [{ cpi, since: '' }],
      updatedAt: new Date().toISOString(),
    });
  }
  /** Tokens the marketplace ever listed as a complete that earns (a later reversal is then money). */
  const everListedComplete = new Set<string>();
  const reply = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  // getSurveyTransactions as the field notes have it: Pacific-day bounds, an error for an empty answer.
  const marketplaceFetch = (async (input: string | URL | Request) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const survey = /\/supply\/getSurveyTransactions\/(\d+)$/.exec(url.pathname)?.[1];
    if (!survey) return reply(404, { apiStatus: 'Failure', msg: `no endpoint ${url.pathname}` });
    const [startDate, endDate] = [url.searchParams.get('startDate'), url.searchParams.get('endDate')];
    const from = startDate ? pacificDayRange(startDate).start.getTime() : Number.NEGATIVE_INFINITY;
    const to = endDate ? pacificDayRange(endDate).end.getTime() : Number.POSITIVE_INFINITY;
    const statuses = url.searchParams.get('status')?.split(',');
    const rows = [];
    for (const t of scenario.truths) {
      if (t.surveyId !== survey || t.clickAt < from || t.clickAt >= to) continue;
      const view = viewAt(t, Date.now());
      if (!view || (statuses && !statuses.includes(view.status))) continue;
      if (view.status === 'Completed' && view.verifyToken !== 'Invalid') everListedComplete.add(t.token);
      rows.push(transactionRow(t, view));
      if (t.twiceListed) rows.push(transactionRow(t, view));
    }
    if (rows.length === 0)
      return reply(400, { apiStatus: 'Failure', msg: `No data found for survey: ${survey}` });
    return reply(200, { apiStatus: 'success', msg: `${rows.length} transactions`, result: rows });
  }) as typeof fetch;
  // The consumer's writes go beside the stream (the mapping's filter leaves them out in AWS); the readers' through it
  // (their probe of the feed is a change the consumer must see).
  const feedStore = createAttemptFeed(createDocumentClient({ endpoint: table.endpoint }), table.tableName);
  const readersFeed = createAttemptFeed(client, table.tableName);
  let feedReads = 0;
  const behind: string[] = [];
  const fromFeed = feedAttempts({
    feed: {
      state: () => readersFeed.state(),
      touchProbe: (at) => readersFeed.touchProbe(at),
      recordsOfBucketDay: (...args) => {
        feedReads++;
        return readersFeed.recordsOfBucketDay(...args);
      },
    },
    items: attempts,
    feedLagMs: FEED_LAG,
    onBehind: (touchedAt) => behind.push(touchedAt),
  });
  // On since the table was made: a run's window is read from the feed from the first run on.
  if (stream) await feedStore.markStart(new Date(scenario.start - 30 * DAY).toISOString(), stream.arn);
  const consume = createStreamConsumer({ feed: feedStore });
  let delivered = 0;
  /** Delivers the stream's changes up to the feed's lag behind the clock, a batch at a time. */
  const deliverFeed = async () => {
    if (!stream) return;
    const upTo = (Date.now() - FEED_LAG) / 1000;
    let end = delivered;
    while (
      end < stream.records.length &&
      (stream.records[end]?.dynamodb?.ApproximateCreationDateTime ?? 0) <= upTo
    )
      end++;
    for (; delivered < end; delivered = Math.min(end, delivered + 1000)) {
      const batch = stream.records.slice(delivered, Math.min(end, delivered + 1000));
      const result = await consume({ Records: batch });
      if (result.batchItemFailures.length > 0) throw new Error('the feed could not be written');
    }
  };
  const engine = reconciler({
    ...(stream
      ? {
          attempts: { ...attempts, attemptsOfSurvey: fromFeed.attemptsOfSurvey },
          attemptsLagMs: fromFeed.lagMs,
          attemptsAsOf: fromFeed.asOf,
          readOrder: fromFeed.inReadOrder,
        }
      : { attempts }),
    marketplace: createMarketplaceClient({
      baseUrl: 'http://marketplace.invalid',
      accessToken: () => 'marketplace-token',
      retries: 0,
      fetch: marketplaceFetch,
    }),
    registry,
    results,
    settleMs: 10 * MINUTE,
    lookbackDays: 7,
    freshDays: 1,
    settledRecheckMs: DAY,
    windowListHours: 1,
    concurrency: 4,
    impliedMatches: stream !== undefined,
  });
  return {
    rx,
    proxy,
    stream,
    /** Agreements found written on no attempt (verdictMismatches counts them). */
    impliedAgreements: 0,
    deliverFeed,
    feedReads: () => feedReads,
    feedBehind: () => behind,
    /** Attempt items a hit reached that are not in the day index. */
    unindexedAttempts: async () => {
      let count = 0;
      let start: Record<string, unknown> | undefined;
      do {
        const page = await client.send(
          new ScanCommand({
            TableName: table.tableName,
            FilterExpression:
              'begins_with(pk, :attempts) AND attribute_exists(firstSeenAt) AND attribute_not_exists(gsi1pk)',
            ExpressionAttributeValues: { ':attempts': 'ATTEMPT#' },
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
        count += page.Items?.length ?? 0;
        start = page.LastEvaluatedKey;
      } while (start);
      return count;
    },
    buffered,
    drained: 0,
    attempts,
    registry,
    results,
    engine,
    everListedComplete,
  };
}

/**
 * When the receivers' store is down (three spells: an afternoon, an evening, across a midnight), and when what they
 * buffered meanwhile is drained into the ledger (an hour, a day and seven hours after each spell ends).
 */
function outagesOf(scenario: Scenario) {
  const at = (day: number, hour: number) =>
    pacificDayRange(scenario.days[day] as string).start.getTime() + hour * HOUR;
  const spells = [
    { from: at(2, 10), to: at(2, 16), drainedAfter: HOUR },
    { from: at(4, 18), to: at(4, 20), drainedAfter: 20 * HOUR },
    { from: at(5, 23), to: at(6, 1), drainedAfter: 7 * HOUR },
  ];
  return {
    down: (time: number) => spells.some(({ from, to }) => time >= from && time < to),
    drains: spells.map(({ to, drainedAfter }) => to + drainedAfter),
  };
}

/**
 * The week on the fake clock: each hit sent when it happens, each price change recorded as the sync would, the
 * scheduled run every hour until four days after the traffic, then every three hours until nine days after the
 * last event. Returns what went wrong on the way (refused hits, failed runs, days whose counts and lists disagree).
 */
async function driveTheWeek(scenario: Scenario, world: World): Promise<string[]> {
  type Event =
    | { at: number; kind: 'hit'; truth: Truth; hit: Hit }
    | { at: number; kind: 'price'; surveyId: string; cpi: string; since: number }
    | { at: number; kind: 'run' }
    | { at: number; kind: 'drain' };
  const outages = outagesOf(scenario);
  const events: Event[] = outages.drains.map((at) => ({ at, kind: 'drain' }));
  for (const truth of scenario.truths)
    for (const hit of truth.hits) events.push({ at: hit.at, kind: 'hit', truth, hit });
  for (const survey of scenario.surveys)
    for (const { cpi, since } of survey.prices.slice(1))
      events.push({ at: since + 5 * MINUTE, kind: 'price', surveyId: survey.surveyId, cpi, since });
  const hourlyUntil = pacificDayRange(scenario.days.at(-1) as string).end.getTime() + 4 * DAY;
  for (let at = Math.ceil(scenario.start / HOUR) * HOUR + 5 * MINUTE; at <= hourlyUntil; at += HOUR)
    events.push({ at, kind: 'run' });
  for (let at = hourlyUntil + 3 * HOUR; at <= Math.max(scenario.end, hourlyUntil) + 9 * DAY; at += 3 * HOUR)
    events.push({ at, kind: 'run' });
  // A run after the hits of its minute.
  events.sort((a, b) => a.at - b.at || Number(a.kind === 'run') - Number(b.kind === 'run'));

  const problems: string[] = [];
  for (const event of events) {
    vi.setSystemTime(new Date(event.at));
    // As the drainer does: each buffered hit recorded at the time it was made, under its request's id. At a drain
    // event everything buffered; before each run, what a slow write (a loaded machine) buffered outside the spells.
    const drain = async (which: (message: BufferedHit) => boolean) => {
      const drained = world.buffered.filter(which);
      world.buffered.splice(0, world.buffered.length, ...world.buffered.filter((m) => !which(m)));
      for (const message of drained) {
        await world.attempts.recordBufferedHit(message.hit, new Date(message.at), message.id);
        world.drained++;
      }
    };
    if (event.kind === 'drain') await drain(() => true);
    else if (event.kind === 'hit') {
      world.proxy.faults(outages.down(event.at) ? () => 'server-error' : undefined);
      const { truth, hit } = event;
      const url = filledUrl(TEST_KEY_RING, hit.channel, truth.surveyId, hit.outcome, {
        pid: truth.pid,
        token: truth.token,
      });
      const answer =
        hit.channel === 'postback'
          ? await invoke(world.rx.postback, postbackRequest(url, truth))
          : await invoke(world.rx.redirect, apiEvent('GET', url));
      if (answer.statusCode !== (hit.channel === 'postback' ? 200 : 302) && answer.statusCode !== 200)
        problems.push(`${hit.channel} refused (${answer.statusCode}): ${story(truth)}`);
    } else if (event.kind === 'price') {
      const registration = await world.registry.get(event.surveyId);
      if (!registration) throw new Error(`survey ${event.surveyId} not registered`);
      const since = new Date(event.since).toISOString();
      await world.registry.put({
        ...registration,
        expectedCpi: event.cpi,
        cpiHistory: [...(registration.cpiHistory ?? []), { cpi: event.cpi, since }],
        priceSeenAt: since,
        updatedAt: new Date().toISOString(),
      });
    } else {
      await drain((message) => !outages.down(Date.parse(message.at)));
      await world.deliverFeed();
      const report = await world.engine.scheduled(7, { deadline: new Date(event.at + 14 * MINUTE) });
      if (!report?.complete) problems.push(`the run at ${new Date(event.at).toISOString()} did not finish`);
      for (const outcome of report?.outcomes ?? [])
        if (outcome.status === 'failed') problems.push(`survey ${outcome.surveyId} failed: ${outcome.error}`);
      const today = pacificDay(new Date(event.at));
      const noon = pacificDayRange(today).start.getTime() + 12 * HOUR;
      if (Math.abs(event.at - noon) < HOUR / 2 || event.at > hourlyUntil)
        problems.push(...(await countsAgreeWithLists(scenario, world, today)));
    }
  }
  return problems;
}

/**
 * A postback as the marketplace may send it (the field notes leave the method and the body open): a GET, or a POST
 * to the same URL with the ids again in a JSON body, in a form body, or with an empty body; by token, so a
 * respondent's repeated postbacks keep one shape.
 */
function postbackRequest(url: string, truth: Truth) {
  const ids = { pid: truth.pid, token: truth.token };
  const shape = [...truth.token].reduce((sum, c) => sum + c.charCodeAt(0), 0) % 4;
  if (shape === 0) return apiEvent('GET', url);
  if (shape === 1)
    return apiEvent('POST', url, {
      body: JSON.stringify(ids),
      headers: { 'content-type': 'application/json' },
    });
  if (shape === 2)
    return apiEvent('POST', url, {
      body: new URLSearchParams(ids).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
  return apiEvent('POST', url);
}

/** Every stored day of the period: its verdict counts are its discrepancy list's (unless some still await). */
async function countsAgreeWithLists(scenario: Scenario, world: World, today: string) {
  const problems: string[] = [];
  const stamp = new Date().toISOString();
  for (const { surveyId } of scenario.surveys) {
    const days = pacificDays(nextDay(scenario.days[0] as string, -1), today);
    for (const summary of await world.results.summariesOf(surveyId, days)) {
      if (summary.awaiting) continue;
      const listed: Record<string, number> = {};
      for (const attempt of await world.results.discrepancies(summary.day, surveyId)) {
        const kind = attempt.reconciliation?.verdict as string;
        listed[kind] = (listed[kind] ?? 0) + 1;
      }
      const counted = Object.fromEntries(
        Object.entries(summary.verdicts).filter(([kind, n]) => kind !== 'matched' && n),
      );
      const sorted = (counts: Record<string, number>) => JSON.stringify(Object.entries(counts).sort());
      if (sorted(listed) !== sorted(counted))
        problems.push(
          `${stamp} ${surveyId}|${summary.day}: counts ${sorted(counted)}, list ${sorted(listed)}`,
        );
    }
  }
  return problems;
}

type Truths = ReturnType<typeof expectedFigures>;

/**
 * Each attempt's stored verdict and day against the truth's. With matched verdicts implied, an agreement may be
 * written on no attempt of a non-complete first seen on its day without a conflict (`impliedMatch`); the days'
 * figures count it (figureMismatches).
 */
async function verdictMismatches(world: World, verdicts: Truths['verdicts'], implied: boolean) {
  const mismatches: string[] = [];
  world.impliedAgreements = 0;
  for (const [key, expected] of verdicts) {
    const t = expected.truth;
    const found = (await world.attempts.attemptsOf(t.surveyId, t.pid)).filter((a) => a.token === t.token);
    const judged = found[0]?.reconciliation;
    const firstSeen = found[0]?.firstSeenAt;
    if (
      implied &&
      expected.kind === 'matched' &&
      !judged &&
      found.length === 1 &&
      t.status !== 'Completed' &&
      found[0]?.complete === 'none' &&
      !found[0]?.conflict &&
      firstSeen &&
      pacificDay(new Date(firstSeen)) === expected.day
    ) {
      world.impliedAgreements++;
      continue;
    }
    if (expected.kind === 'none') {
      if (judged)
        mismatches.push(`${key}: judged ${judged.verdict} though nothing is left of it; ${story(t)}`);
    } else if (found.length !== 1) mismatches.push(`${key}: ${found.length} attempts in the ledger`);
    else if (judged?.verdict !== expected.kind || judged.day !== expected.day)
      mismatches.push(
        `${key}: ${judged?.verdict}@${judged?.day}, expected ${expected.kind}@${expected.day}; ${story(t)}`,
      );
  }
  return mismatches;
}

/** The finance report, its single days and surveys, and the finance API's JSON and CSV against the truth. */
async function figureMismatches(scenario: Scenario, world: World, truth: Truths) {
  const mismatches: string[] = [];
  const compare = (what: string, got: unknown, want: unknown) => {
    if (String(got) !== String(want)) mismatches.push(`${what}: ${got}, expected ${want}`);
  };
  const queries = finance({ attempts: world.attempts, results: world.results });
  const days = [...new Set([...truth.days.keys()].map((key) => key.split('|')[1] as string))].sort();
  const [from, to] = [days[0] as string, days.at(-1) as string];
  const report = await queries.report({ from, to });
  const rows = new Set<string>();
  for (const row of report.days) {
    const key = dayKey(row.surveyId, row.day);
    if (rows.has(key)) mismatches.push(`${key}: two rows`);
    rows.add(key);
    const want = truth.days.get(key);
    if (!want) {
      if (
        row.marketplaceCompletes ||
        row.owed !== '0.00' ||
        Object.keys(row.discrepancies).length ||
        row.matched
      )
        mismatches.push(`${key}: a row the truth does not have: ${JSON.stringify(row)}`);
      continue;
    }
    compare(`${key} marketplace completes`, row.marketplaceCompletes, want.marketplaceCompletes);
    compare(`${key} valid`, row.validCompletes, want.valid);
    compare(`${key} pending`, row.pendingCompletes, want.pending);
    compare(`${key} invalid`, row.invalidCompletes, want.invalid);
    compare(`${key} owed`, row.owed, formatCents(want.owed));
    compare(`${key} pending amount`, row.pending, formatCents(want.pendingAmount));
    compare(`${key} awaiting`, row.awaiting, 0);
    compare(`${key} matched`, row.matched, want.verdicts.matched ?? 0);
    compare(`${key} completes by postback`, row.completesPostback, want.completesPostback);
    compare(`${key} completes by redirect alone`, row.completesRedirectOnly, want.completesRedirectOnly);
    const kinds = new Set([
      ...Object.keys(want.verdicts),
      ...Object.keys(row.discrepancies),
      ...Object.keys(row.claims),
    ]);
    for (const kind of kinds) {
      if (kind === 'matched') continue;
      const counted =
        (row.discrepancies as Record<string, number>)[kind] ??
        (row.claims as Record<string, number>)[kind] ??
        0;
      compare(`${key} ${kind}`, counted, want.verdicts[kind] ?? 0);
    }
  }
  for (const key of truth.days.keys()) if (!rows.has(key)) mismatches.push(`${key}: no row`);
  let owed = 0n;
  let pending = 0n;
  for (const day of truth.days.values()) {
    owed += day.owed;
    pending += day.pendingAmount;
  }
  const { amounts } = truth;
  compare('owed', report.totals.owed, formatCents(owed));
  compare('pending', report.totals.pending, formatCents(pending));
  compare('reversed', report.amounts.reversed, formatCents(amounts.reversed));
  compare('not paid', report.amounts.notPaid, formatCents(amounts.notPaid));
  compare('not received', report.amounts.notReceived, formatCents(amounts.notReceived));
  compare('underpaid', report.amounts.underpaid, formatCents(amounts.underpaid));
  compare('unpriced', report.amounts.unpriced, 0);

  // The discrepancy list: each token once, on its day, of its kind, at its amount.
  const listed = [...report.discrepancies, ...report.claims];
  const times = new Map<string, number>();
  for (const d of listed)
    times.set(dayKey(d.surveyId, d.token), (times.get(dayKey(d.surveyId, d.token)) ?? 0) + 1);
  for (const [key, n] of times) if (n > 1) mismatches.push(`${key}: listed ${n} times`);
  for (const d of listed) {
    const want = truth.verdicts.get(dayKey(d.surveyId, d.token));
    if (!want) mismatches.push(`listed, and no truth has it: ${JSON.stringify(d)}`);
    else if (want.kind !== d.kind || want.day !== d.day)
      mismatches.push(`listed ${d.token} ${d.kind}@${d.day}, expected ${want.kind}@${want.day}`);
    else if (
      want.price &&
      (d.kind === 'complete_not_received' ? d.cpi : d.expectedCpi.split(' or ')[0]) !== want.price
    )
      mismatches.push(`listed ${d.token} ${d.kind} at ${d.cpi}/${d.expectedCpi}, expected ${want.price}`);
  }

  // Each day alone and each survey alone add up to the period.
  const sums = { owed: 0n, reversed: 0n, notPaid: 0n, notReceived: 0n };
  for (const day of pacificDays(from, to)) {
    const one = await queries.report({ from: day, to: day });
    sums.owed += cents(one.totals.owed);
    sums.reversed += cents(one.amounts.reversed);
    sums.notPaid += cents(one.amounts.notPaid);
    sums.notReceived += cents(one.amounts.notReceived);
  }
  compare('days alone: owed', formatCents(sums.owed), formatCents(owed));
  compare('days alone: reversed', formatCents(sums.reversed), formatCents(amounts.reversed));
  compare('days alone: not paid', formatCents(sums.notPaid), formatCents(amounts.notPaid));
  compare('days alone: not received', formatCents(sums.notReceived), formatCents(amounts.notReceived));
  let surveysOwed = 0n;
  for (const { surveyId } of scenario.surveys) {
    const one = await queries.report({ from, to }, [surveyId]);
    surveysOwed += cents(one.totals.owed);
    const inWhole = report.surveys.find((s) => s.surveyId === surveyId);
    compare(`survey ${surveyId} alone: owed`, one.totals.owed, inWhole?.owed);
    compare(
      `survey ${surveyId} alone: discrepancies`,
      JSON.stringify(one.totals.discrepancies),
      JSON.stringify(inWhole?.discrepancies),
    );
  }
  compare('surveys alone: owed', formatCents(surveysOwed), formatCents(owed));

  // The HTTP API: the summary in JSON and CSV, the discrepancies paged and in CSV.
  const handler = createFinanceHandler({
    queries,
    auth: { mode: 'bearer', token: FINANCE_TOKEN },
    timeZone: 'America/Los_Angeles',
  });
  const get = (url: string) =>
    invoke(handler, apiEvent('GET', url, { headers: { authorization: `Bearer ${FINANCE_TOKEN}` } }));
  for (const detail of ['days', 'surveys', 'totals']) {
    const json = await get(`/finance/summary?from=${from}&to=${to}&detail=${detail}`);
    const body = jsonBody(json) as { totals: { owed: string; pending: string } };
    compare(`summary by ${detail}: status`, json.statusCode, 200);
    compare(`summary by ${detail}: owed`, body.totals?.owed, formatCents(owed));
    compare(`summary by ${detail}: pending`, body.totals?.pending, formatCents(pending));
    const csv = parse(
      String((await get(`/finance/summary?from=${from}&to=${to}&detail=${detail}&format=csv`)).body),
      {
        columns: true,
      },
    ) as Record<string, string>[];
    const column = (name: string) => formatCents(csv.reduce((sum, r) => sum + cents(r[name] as string), 0n));
    compare(`summary by ${detail} in CSV: owed`, column('owed'), formatCents(owed));
    compare(`summary by ${detail} in CSV: pending`, column('pending_amount'), formatCents(pending));
  }
  const paged: { token: string }[] = [];
  let cursor: string | undefined;
  do {
    const page = await get(
      `/finance/discrepancies?from=${from}&to=${to}&limit=37${cursor ? `&cursor=${cursor}` : ''}`,
    );
    if (page.statusCode !== 200) {
      mismatches.push(`discrepancies page: ${page.statusCode} ${page.body}`);
      break;
    }
    const body = jsonBody(page) as { items: { token: string }[]; nextCursor?: string };
    paged.push(...body.items);
    cursor = body.nextCursor;
  } while (cursor);
  compare('discrepancies paged', paged.length, report.discrepancies.length);
  compare('discrepancies paged, distinct', new Set(paged.map((d) => d.token)).size, paged.length);
  const csv = parse(
    String((await get(`/finance/discrepancies?from=${from}&to=${to}&limit=1000&format=csv`)).body),
    {
      columns: true,
    },
  ) as Record<string, string>[];
  const total = (kind: string, column: string) =>
    formatCents(csv.filter((r) => r.kind === kind).reduce((sum, r) => sum + cents(r[column] as string), 0n));
  compare('discrepancies in CSV', csv.length, report.discrepancies.length);
  compare('reversed in CSV', total('invalidated', 'expected_cpi'), formatCents(amounts.reversed));
  compare('not paid in CSV', total('complete_not_paid', 'expected_cpi'), formatCents(amounts.notPaid));
  compare('not received in CSV', total('complete_not_received', 'cpi'), formatCents(amounts.notReceived));
  return mismatches;
}
