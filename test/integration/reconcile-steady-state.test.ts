/**
 * The hourly run once nothing changes: no summary or survey state rewritten, settled days left unread until their
 * transactions change, a late hit flags them or their re-check is due, the newest day read every run (and
 * yesterday until a run after midnight has checked it), and finance's figures and their freshness what a full
 * re-check gives. Against the local marketplace and the embedded engine, on a fake clock.
 */
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { finance } from '../../functions/finance/finance-queries';
import { discrepancyOf } from '../../functions/finance/finance-report';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
  type LedgerStore,
  type ReconciliationStore,
  type SurveyRegistry,
} from '../../functions/ledger/ledger-store';
import { createMarketplaceClient } from '../../functions/marketplace/marketplace-client';
import { pacificDayRange } from '../../functions/marketplace/pacific-time';
import type { Attempt } from '../../functions/receiving/attempt';
import { summarizeReconcileRun } from '../../functions/reconciliation/reconcile-handler';
import { REVIEW_HORIZON_DAYS, reconciler, SCHEDULED_RUN } from '../../functions/reconciliation/reconciler';
import { nextDay, VERDICT_RULES_EDITION } from '../../functions/reconciliation/verdict-rules';
import {
  type LocalMarketplace,
  NO_API_FAULTS,
  startLocalMarketplace,
} from '../../infra/local/marketplace/server';
import type { SimTransaction, VerifyState } from '../../infra/local/marketplace/state';
import { freshTable } from '../support/ledger';

const TOKEN = 'steady-token';
/** Today on the fake clock, and the week before it (no daylight-saving change in between). */
const TODAY = '2026-06-10';
const HOUR = 3_600_000;
let marketplace: LocalMarketplace;
let sequence = 0;

beforeAll(async () => {
  marketplace = await startLocalMarketplace({ accessToken: TOKEN, seedSurveys: false });
  return () => marketplace.stop();
});

/** One table per test, its store requests recorded by command and key. */
let attempts: LedgerStore;
let registry: SurveyRegistry;
let results: ReconciliationStore;
let requests: { command: string; pk: string }[];
/** The UTC ranges the reconciler read attempts over. */
let attemptReads: { from: string; to: string }[];
let clock: number;
/** The marketplace URLs the reconciler called. */
const listed: string[] = [];
/** While set, the marketplace answers 500 to a listing that starts before this day. */
let failListingsBefore: string | undefined;
/** While set, the marketplace answers 500 to a listing that starts on this day. */
let failListingsFrom: string | undefined;
/** While set, a listing of this one day alone is answered "No data found". */
let noDataFrom: string | undefined;
/** While set, the store's writes to day summaries fail (a store fault injected below the SDK's retries). */
let summaryWritesFail = false;
/** While set, the next write to this day's summary fails (once). */
let summaryWritesOfDayFail: string | undefined;
/** While set, attempts are read as these images of them (by token): a reader trailing the table, as the feed does. */
let trailing: Map<string, Attempt> | undefined;

beforeEach(async () => {
  const { endpoint, tableName } = await freshTable();
  const client = createDocumentClient({ endpoint });
  requests = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { Key?: { pk?: string; sk?: string }; Item?: { pk?: string } };
      const request = {
        command: String(context.commandName),
        pk: String(input.Key?.pk ?? input.Item?.pk ?? ''),
      };
      requests.push(request);
      const summaryWrite = request.command === 'UpdateItemCommand' && request.pk.startsWith('SUMMARY#');
      const ofTheDay = summaryWrite && input.Key?.sk === `DAY#${summaryWritesOfDayFail}`;
      if (ofTheDay) summaryWritesOfDayFail = undefined;
      if (summaryWrite && (summaryWritesFail || ofTheDay))
        throw Object.assign(new Error('injected: the store is unavailable'), { name: 'InternalServerError' });
      return next(args);
    },
    { step: 'initialize', name: 'recordRequests' },
  );
  // The ledger changes on the fake clock too (the flags late hits leave).
  const ledger = createLedgerStore(client, tableName, () => new Date(clock));
  attemptReads = [];
  attempts = {
    ...ledger,
    attemptsOfSurvey: async (surveyId, from, to) => {
      attemptReads.push({ from: from.toISOString(), to: to.toISOString() });
      const read = await ledger.attemptsOfSurvey(surveyId, from, to);
      return trailing ? read.map((a) => trailing?.get(a.token) ?? a) : read;
    },
  };
  registry = createSurveyRegistry(client, tableName);
  results = createReconciliationStore(client, tableName);
  // 13:00 Pacific (PDT) today.
  clock = pacificDayRange(TODAY).start.getTime() + 13 * HOUR;
});

/** Options of the reconciler beyond the recheck period (fresh days, settle time). */
type Tuning = Pick<
  Parameters<typeof reconciler>[0],
  | 'freshDays'
  | 'settleMs'
  | 'windowListHours'
  | 'attemptsLagMs'
  | 'attemptsAsOf'
  | 'impliedMatches'
  | 'emptyConfirmMs'
>;

const engine = (settledRecheckHours = 24, tuning: Tuning = {}) =>
  reconciler({
    ...tuning,
    marketplace: createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: (input, init) => {
        listed.push(String(input));
        const from = new URL(String(input)).searchParams.get('startDate');
        if (
          (failListingsBefore !== undefined && from !== null && from < failListingsBefore) ||
          (failListingsFrom !== undefined && from === failListingsFrom)
        )
          return Promise.resolve(new Response('{"apiStatus":"Failure","msg":"injected"}', { status: 500 }));
        if (
          noDataFrom !== undefined &&
          from === noDataFrom &&
          new URL(String(input)).searchParams.get('endDate') === from
        )
          return Promise.resolve(
            new Response('{"apiStatus":"Failure","msg":"No data found for survey: injected"}', {
              status: 400,
            }),
          );
        return fetch(input, init);
      },
    }),
    attempts,
    registry,
    results,
    now: () => new Date(clock),
    settledRecheckMs: settledRecheckHours * HOUR,
  });

/** One hourly run; the requests it made are returned. */
async function hourly(settledRecheckHours = 24, tuning: Tuning = {}) {
  requests = [];
  attemptReads = [];
  const report = await engine(settledRecheckHours, tuning).scheduled(7, { deadline: new Date(clock + HOUR) });
  if (!report?.complete) throw new Error('the run did not finish');
  return report;
}

async function withoutSummaryWrites<T>(work: () => Promise<T>): Promise<T> {
  summaryWritesFail = true;
  try {
    return await work();
  } finally {
    summaryWritesFail = false;
  }
}

const writesTo = (prefix: string) =>
  requests.filter(
    (r) => ['PutItemCommand', 'UpdateItemCommand'].includes(r.command) && r.pk.startsWith(prefix),
  );
const surveyStateWrites = () =>
  requests.filter((r) => r.command === 'PutItemCommand' && r.pk.startsWith('SURVEY#'));
/** Whether an attempt read covered (some of) a Pacific day. */
const readDay = (day: string) => {
  const { start, end } = pacificDayRange(day);
  return attemptReads.some((r) => r.from < end.toISOString() && r.to > start.toISOString());
};

/** Whether an attempt read covered a whole Pacific day (a run for that day, not the lead of the day after). */
const readWholeDay = (day: string) => {
  const { start, end } = pacificDayRange(day);
  return attemptReads.some((r) => r.from <= start.toISOString() && r.to >= end.toISOString());
};

async function survey(surveyId: number) {
  marketplace.state.addSurvey({ surveyId, cpi: '1.50' });
  await registry.put({
    surveyId: String(surveyId),
    state: 'active',
    verified: true,
    failures: 0,
    expectedCpi: '1.50',
    updatedAt: new Date(clock).toISOString(),
  });
}

/**
 * A complete clicked in at 10:00 Pacific on `day`, and (unless `arrived` is false) its postback here; or a row of
 * another `status`, without a completion time (its postback is the caller's).
 */
async function complete(
  surveyId: number,
  day: string,
  options: {
    arrived?: boolean;
    verify?: VerifyState;
    clickedAt?: Date;
    completedAt?: Date;
    status?: string;
  } = {},
) {
  const n = ++sequence;
  const clickedAt = options.clickedAt ?? new Date(pacificDayRange(day).start.getTime() + 10 * HOUR);
  const transaction: SimTransaction = {
    surveyId,
    token: `steady-${n}`,
    pid: `p-${n}`,
    status: options.status ?? 'Completed',
    ip: '198.51.100.1',
    trackId: `steady-${n}`,
    termReason: '',
    clickedAt,
    ...(options.status === undefined
      ? { completedAt: options.completedAt ?? new Date(clickedAt.getTime() + 10 * 60_000) }
      : {}),
    verifyToken: options.verify ?? 'Valid',
    notified: true,
  };
  marketplace.state.transactions.push(transaction);
  if (options.arrived !== false) await arrive(transaction, new Date(clickedAt.getTime() + 11 * 60_000));
  return transaction;
}

const arrive = (t: SimTransaction, at: Date) =>
  attempts.recordHit(
    {
      channel: 'postback',
      surveyId: String(t.surveyId),
      outcome: 'success',
      pid: t.pid,
      token: t.token,
      source: 'query',
    },
    at,
  );

/**
 * From now on, the first read of the survey's attempts that finds `t`'s is followed at once by its postback (a hit
 * between a run's read and its write); whether it landed is returned. Engines made after this call see it.
 */
function postbackAfterRead(t: SimTransaction): () => boolean {
  const read = attempts.attemptsOfSurvey;
  let landed = false;
  attempts = {
    ...attempts,
    attemptsOfSurvey: async (surveyId, from, to) => {
      const found = await read(surveyId, from, to);
      if (!landed && found.some((a) => a.token === t.token)) {
        landed = true;
        await arrive(t, new Date(clock));
      }
      return found;
    },
  };
  return () => landed;
}

/** Its postback, with the pid spelt otherwise than in the marketplace's row (the token is the same). */
const arriveSpeltOtherwise = (t: SimTransaction, at: Date) =>
  attempts.recordHit(
    {
      channel: 'postback',
      surveyId: String(t.surveyId),
      outcome: 'success',
      pid: t.pid.toUpperCase(),
      token: t.token,
      source: 'query',
    },
    at,
  );

const WEEK = Array.from({ length: 7 }, (_, i) => nextDay(TODAY, i - 6));

/** A survey with two completes on every day of the week, one of them not received here on the oldest day. */
async function seededWeek(surveyId: number) {
  await survey(surveyId);
  for (const day of WEEK) {
    await complete(surveyId, day);
    await complete(surveyId, day, { verify: 'Pending', arrived: day !== WEEK[0] });
  }
}

describe('the hourly run in the steady state', () => {
  it('rewrites no summary, no survey state and no verdict when nothing changed; reads only today and two hours before it', async () => {
    await seededWeek(7201);
    const first = await hourly();
    expect(first.outcomes[0]).toMatchObject({ status: 'reconciled', summariesWritten: 7, skippedDays: 0 });
    // Its seven summaries, and one write per day taking off the flag the week's hits left on it (written after
    // those days began, their attempts were late to any run that had read them): the six days before today.
    expect(writesTo('SUMMARY#7201')).toHaveLength(7 + 6);
    expect(surveyStateWrites()).toHaveLength(1);

    clock += HOUR;
    const second = await hourly();
    expect(second.outcomes[0]).toMatchObject({
      status: 'reconciled',
      summariesWritten: 0,
      skippedDays: 6,
      changes: { new: 0, changed: 0, refreshed: 0 },
    });
    expect(writesTo('SUMMARY#')).toEqual([]);
    expect(writesTo('ATTEMPT#')).toEqual([]);
    expect(surveyStateWrites()).toEqual([]);
    // Today read; yesterday, checked by the first run after it ended, and the settled days, whose transactions
    // did not change, not at all.
    expect(readDay(TODAY)).toBe(true);
    expect(readDay(nextDay(TODAY, -2))).toBe(false);
    // Of yesterday, only the two hours before midnight (an attempt seen before its click by a clock a little
    // off): that day's attempts are its own run's.
    const earliest = attemptReads.map((r) => r.from).sort()[0];
    expect(earliest).toBe(new Date(pacificDayRange(TODAY).start.getTime() - 2 * HOUR).toISOString());
    // A survey's own records (state, summaries) are one batch read, its registration from the run's one
    // listing: no point read per survey.
    expect(requests.filter((r) => r.command === 'GetItemCommand' && r.pk.startsWith('SURVEY#'))).toEqual([]);
    // What the run writes is its own state, once per run rather than per survey.
    expect(requests.filter((r) => r.command === 'PutItemCommand').every((r) => r.pk.startsWith('RUN#'))).toBe(
      true,
    );
  });

  it('a verdict that changes on a fresh day rewrites that day summary only', async () => {
    await seededWeek(7202);
    const missing = await complete(7202, TODAY, { arrived: false });
    await hourly();
    clock += HOUR;
    // The postback arrives: complete_not_received becomes matched.
    await arrive(missing, new Date(clock - 60_000));
    const run = await hourly();
    expect(run.outcomes[0]).toMatchObject({ summariesWritten: 1, changes: { changed: 1 } });
    expect(writesTo('SUMMARY#7202')).toEqual([{ command: 'UpdateItemCommand', pk: 'SUMMARY#7202' }]);
    const [summary] = await results.summariesOf('7202', [TODAY]);
    expect(summary?.verdicts).toEqual({ matched: 3 });
    expect(summary?.reconciledAt).toBe(new Date(clock).toISOString());
    expect(surveyStateWrites()).toEqual([]);
  });
});

describe('settled days', () => {
  it('a reversal at the marketplace on a settled day is reconciled in the very next run, that day alone', async () => {
    await seededWeek(7203);
    const settled = nextDay(TODAY, -3);
    await hourly();
    const before = (await results.summariesOf('7203', [settled]))[0];
    expect(before?.marketplace.owed).toBe('1.50');

    const [valid] = marketplace.state.transactions.filter(
      (t) =>
        t.surveyId === 7203 &&
        t.verifyToken === 'Valid' &&
        t.clickedAt >= pacificDayRange(settled).start &&
        t.clickedAt < pacificDayRange(settled).end,
    );
    (valid as SimTransaction).verifyToken = 'Invalid';
    clock += HOUR;
    const run = await hourly();
    expect(run.outcomes[0]).toMatchObject({ skippedDays: 5, summariesWritten: 1, changes: { changed: 1 } });
    expect(readDay(settled)).toBe(true);
    expect(readDay(nextDay(TODAY, -5))).toBe(false);
    const after = (await results.summariesOf('7203', [settled]))[0];
    expect(after?.marketplace).toMatchObject({ owed: '0.00', invalidCompletes: 1 });
    expect(after?.verdicts).toMatchObject({ invalidated: 1 });
    await expectSameAsFullRecheck('7203');
  });

  it('listing the whole window every six hours: a reversal on a settled day waits for the first run of the next six', async () => {
    await seededWeek(7290);
    const settled = nextDay(TODAY, -3);
    const tuning = { windowListHours: 6 };
    // 13:00 PDT is 20:00 UTC: the first run of these six hours (none before) lists the week.
    await hourly(24, tuning);
    const [valid] = marketplace.state.transactions.filter(
      (t) =>
        t.surveyId === 7290 &&
        t.verifyToken === 'Valid' &&
        t.clickedAt >= pacificDayRange(settled).start &&
        t.clickedAt < pacificDayRange(settled).end,
    );
    (valid as SimTransaction).verifyToken = 'Invalid';
    const listedFrom = () =>
      listed.splice(0).map((url) => new URL(url).searchParams.get('startDate') ?? '(all)');
    listedFrom();
    // 14:00 PDT, the same six hours: today alone (and the day before it, which a listing always spans).
    clock += HOUR;
    const between = await hourly(24, tuning);
    expect(between.outcomes[0]).toMatchObject({ skippedDays: 6, summariesWritten: 0 });
    expect(listedFrom()).toEqual([nextDay(TODAY, -1)]);
    expect((await results.summariesOf('7290', [settled]))[0]?.marketplace.owed).toBe('1.50');
    // 17:00 PDT is midnight UTC: the first run of the next six hours lists the week and sees the reversal.
    clock += 3 * HOUR;
    const next = await hourly(24, tuning);
    expect(next.outcomes[0]).toMatchObject({ summariesWritten: 1, changes: { changed: 1 } });
    expect(listedFrom()).toEqual([nextDay(TODAY, -7)]);
    expect((await results.summariesOf('7290', [settled]))[0]?.marketplace).toMatchObject({ owed: '0.00' });
    await expectSameAsFullRecheck('7290');
  });

  it('listing the whole window every six hours: a claim with no transaction waits for the next such run to look back for it, once', async () => {
    await seededWeek(7234);
    const tuning = { windowListHours: 6 };
    await hourly(24, tuning);
    const listedFrom = () =>
      listed.splice(0).map((url) => new URL(url).searchParams.get('startDate') ?? '(all)');
    listedFrom();
    // A success redirect with a made-up token (anyone holding the URL can send one): no transaction anywhere.
    await attempts.recordHit(
      {
        channel: 'redirect',
        surveyId: '7234',
        outcome: 'success',
        pid: 'forged',
        token: 'forged',
        source: 'query',
      },
      new Date(clock),
    );
    const claim = async () =>
      (await results.attemptsByKey('7234', [{ pid: 'forged', token: 'forged' }]))[0]?.reconciliation?.verdict;
    // The runs of the same six hours list today and the day before it, and leave the claim awaiting.
    for (let i = 0; i < 3; i++) {
      clock += HOUR;
      const between = await hourly(24, tuning);
      expect(between.outcomes[0]).toMatchObject({ awaiting: 1, lookbacks: 0 });
      expect(listedFrom()).toEqual([nextDay(TODAY, -1)]);
    }
    expect(await claim()).toBeUndefined();
    // Midnight UTC, the next six hours: the week listed, the claim looked back for once and judged.
    clock += HOUR;
    const whole = await hourly(24, tuning);
    expect(whole.outcomes[0]).toMatchObject({ awaiting: 0, lookbacks: 1 });
    expect(await claim()).toBe('unverified_claim');
    listedFrom();
    // Judged: the runs after it neither look back nor wait for it.
    clock += HOUR;
    expect((await hourly(24, tuning)).outcomes[0]).toMatchObject({ awaiting: 0, lookbacks: 0 });
    await expectSameAsFullRecheck('7234');
  });

  it("a postback re-sent days late beside today's complete of the same respondent: each judged on its own day, and no verdict moves between runs", async () => {
    await survey(7227);
    const midnight = pacificDayRange(TODAY).start.getTime();
    // Four days ago a complete whose postback is re-sent only today; today the same respondent's complete, whose
    // postback was lost. One pid, two tokens.
    const old = await complete(7227, nextDay(TODAY, -4), { arrived: false });
    const fresh = await complete(7227, TODAY, { arrived: false, clickedAt: new Date(midnight + 9 * HOUR) });
    fresh.pid = old.pid;
    // Neither row is listed at first (the older one held back, a survey resumed): the week is judged without them.
    const listing = marketplace.state.transactions;
    for (const t of [old, fresh]) listing.splice(listing.indexOf(t), 1);
    await hourly();
    // Then both are listed, and the older one's postback arrives: today is read as the fresh day, that day as
    // changed, apart.
    listing.push(old, fresh);
    await arrive(old, new Date(clock + 10 * 60_000));
    clock += HOUR;
    await hourly();
    const verdicts = async () =>
      Object.fromEntries(
        await Promise.all(
          [nextDay(TODAY, -4), TODAY].map(async (day) => [
            day,
            (await results.summariesOf('7227', [day]))[0]?.verdicts,
          ]),
        ),
      );
    const expected = {
      [nextDay(TODAY, -4)]: { matched: 1 },
      [TODAY]: { complete_not_received: 1 },
    };
    expect(await verdicts()).toEqual(expected);
    clock += HOUR;
    const next = await hourly();
    expect(next.outcomes[0]).toMatchObject({ changes: { new: 0, changed: 0, refreshed: 0 } });
    expect(await verdicts()).toEqual(expected);
    await expectSameAsFullRecheck('7227');
  });

  it('a postback days late flags its settled day, and the next run reconciles that day alone', async () => {
    await seededWeek(7207);
    const settled = nextDay(TODAY, -4);
    const late = await complete(7207, settled, { arrived: false });
    await hourly();
    expect((await results.summariesOf('7207', [settled]))[0]?.verdicts).toMatchObject({
      complete_not_received: 1,
    });
    // The postback arrives days late; the marketplace's row does not change.
    clock += 10 * 60_000;
    const recorded = await arrive(late, new Date(clock));
    expect(recorded.unflaggedDays).toBeUndefined();
    expect((await results.summariesOf('7207', [settled]))[0]?.ledgerChangedAt).toBe(
      new Date(clock).toISOString(),
    );
    clock += HOUR;
    const next = await hourly();
    expect(next.outcomes[0]).toMatchObject({ skippedDays: 5, summariesWritten: 1, changes: { changed: 1 } });
    expect(readDay(settled)).toBe(true);
    expect(readDay(nextDay(TODAY, -6))).toBe(false);
    expect((await results.summariesOf('7207', [settled]))[0]?.verdicts).toEqual({ matched: 3 });
    // Judged: the run after leaves the day alone again.
    clock += HOUR;
    expect((await hourly()).outcomes[0]).toMatchObject({ skippedDays: 6, summariesWritten: 0 });
    await expectSameAsFullRecheck('7207');
  });

  it('read trailing the table (the attempt feed): a postback late by days that arrived within the lag is judged by the next run', async () => {
    await seededWeek(7241);
    const settled = nextDay(TODAY, -4);
    const late = await complete(7241, settled, { arrived: false });
    await hourly();
    const [made] = await results.attemptsByKey('7241', [{ pid: late.pid, token: late.token }]);
    expect(made?.reconciliation?.verdict).toBe('complete_not_received');
    // The postback arrives three minutes before the next run, whose reads (five minutes behind) do not have it.
    clock += HOUR - 3 * 60_000;
    await arrive(late, new Date(clock));
    const flaggedAt = new Date(clock).toISOString();
    clock += 3 * 60_000;
    trailing = new Map([[late.token, made as Attempt]]);
    try {
      await hourly(24, { attemptsLagMs: 5 * 60_000 });
    } finally {
      trailing = undefined;
    }
    const [summary] = await results.summariesOf('7241', [settled]);
    // Judged from what it read, and recorded as checked five minutes back: before the flag, which stays.
    expect(summary?.verdicts).toMatchObject({ complete_not_received: 1 });
    expect(summary?.checkedAt).toBe(new Date(clock - 5 * 60_000).toISOString());
    expect(summary?.ledgerChangedAt).toBe(flaggedAt);
    clock += HOUR;
    await hourly(24, { attemptsLagMs: 5 * 60_000 });
    expect(readDay(settled)).toBe(true);
    expect((await results.summariesOf('7241', [settled]))[0]?.verdicts).toEqual({ matched: 3 });
    expect((await results.finishedRun(SCHEDULED_RUN))?.checkedAsOf).toBe(
      new Date(
        Date.parse((await results.finishedRun(SCHEDULED_RUN))?.startedAt ?? '') - 5 * 60_000,
      ).toISOString(),
    );
    await expectSameAsFullRecheck('7241');
  });

  it('read trailing the table further than its lag (a feed consumer behind): the late postback is judged within the tolerance', async () => {
    await seededWeek(7242);
    const settled = nextDay(TODAY, -4);
    const late = await complete(7242, settled, { arrived: false });
    await hourly();
    const [made] = await results.attemptsByKey('7242', [{ pid: late.pid, token: late.token }]);
    // The postback arrives twenty minutes before the next run, whose reads (five minutes behind as a rule) are
    // twenty-five behind this time: they do not have it.
    clock += HOUR - 20 * 60_000;
    await arrive(late, new Date(clock));
    clock += 20 * 60_000;
    const feedBehind = {
      attemptsLagMs: 5 * 60_000,
      attemptsAsOf: async (at: Date) => new Date(at.getTime() - HOUR),
    };
    trailing = new Map([[late.token, made as Attempt]]);
    try {
      await hourly(24, feedBehind);
    } finally {
      trailing = undefined;
    }
    expect((await results.summariesOf('7242', [settled]))[0]?.verdicts).toMatchObject({
      complete_not_received: 1,
    });
    // Recorded as checked an hour back: the flag stays, and the next run, reading the postback, judges the day.
    clock += HOUR;
    await hourly(24, feedBehind);
    expect(readDay(settled)).toBe(true);
    expect((await results.summariesOf('7242', [settled]))[0]?.verdicts).toEqual({ matched: 3 });
    await expectSameAsFullRecheck('7242');
  });

  it('a postback under another spelling of the pid answers the transaction judged missing; the item made for it is retired', async () => {
    await seededWeek(7213);
    const settled = nextDay(TODAY, -4);
    const late = await complete(7213, settled, { arrived: false });
    await hourly();
    expect((await results.summariesOf('7213', [settled]))[0]?.verdicts).toMatchObject({
      complete_not_received: 1,
    });
    // Its postback, held in the buffer since two hours after the click, reaches the ledger now with the pid
    // spelt otherwise than in the marketplace's row (the token is the same).
    clock += 10 * 60_000;
    const receivedAt = new Date(Date.parse(late.clickedAt.toISOString()) + 2 * HOUR);
    await arriveSpeltOtherwise(late, receivedAt);
    clock += HOUR;
    const next = await hourly();
    expect(next.outcomes[0]).toMatchObject({ superseded: 1, changes: { changed: 0 } });
    expect((await results.summariesOf('7213', [settled]))[0]?.verdicts).toEqual({ matched: 3 });
    expect(await results.discrepancies(settled, '7213')).toEqual([]);
    const [made, arrived] = await Promise.all(
      [late.pid, late.pid.toUpperCase()].map(
        async (pid) => (await results.attemptsByKey('7213', [{ pid, token: late.token }]))[0],
      ),
    );
    // The item reconciliation made keeps its history; the attempt that arrived carries the match.
    expect(made?.reconciliation).toBeUndefined();
    expect(arrived?.reconciliation).toMatchObject({ verdict: 'matched', day: settled });
    clock += HOUR;
    expect((await hourly()).outcomes[0]).toMatchObject({
      skippedDays: 6,
      summariesWritten: 0,
      superseded: 0,
    });
    await expectSameAsFullRecheck('7213');
  });

  it('an unverified claim judged before the postback came under another spelling of the pid is cleared, not left in the lists', async () => {
    await survey(7230);
    const hit = (channel: 'redirect' | 'postback', pid: string, at: Date) =>
      attempts.recordHit(
        { channel, surveyId: '7230', outcome: 'success', pid, token: 'claim-1', source: 'query' },
        at,
      );
    // A success redirect alone (no transaction listed yet): a claim.
    await hit('redirect', 'b c', new Date(clock - 2 * HOUR));
    await hourly();
    expect(
      (await results.discrepancies(TODAY, '7230')).map((a) => [a.pid, a.reconciliation?.verdict]),
    ).toEqual([['b c', 'unverified_claim']]);
    // The marketplace's server then names the respondent, the pid spelt otherwise (a form's `+`).
    clock += 10 * 60_000;
    await hit('postback', 'b+c', new Date(clock));
    clock += HOUR;
    const next = await hourly();
    expect(next.outcomes[0]).toMatchObject({ collapsed: 1 });
    // One respondent, judged once: the claim is gone from the list and the summary alike.
    expect(
      (await results.discrepancies(TODAY, '7230')).map((a) => [a.pid, a.reconciliation?.verdict]),
    ).toEqual([['b+c', 'complete_not_paid']]);
    expect((await results.summariesOf('7230', [TODAY]))[0]?.verdicts).toEqual({ complete_not_paid: 1 });
    const [redirect] = await results.attemptsByKey('7230', [{ pid: 'b c', token: 'claim-1' }]);
    expect(redirect?.reconciliation).toBeUndefined();
    expect(redirect?.redirect).toBeDefined();
    // Nothing to clear the next time.
    clock += HOUR;
    expect((await hourly()).outcomes[0]).toMatchObject({ collapsed: 0 });
  });

  it('a postback days late under another spelling of the pid: its day points the transaction day to it, which matches it', async () => {
    await seededWeek(7214);
    const settled = nextDay(TODAY, -4);
    const late = await complete(7214, settled, { arrived: false });
    await hourly();
    // Days later the postback arrives with the pid spelt otherwise: first seen today, outside the click day's reads.
    clock += 10 * 60_000;
    await arriveSpeltOtherwise(late, new Date(clock));
    clock += HOUR;
    const found = await hourly();
    expect(found.outcomes[0]).toMatchObject({ earlier: 1 });
    const [made] = await results.attemptsByKey('7214', [{ pid: late.pid, token: late.token }]);
    expect(made?.arrivedAs).toBe(late.pid.toUpperCase());
    clock += HOUR;
    const next = await hourly();
    expect(next.outcomes[0]).toMatchObject({ superseded: 1 });
    expect((await results.summariesOf('7214', [settled]))[0]?.verdicts).toEqual({ matched: 3 });
    expect(await results.discrepancies(settled, '7214')).toEqual([]);
    const [arrived] = await results.attemptsByKey('7214', [
      { pid: late.pid.toUpperCase(), token: late.token },
    ]);
    expect(arrived?.reconciliation).toMatchObject({ verdict: 'matched', day: settled });
    // Today's summary does not count it (it belongs to the click day); the runs after change nothing.
    expect((await results.summariesOf('7214', [TODAY]))[0]?.here.attempts).toBe(2);
    clock += HOUR;
    expect((await hourly()).outcomes[0]).toMatchObject({
      skippedDays: 6,
      summariesWritten: 0,
      superseded: 0,
    });
    await expectSameAsFullRecheck('7214');
  });

  it('a complete the marketplace lists no more, nothing arrived for it: the owed figure it left is a reversal', async () => {
    await seededWeek(7215);
    const settled = nextDay(TODAY, -3);
    const gone = await complete(7215, settled, { arrived: false });
    const terminated = await complete(7215, settled, {
      arrived: false,
      status: 'Over Quota',
      verify: 'Pending',
    });
    await hourly();
    expect((await results.discrepancies(settled, '7215')).map((a) => a.token).sort()).toEqual(
      [gone.token, terminated.token].sort(),
    );
    const owedBefore = (await results.summariesOf('7215', [settled]))[0]?.marketplace.owed;
    expect(owedBefore).toBe('3.00');
    for (const t of [gone, terminated])
      marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(t), 1);
    clock += HOUR;
    const next = await hourly();
    // The termination's item goes; the complete's stays, reversed at the price the owed figure counted it at.
    expect(next.outcomes[0]).toMatchObject({ withdrawn: 1 });
    const [item] = await results.attemptsByKey('7215', [{ pid: gone.pid, token: gone.token }]);
    expect(item?.reconciliation).toMatchObject({
      verdict: 'invalidated',
      day: settled,
      detail: { marketplaceStatus: 'missing', receivedHere: 'nothing', reversedCpi: '1.50' },
    });
    const summary = (await results.summariesOf('7215', [settled]))[0];
    expect(summary?.verdicts).toEqual({ matched: 2, invalidated: 1 });
    expect(summary?.marketplace.owed).toBe('1.50');
    expect((await results.discrepancies(settled, '7215')).map((a) => a.token)).toEqual([gone.token]);
    clock += HOUR;
    expect((await hourly()).outcomes[0]).toMatchObject({ summariesWritten: 0, withdrawn: 0 });
    await expectSameAsFullRecheck('7215');
    // Listed again: owed again, the reversal undone.
    marketplace.state.transactions.push(gone);
    clock += HOUR;
    await hourly(0);
    expect(
      (await results.attemptsByKey('7215', [{ pid: gone.pid, token: gone.token }]))[0]?.reconciliation,
    ).toMatchObject({ verdict: 'complete_not_received', day: settled });
    expect((await results.summariesOf('7215', [settled]))[0]?.marketplace.owed).toBe(owedBefore);
  });

  /** The discrepancies of the survey's week under a token, as finance lists them: [day, kind, pid]. */
  const weekDiscrepancies = async (surveyId: string, token: string) =>
    (await Promise.all(WEEK.map((day) => results.discrepancies(day, surveyId))))
      .flat()
      .filter((a) => a.token === token)
      .map((a) => [a.reconciliation?.day, a.reconciliation?.verdict, a.pid]);

  /** Each week day whose summary's discrepancy counts differ from the discrepancy list's: none when they agree. */
  const agreement = async (surveyId: string) => {
    const differ: Record<string, { summary: string; list: string }> = {};
    const counts = (entries: [string, number | undefined][]) =>
      entries
        .filter(([kind, n]) => kind !== 'matched' && (n ?? 0) > 0)
        .map(([kind, n]) => `${kind}:${n}`)
        .sort()
        .join(',');
    for (const day of WEEK) {
      const summary = counts(Object.entries((await results.summariesOf(surveyId, [day]))[0]?.verdicts ?? {}));
      const listed = new Map<string, number>();
      for (const a of await results.discrepancies(day, surveyId)) {
        const kind = a.reconciliation?.verdict ?? '?';
        listed.set(kind, (listed.get(kind) ?? 0) + 1);
      }
      const list = counts([...listed]);
      if (summary !== list) differ[day] = { summary, list };
    }
    return differ;
  };

  it('a complete judged reversed once its row went, then its postback days late under another spelling of the pid: chased once, not also reversed', async () => {
    await seededWeek(7294);
    const clickDay = nextDay(TODAY, -5);
    const gone = await complete(7294, clickDay, { arrived: false });
    await hourly();
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(gone), 1);
    clock += HOUR;
    await hourly();
    expect(await weekDiscrepancies('7294', gone.token)).toEqual([[clickDay, 'invalidated', gone.pid]]);
    // Today its postback arrives, the pid spelt otherwise: a signed complete the marketplace does not list.
    clock += 10 * 60_000;
    await arriveSpeltOtherwise(gone, new Date(clock));
    clock += HOUR;
    expect((await hourly()).outcomes[0]).toMatchObject({ withdrawn: 1 });
    clock += HOUR;
    await hourly();
    // One complete, one discrepancy: the one to chase (a signed postback), on the day it arrived.
    expect(await weekDiscrepancies('7294', gone.token)).toEqual([
      [TODAY, 'complete_not_paid', gone.pid.toUpperCase()],
    ]);
    expect((await results.summariesOf('7294', [clickDay]))[0]?.verdicts).toEqual({ matched: 2 });
    await expectSameAsFullRecheck('7294');
  });

  it('a reversal and its late postback the index did not show at once: mended by the next run, not counted twice', async () => {
    await seededWeek(7296);
    const clickDay = nextDay(TODAY, -5);
    const gone = await complete(7296, clickDay, { arrived: false });
    await hourly();
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(gone), 1);
    clock += HOUR;
    await hourly();
    // The index a moment behind: the run that judges the late postback does not find the reversal yet.
    const store = results;
    let behind = true;
    results = {
      ...store,
      judgedAs: async (surveyId, kind, days) => (behind ? [] : store.judgedAs(surveyId, kind, days)),
    };
    clock += 10 * 60_000;
    await arriveSpeltOtherwise(gone, new Date(clock));
    clock += HOUR;
    expect((await hourly()).outcomes[0]).toMatchObject({ withdrawn: 0 });
    behind = false;
    clock += HOUR;
    expect((await hourly()).outcomes[0]).toMatchObject({ withdrawn: 1 });
    clock += HOUR;
    await hourly();
    expect(await weekDiscrepancies('7296', gone.token)).toEqual([
      [TODAY, 'complete_not_paid', gone.pid.toUpperCase()],
    ]);
    results = store;
    await expectSameAsFullRecheck('7296');
  });

  it("a day's completes not paid all at once (their rows gone): the other side looked for once, only on days that have one", async () => {
    await survey(7297);
    const day = nextDay(TODAY, -2);
    const rows = [];
    for (let i = 0; i < 30; i++) rows.push(await complete(7297, day));
    await hourly();
    const store = results;
    const looks: { kind: string; days: readonly string[] }[] = [];
    results = {
      ...store,
      judgedAs: async (surveyId, kind, days) => {
        looks.push({ kind, days });
        return store.judgedAs(surveyId, kind, days);
      },
    };
    for (const row of rows)
      marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(row), 1);
    // The first listing without any of them ("No data found") is taken as a passing fault: the survey fails this
    // run, its figures as they were; the next run's empty listing, an hour later, is taken at its word.
    clock += HOUR;
    const held = await hourly(0);
    // Held, not counted among the failed surveys the alarm counts.
    expect(summarizeReconcileRun(held)).toMatchObject({ failed: 0, held: 1 });
    expect(held.outcomes[0]).toMatchObject({
      status: 'failed',
      held: true,
      error: expect.stringMatching(
        /listed no transactions for .* where it listed 30 before: taken as a passing fault/,
      ),
    });
    expect((await results.summariesOf('7297', [day]))[0]?.verdicts).toEqual({ matched: 30 });
    expect((await results.surveyState('7297'))?.emptyDays).toEqual({ [day]: new Date(clock).toISOString() });
    looks.length = 0;
    clock += HOUR;
    await hourly(0);
    results = store;
    expect((await results.summariesOf('7297', [day]))[0]?.verdicts).toEqual({ complete_not_paid: 30 });
    expect((await results.surveyState('7297'))?.emptyDays).toBeUndefined();
    // One look for the survey-run, and no day read: no summary within the horizon counts a reversal.
    expect(looks).toEqual([{ kind: 'invalidated', days: [] }]);
  });

  /** The attempt's own verdict, and its click day's counts, after `runs` hourly runs. */
  const afterRuns = async (
    surveyId: string,
    attempt: { pid: string; token: string },
    day: string,
    runs = 3,
  ) => {
    for (let i = 0; i < runs; i++) {
      clock += HOUR;
      await hourly();
    }
    const [judged] = await results.attemptsByKey(surveyId, [attempt]);
    return {
      verdict: [judged?.reconciliation?.verdict, judged?.reconciliation?.day],
      verdicts: (await results.summariesOf(surveyId, [day]))[0]?.verdicts,
    };
  };

  /**
   * The attempt `arrived` matched with `row` on its click day after the runs to come; then the row goes: the next
   * runs chase it there, once (a signed complete not paid), and a full re-check agrees.
   */
  async function expectMatchedThenChasedOnceRowGoes(
    surveyId: string,
    row: SimTransaction,
    arrived: { pid: string; token: string },
    clickDay: string,
  ) {
    expect(await afterRuns(surveyId, arrived, clickDay)).toEqual({
      verdict: ['matched', clickDay],
      verdicts: { matched: 3 },
    });
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(row), 1);
    expect(await afterRuns(surveyId, arrived, clickDay)).toEqual({
      verdict: ['complete_not_paid', clickDay],
      verdicts: { matched: 2, complete_not_paid: 1 },
    });
    expect(await weekDiscrepancies(surveyId, row.token)).toEqual([
      [clickDay, 'complete_not_paid', arrived.pid],
    ]);
    await expectSameAsFullRecheck(surveyId);
  }

  it('a postback days after its click, matched there, then its row goes: judged anew on its click day, not left matched', async () => {
    await seededWeek(7298);
    const clickDay = nextDay(TODAY, -5);
    const late = await complete(7298, clickDay, { arrived: false });
    clock += 10 * 60_000;
    await arrive(late, new Date(clock));
    expect(await afterRuns('7298', late, clickDay, 1)).toEqual({
      verdict: ['matched', clickDay],
      verdicts: { matched: 3 },
    });
    // The click day's reading holds it only through its row (first seen today): the day says so.
    expect((await results.summariesOf('7298', [clickDay]))[0]?.outsiders).toBe(1);
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(late), 1);
    // A signed complete the marketplace lists no more: one to chase, where it was clicked in.
    expect(await afterRuns('7298', late, clickDay)).toEqual({
      verdict: ['complete_not_paid', clickDay],
      verdicts: { matched: 2, complete_not_paid: 1 },
    });
    await expectSameAsFullRecheck('7298');
  });

  it('a postback days late under another spelling of the pid, matched through the item, then its row goes: judged anew, not left matched', async () => {
    await seededWeek(7299);
    const clickDay = nextDay(TODAY, -5);
    const late = await complete(7299, clickDay, { arrived: false });
    await hourly();
    clock += 10 * 60_000;
    await arriveSpeltOtherwise(late, new Date(clock));
    const arrived = { pid: late.pid.toUpperCase(), token: late.token };
    await expectMatchedThenChasedOnceRowGoes('7299', late, arrived, clickDay);
  });

  it('a row gone and its postback under another spelling of the pid arriving between the same two runs: the next run ends with one complete, its day counting it once', async () => {
    await seededWeek(7232);
    const clickDay = nextDay(TODAY, -5);
    const row = await complete(7232, clickDay, { arrived: false });
    await hourly();
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(row), 1);
    clock += 10 * 60_000;
    await arriveSpeltOtherwise(row, new Date(clock));
    clock += HOUR;
    await hourly();
    expect(await weekDiscrepancies('7232', row.token)).toEqual([
      [TODAY, 'complete_not_paid', row.pid.toUpperCase()],
    ]);
    expect((await results.summariesOf('7232', [clickDay]))[0]?.verdicts).toEqual({ matched: 2 });
    await expectSameAsFullRecheck('7232');
  });

  it('a complete nothing arrived for, re-filed onto another day, then listed no more: its reversal counted on the day it moved to', async () => {
    await seededWeek(7233);
    const firstDay = nextDay(TODAY, -5);
    const movedTo = nextDay(TODAY, -3);
    const row = await complete(7233, firstDay, { arrived: false, verify: 'Valid' });
    await hourly();
    // The marketplace files the row under another click day; the item made for it stays indexed on its first.
    row.clickedAt = new Date(pacificDayRange(movedTo).start.getTime() + 10 * HOUR);
    if (row.completedAt) row.completedAt = new Date(row.clickedAt.getTime() + 10 * 60_000);
    expect(await afterRuns('7233', row, movedTo, 2)).toEqual({
      verdict: ['complete_not_received', movedTo],
      verdicts: { matched: 2, complete_not_received: 1 },
    });
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(row), 1);
    expect(await afterRuns('7233', row, movedTo)).toEqual({
      verdict: ['invalidated', movedTo],
      verdicts: { matched: 2, invalidated: 1 },
    });
    expect(await agreement('7233')).toEqual({});
    await expectSameAsFullRecheck('7233');
  });

  it('a complete that arrived here, its row re-filed two days later: matched there, and the day it left judged once, not flipping back every run', async () => {
    await seededWeek(7917);
    const firstDay = nextDay(TODAY, -5);
    const movedTo = nextDay(TODAY, -3);
    const row = await complete(7917, firstDay);
    await hourly();
    row.clickedAt = new Date(pacificDayRange(movedTo).start.getTime() + 10 * HOUR);
    if (row.completedAt) row.completedAt = new Date(row.clickedAt.getTime() + 10 * 60_000);
    const histories: number[] = [];
    for (let run = 0; run < 4; run++) {
      clock += HOUR;
      await hourly();
      const [judged] = await results.attemptsByKey('7917', [row]);
      expect(judged?.reconciliation).toMatchObject({ verdict: 'matched', day: movedTo });
      histories.push(judged?.reconciliation?.history.length ?? 0);
    }
    // Moved once, then left alone: no verdict written again by the runs after.
    expect(new Set(histories).size).toBe(1);
    // Counted on the day it moved to, and on its first day by nothing: no complete to chase there.
    expect((await results.summariesOf('7917', [firstDay]))[0]?.verdicts).toEqual({ matched: 2 });
    expect((await results.summariesOf('7917', [movedTo]))[0]?.verdicts).toEqual({ matched: 3 });
    expect(await agreement('7917')).toEqual({});
    await expectSameAsFullRecheck('7917');
    // Then the row goes: chased on the day it was last listed, not on the day first seen.
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(row), 1);
    expect(await afterRuns('7917', row, movedTo)).toEqual({
      verdict: ['complete_not_paid', movedTo],
      verdicts: { matched: 2, complete_not_paid: 1 },
    });
    expect((await results.summariesOf('7917', [firstDay]))[0]?.verdicts).toEqual({ matched: 2 });
  });

  it('the same onto the day after, both days judged together when it moved: its reversal still counted there', async () => {
    await seededWeek(7235);
    const firstDay = nextDay(TODAY, -4);
    const movedTo = nextDay(TODAY, -3);
    const row = await complete(7235, firstDay, { arrived: false, verify: 'Valid' });
    await hourly();
    row.clickedAt = new Date(pacificDayRange(movedTo).start.getTime() + 10 * HOUR);
    if (row.completedAt) row.completedAt = new Date(row.clickedAt.getTime() + 10 * 60_000);
    expect(await afterRuns('7235', row, movedTo, 2)).toEqual({
      verdict: ['complete_not_received', movedTo],
      verdicts: { matched: 2, complete_not_received: 1 },
    });
    // Filed by the day index on the day it was made: the day it moved to counts it among its outsiders.
    expect((await results.summariesOf('7235', [movedTo]))[0]?.outsiders).toBe(1);
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(row), 1);
    expect(await afterRuns('7235', row, movedTo)).toEqual({
      verdict: ['invalidated', movedTo],
      verdicts: { matched: 2, invalidated: 1 },
    });
    expect(await agreement('7235')).toEqual({});
    await expectSameAsFullRecheck('7235');
  });

  it.each([
    [7236, 'the day index'],
    [7237, 'the attempt feed, which has not reached it yet'],
  ])(
    'an item made on a day the same run judges again is no outsider of it (%i, read from %s)',
    async (id, _) => {
      await seededWeek(id);
      const day = nextDay(TODAY, -3);
      const moving = await complete(id, day);
      await hourly();
      // A complete nothing arrived for, and another row of the day re-filed onto the next (the run judges the day again).
      const fresh = await complete(id, day, { arrived: false });
      moving.clickedAt = new Date(pacificDayRange(nextDay(day, 1)).start.getTime() + 10 * HOUR);
      if (moving.completedAt) moving.completedAt = new Date(moving.clickedAt.getTime() + 10 * 60_000);
      clock += HOUR;
      const runStart = new Date(clock).toISOString();
      const table = attempts;
      // Read trailing the table: the items this run makes are not there yet.
      if (id === 7237)
        attempts = {
          ...table,
          attemptsOfSurvey: async (surveyId, from, to) =>
            (await table.attemptsOfSurvey(surveyId, from, to)).filter(
              (a) => a.firstSeenAt !== undefined || (a.reconciliation?.history[0]?.at ?? '') < runStart,
            ),
        };
      try {
        await hourly();
      } finally {
        attempts = table;
      }
      expect((await results.attemptsByKey(String(id), [fresh]))[0]?.reconciliation?.verdict).toBe(
        'complete_not_received',
      );
      expect((await results.summariesOf(String(id), [day]))[0]?.outsiders).toBeUndefined();
    },
  );

  it('a late postback on a day held back past the window by an unreadable row, its row then gone: judged anew there', async () => {
    await seededWeek(7238);
    const clickDay = nextDay(TODAY, -5);
    const late = await complete(7238, clickDay, { arrived: false });
    clock += 10 * 60_000;
    await arrive(late, new Date(clock));
    clock += HOUR;
    await hourly(1000);
    expect((await results.summariesOf('7238', [clickDay]))[0]).toMatchObject({
      verdicts: { matched: 3 },
      outsiders: 1,
    });
    // A row of the day that cannot be read (its price) holds the day back, run after run, until it left the window.
    let unreadable = true;
    const broken = reconciler({
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        fetch: async (input, init) => {
          const response = await fetch(input, init);
          if (!unreadable) return response;
          const body = (await response.json()) as { result?: Record<string, unknown>[] };
          const model = (body.result ?? []).find((r) => r.token === late.token);
          const extra = model ? [{ ...model, token: 'bad-7238', PID: 'bad-7238', CPI: 'n/a' }] : [];
          return new Response(JSON.stringify({ ...body, result: [...(body.result ?? []), ...extra] }), {
            status: 200,
          });
        },
      }),
      attempts,
      registry,
      results,
      now: () => new Date(clock),
      settledRecheckMs: 1000 * HOUR,
    });
    for (let i = 0; i < 5; i++) {
      clock += 12 * HOUR;
      await broken.scheduled(7, { deadline: new Date(clock + HOUR) });
    }
    expect((await results.surveyState('7238'))?.failedDays).toEqual([clickDay]);
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(late), 1);
    unreadable = false;
    clock += HOUR;
    await hourly(1000);
    clock += HOUR;
    await hourly(1000);
    const [judged] = await results.attemptsByKey('7238', [late]);
    const [summary] = await results.summariesOf('7238', [clickDay]);
    expect([judged?.reconciliation?.verdict, summary?.verdicts, summary?.outsiders]).toEqual([
      'complete_not_paid',
      { matched: 2, complete_not_paid: 1 },
      1,
    ]);
  });

  it('a row gone, its postback days late under another spelling of the pid, the row back, then gone again: one complete to chase', async () => {
    await seededWeek(7231);
    const clickDay = nextDay(TODAY, -5);
    const row = await complete(7231, clickDay, { arrived: false });
    await hourly();
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(row), 1);
    clock += HOUR;
    await hourly();
    clock += 10 * 60_000;
    await arriveSpeltOtherwise(row, new Date(clock));
    const arrived = { pid: row.pid.toUpperCase(), token: row.token };
    expect(await afterRuns('7231', arrived, clickDay, 2)).toEqual({
      verdict: ['complete_not_paid', TODAY],
      verdicts: { matched: 2 },
    });
    marketplace.state.transactions.push(row);
    await expectMatchedThenChasedOnceRowGoes('7231', row, arrived, clickDay);
  });

  it.each([
    ['lost (an item made for its row)', 7928, false],
    ['received', 7929, true],
  ])(
    'a signed complete whose first postback was %s, re-sent after the look-back under another spelling of the pid: judged once with its row, not chased',
    async (_, id, received) => {
      await survey(id);
      const surveyId = String(id);
      const clickDay = nextDay(TODAY, -15);
      const row = await complete(id, clickDay, { arrived: received });
      await engine().run(clickDay, clickDay, [surveyId]);
      const first = (await results.attemptsByKey(surveyId, [row]))[0]?.reconciliation?.verdict;
      expect(first).toBe(received ? 'matched' : 'complete_not_received');
      // Fifteen days on, the marketplace sends it again after an outage, the pid spelt otherwise.
      await arriveSpeltOtherwise(row, new Date(clock));
      const resent = { pid: row.pid.toUpperCase(), token: row.token };
      for (let run = 0; run < 3; run++) {
        clock += HOUR;
        await hourly();
      }
      clock += 24 * HOUR;
      await hourly();
      const chased = async () =>
        (
          await Promise.all(
            [clickDay, TODAY, nextDay(TODAY, 1)].map((day) => results.discrepancies(day, surveyId)),
          )
        )
          .flat()
          .filter((a) => a.token === row.token)
          .map((a) => [a.reconciliation?.day, a.reconciliation?.verdict, a.pid]);
      // One complete, owed once on its day, nothing to chase: the re-sent postback is the respondent's, judged there.
      expect(await chased()).toEqual([]);
      const [late] = await results.attemptsByKey(surveyId, [resent]);
      if (!received) expect(late?.reconciliation).toMatchObject({ verdict: 'matched', day: clickDay });
      const [summary] = await results.summariesOf(surveyId, [clickDay]);
      expect(summary?.verdicts).toEqual({ matched: 1 });
      expect(summary?.marketplace.owed).toBe('1.50');
    },
  );

  it('a complete not paid judged first, then the row of its token found gone on a day judged by itself: not also reversed', async () => {
    await seededWeek(7295);
    const clickDay = nextDay(TODAY, -5);
    const gone = await complete(7295, clickDay, { arrived: false });
    await hourly();
    // The row goes, and its postback arrives under another spelling of the pid; only today is judged (its
    // click day's change is seen by a later look).
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(gone), 1);
    clock += 10 * 60_000;
    await arriveSpeltOtherwise(gone, new Date(clock));
    clock += HOUR;
    await engine().run(TODAY, TODAY, ['7295']);
    expect(await weekDiscrepancies('7295', gone.token)).toEqual([
      [clickDay, 'complete_not_received', gone.pid],
      [TODAY, 'complete_not_paid', gone.pid.toUpperCase()],
    ]);
    await engine().run(clickDay, clickDay, ['7295']);
    expect(await weekDiscrepancies('7295', gone.token)).toEqual([
      [TODAY, 'complete_not_paid', gone.pid.toUpperCase()],
    ]);
    expect((await results.summariesOf('7295', [clickDay]))[0]?.verdicts).toEqual({ matched: 2 });
    await expectSameAsFullRecheck('7295');
  });

  it('a day past the window with only a complete nothing arrived for, listed empty: held to its next daily look, then reversed and still watched; the row back undoes the reversal', async () => {
    await survey(7293);
    const oldest = WEEK[0] as string;
    const gone = await complete(7293, oldest, { arrived: false });
    await hourly();
    expect((await results.surveyState('7293'))?.reviewedDays).toEqual([oldest]);
    clock += 2 * 24 * HOUR;
    await hourly();
    // A weekly look meets "No data found" for the day: taken as a passing fault, the day is looked at again the
    // next day; empty again, the item is judged reversed, and the day stays watched.
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(gone), 1);
    clock += 7 * 24 * HOUR;
    await hourly();
    const verdictOf = async () =>
      (await results.attemptsByKey('7293', [{ pid: gone.pid, token: gone.token }]))[0]?.reconciliation
        ?.verdict;
    expect(await verdictOf()).toBe('complete_not_received');
    expect((await results.surveyState('7293'))?.emptyDays).toEqual({
      [oldest]: new Date(clock).toISOString(),
    });
    // The hourly runs in between (the day is not due for them) keep its first answer.
    for (let h = 1; h < 24; h++) {
      clock += HOUR;
      await hourly();
    }
    expect(Object.keys((await results.surveyState('7293'))?.emptyDays ?? {})).toEqual([oldest]);
    clock += HOUR;
    await hourly();
    expect(await verdictOf()).toBe('invalidated');
    expect((await results.surveyState('7293'))?.reviewedDays).toEqual([oldest]);
    // Listed again: the next weekly look finds it owed again.
    marketplace.state.transactions.push(gone);
    clock += 7 * 24 * HOUR;
    await hourly();
    expect(await verdictOf()).toBe('complete_not_received');
    expect((await results.summariesOf('7293', [oldest]))[0]?.marketplace.owed).toBe('1.50');
  });

  it('a complete re-filed under another status with its review left Valid: a reversal at the price owed counted', async () => {
    await survey(7292);
    const settled = nextDay(TODAY, -2);
    const received = await complete(7292, settled);
    const unreceived = await complete(7292, settled, { arrived: false });
    await hourly();
    expect((await results.summariesOf('7292', [settled]))[0]?.marketplace.owed).toBe('3.00');
    // "Adjusted to terminate": both rows now Failed, the buyer's review as it was.
    for (const t of [received, unreceived]) Object.assign(t, { status: 'Failed' });
    clock += HOUR;
    await hourly(0);
    const summary = (await results.summariesOf('7292', [settled]))[0];
    expect(summary?.marketplace.owed).toBe('0.00');
    expect(summary?.verdicts).toEqual({ invalidated: 2 });
    const judged = await results.attemptsByKey('7292', [
      { pid: received.pid, token: received.token },
      { pid: unreceived.pid, token: unreceived.token },
    ]);
    for (const attempt of judged)
      expect(attempt.reconciliation).toMatchObject({
        verdict: 'invalidated',
        detail: { marketplaceStatus: 'Failed', verifyToken: 'Valid', reversedCpi: '1.50' },
      });
    await expectSameAsFullRecheck('7292');
  });

  /**
   * A complete clicked in at 23:47 Pacific whose postback came at 00:11 the next day, beside a complete on each of
   * the two days; the marketplace lists it only once both days have been out of the window for days (listed again
   * when this returns).
   */
  async function completeListedTenDaysLate(surveyId: number) {
    await survey(surveyId);
    const clickDay = nextDay(TODAY, -1);
    const seenDay = TODAY;
    const late = await complete(surveyId, clickDay, {
      arrived: false,
      clickedAt: new Date(pacificDayRange(clickDay).start.getTime() + 23 * HOUR + 47 * 60_000),
    });
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(late), 1);
    await arrive(late, new Date(pacificDayRange(seenDay).start.getTime() + 11 * 60_000));
    await complete(surveyId, clickDay);
    await complete(surveyId, seenDay);
    await hourly();
    const verdictsOf = async (day: string) =>
      (await results.summariesOf(String(surveyId), [day]))[0]?.verdicts;
    expect(await verdictsOf(seenDay)).toEqual({ matched: 1, complete_not_paid: 1 });
    for (let d = 0; d < 10; d++) {
      clock += 24 * HOUR;
      await hourly();
    }
    marketplace.state.transactions.push(late);
    const judged = async () =>
      (await results.attemptsByKey(String(surveyId), [{ pid: late.pid, token: late.token }]))[0]
        ?.reconciliation;
    return { clickDay, seenDay, judged, verdictsOf };
  }

  it('a complete listed days after both its click day and its first-seen day left the window: the run that moves it judges the day it left too', async () => {
    const { clickDay, seenDay, judged, verdictsOf } = await completeListedTenDaysLate(7280);
    let moved = false;
    for (let h = 0; h < 24 * 8 && !moved; h += 6) {
      clock += 6 * HOUR;
      await hourly();
      moved = (await judged())?.day === clickDay;
    }
    // The run that moved it judged the day it left too: no day counts it twice meanwhile.
    expect(await judged()).toMatchObject({ verdict: 'matched', day: clickDay });
    expect(await verdictsOf(clickDay)).toEqual({ matched: 2 });
    expect(await verdictsOf(seenDay)).toEqual({ matched: 1 });
    expect(await results.discrepancies(seenDay, '7280')).toEqual([]);
    clock += HOUR;
    await hourly();
    expect(await verdictsOf(seenDay)).toEqual({ matched: 1 });
  });

  it('with matched verdicts implied, a non-complete re-filed under a day past the window: counted there by the next run, of either setting', async () => {
    const lean = { impliedMatches: true };
    await survey(7281);
    const seenDay = WEEK[0] as string;
    const refiledDay = nextDay(seenDay, -3);
    const failed = await complete(7281, seenDay, { arrived: false, status: 'Failed', verify: 'Pending' });
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7281',
        outcome: 'fail',
        pid: failed.pid,
        token: failed.token,
        source: 'query',
      },
      new Date(failed.clickedAt.getTime() + 11 * 60_000),
    );
    await hourly(24, lean);
    const attemptOf = async () => (await attempts.attemptsOf('7281', failed.pid))[0];
    // An agreement the attempt tells by itself: no verdict on it, its day counts it.
    expect((await attemptOf())?.reconciliation).toBeUndefined();
    const countedOn = async (day: string) =>
      (await results.summariesOf('7281', [day]))[0]?.here.attempts ?? 0;
    expect(await countedOn(seenDay)).toBe(1);
    // The marketplace re-files it three days earlier, a day past the window that no run reads by itself; the
    // setting is back to every verdict kept meanwhile.
    // (The window's listing, empty now, taken at its word at once.)
    failed.clickedAt = new Date(pacificDayRange(refiledDay).start.getTime() + 10 * HOUR);
    clock += HOUR;
    await hourly(24, { emptyConfirmMs: 0 });
    expect(await countedOn(seenDay)).toBe(0);
    // The run that found it there flagged that day; the next one judges it (with its verdict written: another day).
    clock += HOUR;
    await hourly(24, { emptyConfirmMs: 0 });
    expect(readWholeDay(refiledDay)).toBe(true);
    expect(await countedOn(refiledDay)).toBe(1);
    expect((await attemptOf())?.reconciliation).toMatchObject({ verdict: 'matched', day: refiledDay });
  });

  it('the day a verdict left, its judging failing in that run and in the next: read the next day, not at its weekly look', async () => {
    const { clickDay, seenDay, judged, verdictsOf } = await completeListedTenDaysLate(7281);
    // The first-seen day's listing fails while the verdict moves (its second pass) and in the run after (its flag).
    failListingsFrom = nextDay(seenDay, -1);
    try {
      for (let h = 0; h < 24 * 8 && (await judged())?.day !== clickDay; h += 6) {
        clock += 6 * HOUR;
        await hourly();
      }
      expect(await judged()).toMatchObject({ verdict: 'matched', day: clickDay });
      clock += HOUR;
      await hourly();
    } finally {
      failListingsFrom = undefined;
    }
    expect(await verdictsOf(seenDay)).toEqual({ matched: 1, complete_not_paid: 1 });
    // Not every run: the next hour leaves it; the next day reads it, and its figures are its list's again.
    clock += HOUR;
    await hourly();
    expect(await verdictsOf(seenDay)).toEqual({ matched: 1, complete_not_paid: 1 });
    clock += 24 * HOUR;
    await hourly();
    expect(await verdictsOf(seenDay)).toEqual({ matched: 1 });
    expect(await results.discrepancies(seenDay, '7281')).toEqual([]);
  });

  /**
   * A complete clicked in at 23:50 Pacific and first seen at 00:06 (its postback), which the marketplace lists only
   * once both days have left the window, just after their weekly look; then another complete's postback, lost for
   * days, is re-sent and flags the first-seen day. Returns what the next run is to be checked by.
   */
  async function rowListedBesideAFlaggedDay(surveyId: number) {
    await survey(surveyId);
    const clickDay = nextDay(TODAY, -1);
    const seenDay = TODAY;
    const late = await complete(surveyId, clickDay, {
      arrived: false,
      clickedAt: new Date(pacificDayRange(clickDay).start.getTime() + 23 * HOUR + 50 * 60_000),
    });
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(late), 1);
    await arrive(late, new Date(pacificDayRange(seenDay).start.getTime() + 6 * 60_000));
    await complete(surveyId, clickDay);
    const lost = await complete(surveyId, seenDay, { arrived: false });
    await hourly();
    const verdictsOf = async (day: string) =>
      (await results.summariesOf(String(surveyId), [day]))[0]?.verdicts;
    expect(await verdictsOf(seenDay)).toEqual({ complete_not_paid: 1, complete_not_received: 1 });
    let weeklyLookNow = false;
    for (let d = 0; d < 20 && !(d >= 8 && weeklyLookNow); d++) {
      clock += 24 * HOUR;
      await hourly();
      weeklyLookNow =
        (await results.surveyState(String(surveyId)))?.reviewedCheckedAt === new Date(clock).toISOString();
    }
    expect(weeklyLookNow).toBe(true);
    marketplace.state.transactions.push(late);
    clock += HOUR;
    await arrive(lost, new Date(clock));
    clock += HOUR;
    const judged = async () =>
      (await results.attemptsByKey(String(surveyId), [{ pid: late.pid, token: late.token }]))[0]
        ?.reconciliation;
    /** Each day's counts are its list's, and the complete is matched on its click day. */
    const expectAllRight = async () => {
      expect(await judged()).toMatchObject({ verdict: 'matched', day: clickDay });
      expect(await verdictsOf(seenDay)).toEqual({ matched: 1 });
      expect(await results.discrepancies(seenDay, String(surveyId))).toEqual([]);
      expect(await verdictsOf(clickDay)).toEqual({ matched: 2 });
    };
    return { clickDay, judged, expectAllRight };
  }

  it('a day past the window judged for a late hit finds one of its attempts listed on the day before: that day is judged in the same run', async () => {
    const { expectAllRight } = await rowListedBesideAFlaggedDay(7291);
    await hourly();
    // The first-seen day's run found its row on the day before, which is judged in the same run: no day lists a
    // verdict that its summary does not count.
    await expectAllRight();
  });

  it('the same, the listing of the day before failing in that run: it is flagged, and the next run judges it', async () => {
    const { clickDay, judged, expectAllRight } = await rowListedBesideAFlaggedDay(7292);
    failListingsFrom = nextDay(clickDay, -1);
    try {
      expect((await hourly()).outcomes[0]).toMatchObject({ openFailures: 1 });
    } finally {
      failListingsFrom = undefined;
    }
    expect(await judged()).toMatchObject({ verdict: 'complete_not_paid' });
    clock += HOUR;
    await hourly();
    await expectAllRight();
  });

  it('the same, the figures of the day before not written in that run: it is flagged, and the next run judges it', async () => {
    const { clickDay, judged, expectAllRight } = await rowListedBesideAFlaggedDay(7293);
    summaryWritesOfDayFail = clickDay;
    expect((await hourly()).outcomes[0]).toMatchObject({ openFailures: 1 });
    expect(summaryWritesOfDayFail).toBeUndefined();
    // Its verdict moved (written before the figures), the day's figures did not: the flag brings the day back.
    expect(await judged()).toMatchObject({ verdict: 'matched', day: clickDay });
    clock += HOUR;
    await hourly();
    await expectAllRight();
  });

  it('a complete clicked in before midnight and first seen after it, listed no more: judged on its click day, run after run', async () => {
    await survey(7285);
    const clickDay = nextDay(TODAY, -3);
    const seenDay = nextDay(TODAY, -2);
    const withdrawn = await complete(7285, clickDay, {
      arrived: false,
      clickedAt: new Date(pacificDayRange(clickDay).start.getTime() + 23 * HOUR + 51 * 60_000),
    });
    await arrive(withdrawn, new Date(pacificDayRange(seenDay).start.getTime() + 12 * 60_000));
    await hourly();
    const judged = async () =>
      (await results.attemptsByKey('7285', [{ pid: withdrawn.pid, token: withdrawn.token }]))[0]
        ?.reconciliation;
    expect(await judged()).toMatchObject({ verdict: 'matched', day: clickDay });
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(withdrawn), 1);
    for (let run = 0; run < 3; run++) {
      clock += HOUR;
      // Every settled day read again every run (re-checks due at once): each judges it anew (the emptied listing
      // taken at its word at once).
      await hourly(0, { emptyConfirmMs: 0 });
      // The click day its transaction once gave: the same every run, and that day's figures count it.
      expect(await judged()).toMatchObject({ verdict: 'complete_not_paid', day: clickDay });
      expect((await results.summariesOf('7285', [clickDay]))[0]?.verdicts).toEqual({ complete_not_paid: 1 });
      expect((await results.summariesOf('7285', [seenDay]))[0]?.verdicts ?? {}).toEqual({});
    }
  });

  it('a respondent back the next day whose complete is listed no more: judged on its own day, not paired by pid with the day before', async () => {
    await survey(7275);
    const before = nextDay(TODAY, -3);
    const day = nextDay(TODAY, -2);
    // The same panel id on two days: over quota on the first, a complete on the second.
    const overQuota = await complete(7275, before, { arrived: false });
    Object.assign(overQuota, { pid: 'resp-7', status: 'Over Quota', verifyToken: 'Pending' });
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7275',
        outcome: 'fail',
        pid: 'resp-7',
        token: overQuota.token,
        source: 'query',
      },
      new Date(overQuota.clickedAt.getTime() + 11 * 60_000),
    );
    const later = await complete(7275, day, { arrived: false });
    later.pid = 'resp-7';
    await arrive(later, new Date(later.clickedAt.getTime() + 11 * 60_000));
    await hourly();
    const judged = async () =>
      (await results.attemptsByKey('7275', [{ pid: 'resp-7', token: later.token }]))[0]?.reconciliation;
    expect(await judged()).toMatchObject({ verdict: 'matched', day });
    // The marketplace lists the complete no more: its postback is a complete not paid, on its own day.
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(later), 1);
    clock += HOUR;
    await hourly();
    expect(await judged()).toMatchObject({ verdict: 'complete_not_paid', day });
    expect((await results.summariesOf('7275', [day]))[0]?.verdicts).toEqual({ complete_not_paid: 1 });
    await expectSameAsFullRecheck('7275');
  });

  it('a day past the window whose completes are still Pending is read once a day until the buyer decides', async () => {
    await survey(7216);
    const oldest = WEEK[0] as string;
    const pending = await complete(7216, oldest, { verify: 'Pending' });
    await hourly();
    expect((await results.surveyState('7216'))?.openDays).toEqual([oldest]);
    // A manual run of another day leaves it open.
    await engine().run(TODAY, TODAY, ['7216']);
    expect((await results.surveyState('7216'))?.openDays).toEqual([oldest]);
    // Two days on, the day is out of the window; the buyer has not decided yet.
    clock += 2 * 24 * HOUR;
    await hourly();
    expect(readWholeDay(oldest)).toBe(true);
    expect((await results.surveyState('7216'))?.openDays).toEqual([oldest]);
    // Not again within the day.
    clock += HOUR;
    await hourly();
    expect(readDay(oldest)).toBe(false);
    // The buyer accepts it; the next daily read takes it into what is owed, and the day is closed.
    pending.verifyToken = 'Valid';
    clock += 24 * HOUR;
    await hourly();
    expect(readWholeDay(oldest)).toBe(true);
    expect((await results.summariesOf('7216', [oldest]))[0]?.marketplace).toMatchObject({
      validCompletes: 1,
      pendingCompletes: 0,
      owed: '1.50',
    });
    expect((await results.surveyState('7216'))?.openDays).toBeUndefined();
    clock += 25 * HOUR;
    await hourly();
    expect(readDay(oldest)).toBe(false);
  });

  it('settled days re-checked monthly: a Pending day past the window is still read daily, a failed weekly look made again the next day', async () => {
    const monthly = 720;
    await survey(7926);
    const oldest = WEEK[0] as string;
    const pending = await complete(7926, oldest, { verify: 'Pending' });
    await hourly(monthly);
    clock += 2 * 24 * HOUR;
    await hourly(monthly);
    expect((await results.surveyState('7926'))?.openDays).toEqual([oldest]);
    // The buyer accepts it: the next day's read takes it into what is owed, not the month's.
    pending.verifyToken = 'Valid';
    clock += 24 * HOUR;
    await hourly(monthly);
    expect((await results.summariesOf('7926', [oldest]))[0]?.marketplace).toMatchObject({
      validCompletes: 1,
      owed: '1.50',
    });
    // Now a reviewed day, looked at weekly.
    clock += 24 * HOUR;
    await hourly(monthly);
    expect(await results.surveyState('7926')).toMatchObject({ reviewedDays: [oldest] });
    // Its weekly look fails: the next is made a day later, never at a time already past nor weeks on.
    const checked = Date.parse((await results.surveyState('7926'))?.reviewedCheckedAt ?? '');
    clock = checked + 7 * 24 * HOUR + HOUR;
    failListingsBefore = nextDay(oldest, 2);
    try {
      await hourly(monthly);
    } finally {
      failListingsBefore = undefined;
    }
    const next = Date.parse((await results.surveyState('7926'))?.reviewedCheckedAt ?? '') + 7 * 24 * HOUR;
    expect(next - clock).toBeGreaterThan(0);
    expect(next - clock).toBeLessThanOrEqual(24 * HOUR);
  });

  it('a day past the window with a review it does not know is read daily, shown as money until the marketplace says', async () => {
    await survey(7405);
    const oldest = WEEK[0] as string;
    // A word the local marketplace never writes, as a real one might.
    const rejected = await complete(7405, oldest, { verify: 'Rejected' as VerifyState });
    await hourly();
    const [figures] = await results.summariesOf('7405', [oldest]);
    expect(figures?.verdicts).toEqual({ unknown_status: 1 });
    expect(figures?.marketplace).toMatchObject({
      completes: 1,
      pendingCompletes: 0,
      owed: '0.00',
      pending: '0.00',
    });
    expect((await results.surveyState('7405'))?.openDays).toEqual([oldest]);
    // Out of the window, still read once a day.
    clock += 2 * 24 * HOUR;
    await hourly();
    expect(readWholeDay(oldest)).toBe(true);
    // The marketplace settles it as the buyer's Invalid: a reversal, and the day is closed.
    rejected.verifyToken = 'Invalid';
    clock += 24 * HOUR;
    await hourly();
    expect((await results.summariesOf('7405', [oldest]))[0]?.verdicts).toEqual({ invalidated: 1 });
    expect((await results.surveyState('7405'))?.openDays).toBeUndefined();
  });

  it('a day past the window whose completes were all reviewed is listed again weekly: a reversal after the fact reaches what is owed', async () => {
    await survey(7221);
    const oldest = WEEK[0] as string;
    const paid = await complete(7221, oldest, { verify: 'Valid' });
    await hourly();
    expect(await results.surveyState('7221')).toMatchObject({ reviewedDays: [oldest] });
    expect((await results.surveyState('7221'))?.openDays).toBeUndefined();
    // Out of the window: its rows are listed once (unchanged), its attempts not read.
    clock += 2 * 24 * HOUR;
    await hourly();
    expect(readDay(oldest)).toBe(false);
    const checked = (await results.surveyState('7221'))?.reviewedCheckedAt;
    expect(checked).toBe(new Date(clock).toISOString());
    // The buyer reverses the complete. Within the week nothing looks again.
    paid.verifyToken = 'Invalid';
    clock += 24 * HOUR;
    await hourly();
    expect((await results.summariesOf('7221', [oldest]))[0]?.marketplace.owed).toBe('1.50');
    // A week after the last look its rows have changed: the day is reconciled, the reversal counted.
    clock += 6 * 24 * HOUR;
    const found = await hourly();
    expect(readWholeDay(oldest)).toBe(true);
    expect(found.outcomes[0]?.changes.changed).toBe(1);
    const [summary] = await results.summariesOf('7221', [oldest]);
    expect(summary?.marketplace).toMatchObject({ owed: '0.00', validCompletes: 0, invalidCompletes: 1 });
    expect(summary?.verdicts).toEqual({ invalidated: 1 });
    // Nothing left to watch on it: reviewed, invalid, and so listed again only until the horizon like the rest.
    expect((await results.surveyState('7221'))?.reviewedDays).toEqual([oldest]);
    clock += HOUR;
    await hourly();
    expect(readDay(oldest)).toBe(false);
  });

  it('a reviewed day is listed once more on the day it reaches the review horizon: a reversal after its last weekly look still counts', async () => {
    await survey(7406);
    const oldest = WEEK[0] as string;
    const paid = await complete(7406, oldest, { verify: 'Valid' });
    await hourly();
    expect(await results.surveyState('7406')).toMatchObject({ reviewedDays: [oldest] });
    const noonOf = (day: string) => pacificDayRange(day).start.getTime() + 12 * HOUR;
    // Its weekly look falls five days before it reaches the horizon.
    clock = noonOf(nextDay(oldest, REVIEW_HORIZON_DAYS - 5));
    await hourly();
    expect((await results.surveyState('7406'))?.reviewedCheckedAt).toBe(new Date(clock).toISOString());
    // The buyer reverses the complete after that look.
    paid.verifyToken = 'Invalid';
    clock = noonOf(nextDay(oldest, REVIEW_HORIZON_DAYS - 1));
    await hourly();
    expect((await results.summariesOf('7406', [oldest]))[0]?.marketplace.owed).toBe('1.50');
    // A run's own day kept as the last final look (as a release before kept it) does not stand in the way.
    const kept = await results.surveyState('7406');
    await results.putSurveyState({
      ...(kept as NonNullable<typeof kept>),
      reviewedFinalDay: nextDay(oldest, REVIEW_HORIZON_DAYS - 1),
    });
    // Its last day within the horizon: listed once more, the reversal counted (and not listed again that day).
    clock = noonOf(nextDay(oldest, REVIEW_HORIZON_DAYS));
    await hourly();
    const [summary] = await results.summariesOf('7406', [oldest]);
    expect(summary?.marketplace).toMatchObject({ owed: '0.00', invalidCompletes: 1 });
    expect(summary?.verdicts).toEqual({ invalidated: 1 });
    expect((await results.surveyState('7406'))?.reviewedFinalDay).toBe(oldest);
    const listings = () =>
      listed.filter((url) => {
        const { pathname, searchParams } = new URL(url);
        return (
          pathname.endsWith('/getSurveyTransactions/7406') &&
          (searchParams.get('startDate') ?? '~') <= oldest &&
          oldest <= (searchParams.get('endDate') ?? '')
        );
      }).length;
    const before = listings();
    clock += HOUR;
    await hourly();
    expect(listings()).toBe(before);
  });

  it("a reviewed day whose last look at the horizon failed is listed by the next day's run, a day past it", async () => {
    await survey(7407);
    const oldest = WEEK[0] as string;
    const paid = await complete(7407, oldest, { verify: 'Valid' });
    await hourly();
    const noonOf = (day: string) => pacificDayRange(day).start.getTime() + 12 * HOUR;
    clock = noonOf(nextDay(oldest, REVIEW_HORIZON_DAYS - 5));
    await hourly();
    paid.verifyToken = 'Invalid';
    // Every listing of it (and of the days beside it) fails on its last day within the horizon.
    failListingsBefore = nextDay(oldest, 2);
    try {
      clock = noonOf(nextDay(oldest, REVIEW_HORIZON_DAYS));
      await hourly();
      clock += HOUR;
      await hourly();
    } finally {
      failListingsBefore = undefined;
    }
    expect((await results.summariesOf('7407', [oldest]))[0]?.marketplace.owed).toBe('1.50');
    expect((await results.surveyState('7407'))?.reviewedFinalDay).toBeUndefined();
    // The next day: listed once more, the reversal counted.
    clock = noonOf(nextDay(oldest, REVIEW_HORIZON_DAYS + 1));
    await hourly();
    const [summary] = await results.summariesOf('7407', [oldest]);
    expect(summary?.marketplace).toMatchObject({ owed: '0.00', invalidCompletes: 1 });
    // Past the horizon now: no longer watched.
    expect((await results.surveyState('7407'))?.reviewedDays ?? []).not.toContain(oldest);
  });

  it('a complete re-filed as a termination at a price of 0 is a reversal of the price it was paid at', async () => {
    await survey(7225);
    const settled = WEEK[3] as string;
    const refiled = await complete(7225, settled, { verify: 'Valid' });
    await hourly();
    refiled.status = 'Quality Termination';
    refiled.verifyToken = 'Invalid';
    clock += HOUR;
    await hourly();
    const [reversal] = await results.discrepancies(settled, '7225');
    // The marketplace's row shows 0; what was reversed is the price it was paid at, in its own column.
    expect(reversal && discrepancyOf(reversal)).toMatchObject({
      kind: 'invalidated',
      marketplaceStatus: 'Quality Termination',
      cpi: expect.stringMatching(/^0(\.00)?$/),
      expectedCpi: '1.50',
      money: true,
    });
  });

  it('a day that left the window while no run ran is still caught: its Pending completes are read until decided', async () => {
    await survey(7223);
    const second = WEEK[1] as string;
    const pending = await complete(7223, second, { verify: 'Pending' });
    await hourly();
    // No run for two days (a deployment, the scheduler off): the day leaves the window unseen as its oldest.
    clock += 2 * 24 * HOUR;
    await hourly();
    expect((await results.surveyState('7223'))?.openDays).toEqual([second]);
    pending.verifyToken = 'Valid';
    clock += 24 * HOUR;
    await hourly();
    expect((await results.summariesOf('7223', [second]))[0]?.marketplace).toMatchObject({
      owed: '1.50',
      pendingCompletes: 0,
    });
  });

  it('a day whose complete only this side had is watched past the window: listed late, it is owed', async () => {
    await survey(7224);
    const oldest = WEEK[0] as string;
    const late = await complete(7224, oldest, { verify: 'Valid' });
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(late), 1);
    await hourly();
    expect((await results.summariesOf('7224', [oldest]))[0]?.verdicts).toEqual({ complete_not_paid: 1 });
    expect((await results.surveyState('7224'))?.reviewedDays).toEqual([oldest]);
    clock += 2 * 24 * HOUR;
    await hourly();
    // The marketplace lists it days later; the weekly look finds it.
    marketplace.state.transactions.push(late);
    clock += 7 * 24 * HOUR;
    await hourly();
    const [summary] = await results.summariesOf('7224', [oldest]);
    expect(summary?.marketplace.owed).toBe('1.50');
    expect(summary?.verdicts).toEqual({ matched: 1 });
  });

  it('a day the marketplace listed nothing for while attempts arrived here is watched past the window: a complete listed late is owed', async () => {
    await survey(7226);
    const oldest = WEEK[0] as string;
    // A respondent terminated here (its fail postback), and the marketplace lists no row of the day yet.
    const terminated = await complete(7226, oldest, { arrived: false });
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(terminated), 1);
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7226',
        outcome: 'fail',
        pid: terminated.pid,
        token: terminated.token,
        source: 'query',
      },
      new Date(terminated.clickedAt.getTime() + 5 * 60_000),
    );
    await hourly();
    expect((await results.surveyState('7226'))?.reviewedDays).toEqual([oldest]);
    clock += 2 * 24 * HOUR;
    await hourly();
    // The marketplace catches up: the day's rows appear, a complete among them that never reached this side.
    await complete(7226, oldest, { arrived: false, verify: 'Valid' });
    marketplace.state.transactions.push({ ...terminated, status: 'Failed' });
    clock += 7 * 24 * HOUR;
    await hourly();
    const [summary] = await results.summariesOf('7226', [oldest]);
    expect(summary?.marketplace).toMatchObject({ owed: '1.50', validCompletes: 1 });
    expect(summary?.verdicts).toMatchObject({ complete_not_received: 1 });
  });

  it('a postback re-sent days after its day left the window: the next run reconciles the day, not its weekly look', async () => {
    await survey(7227);
    const oldest = WEEK[0] as string;
    const late = await complete(7227, oldest, { arrived: false, verify: 'Valid' });
    await hourly();
    expect((await results.summariesOf('7227', [oldest]))[0]?.verdicts).toEqual({ complete_not_received: 1 });
    // Out of the window and listed once since (its weekly look done), the marketplace re-sends the postback.
    clock += 2 * 24 * HOUR;
    await hourly();
    clock += 24 * HOUR;
    await arrive(late, new Date(clock));
    clock += HOUR;
    await hourly();
    const [summary] = await results.summariesOf('7227', [oldest]);
    expect(summary?.verdicts).toEqual({ matched: 1 });
    expect(summary?.here.postbackCompletes).toBe(1);
    // Dealt with: the next runs read the day no more until its weekly look.
    clock += HOUR;
    await hourly();
    expect(readDay(oldest)).toBe(false);
  });

  it('a flagged day past the window whose listing fails is read daily, not by every run', async () => {
    await survey(7228);
    const oldest = WEEK[0] as string;
    const late = await complete(7228, oldest, { arrived: false, verify: 'Valid' });
    await hourly();
    clock += 2 * 24 * HOUR;
    await hourly();
    clock += 24 * HOUR;
    await arrive(late, new Date(clock));
    // The next run tries the flagged day; the marketplace fails its listing (the window's own listing answers).
    failListingsBefore = WEEK[0];
    try {
      clock += HOUR;
      expect((await hourly()).outcomes[0]).toMatchObject({ status: 'reconciled', openFailures: 1 });
    } finally {
      failListingsBefore = undefined;
    }
    // Tried and failed: the day waits for its next daily look, not listed again by every run meanwhile.
    clock += HOUR;
    listed.length = 0;
    await hourly();
    const covers = (url: string) => {
      const query = new URL(url).searchParams;
      return (query.get('startDate') ?? '') <= oldest && oldest <= (query.get('endDate') ?? '');
    };
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.filter(covers)).toEqual([]);
  });

  it('a postback under another pid spelling a week after the click: the click day, past the window, is read again for it', async () => {
    await survey(7217);
    const oldest = WEEK[0] as string;
    const late = await complete(7217, oldest, { arrived: false, verify: 'Valid' });
    await hourly();
    // A day and a half on, the click day has left the window; the postback arrives, spelt otherwise.
    clock += 36 * HOUR;
    await arriveSpeltOtherwise(late, new Date(clock));
    clock += HOUR;
    await hourly();
    expect((await results.surveyState('7217'))?.openDays).toEqual([oldest]);
    clock += HOUR;
    const next = await hourly();
    expect(readWholeDay(oldest)).toBe(true);
    expect(next.outcomes[0]).toMatchObject({ superseded: 1 });
    expect((await results.summariesOf('7217', [oldest]))[0]?.verdicts).toEqual({ matched: 1 });
    expect((await results.surveyState('7217'))?.openDays).toBeUndefined();
  });

  it('a day past the window that cannot be read stays open for the next day; the rest of the survey is reconciled', async () => {
    await survey(7218);
    const oldest = WEEK[0] as string;
    await complete(7218, oldest, { verify: 'Pending' });
    await hourly();
    clock += 2 * 24 * HOUR;
    // The marketplace sends an unreadable row with the old days only.
    const broken = reconciler({
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        fetch: async (input, init) => {
          const response = await fetch(input, init);
          const start = new URL(String(input)).searchParams.get('startDate') ?? '';
          if (start >= oldest) return response;
          const body = (await response.json()) as { result?: unknown[] };
          const result = [
            ...(body.result ?? []),
            { token: 'bad', PID: 'p', status: 'Completed', CPI: 'n/a' },
          ];
          return new Response(JSON.stringify({ ...body, result }), { status: 200 });
        },
      }),
      attempts,
      registry,
      results,
      now: () => new Date(clock),
      settledRecheckMs: 24 * HOUR,
    });
    const report = await broken.scheduled(7, { deadline: new Date(clock + HOUR) });
    expect(report?.outcomes[0]).toMatchObject({ status: 'reconciled', openFailures: 1 });
    // The run's summary (what the function logs) says which survey, and why.
    expect(report && summarizeReconcileRun(report)).toMatchObject({
      failed: 0,
      openFailures: 1,
      openDayFailures: [{ surveyId: '7218', error: expect.stringMatching(/1 unreadable transaction rows/) }],
    });
    const state = await results.surveyState('7218');
    expect(state).toMatchObject({ openDays: [oldest], failedDays: [] });
    expect((await results.summariesOf('7218', [nextDay(TODAY, 2)]))[0]).toBeDefined();
  });

  it.each([
    ['removed here', 7219],
    ['closed at the marketplace', 7222],
  ] as const)(
    'a survey %s is read only on its days past the window, until the buyer has decided',
    async (how, id) => {
      await survey(id);
      const oldest = WEEK[0] as string;
      const pending = await complete(id, oldest, { verify: 'Pending' });
      await hourly();
      const endedAt = new Date(clock).toISOString();
      await registry.put({
        surveyId: String(id),
        ...(how === 'removed here'
          ? { state: 'removed' as const, removedAt: endedAt, verified: false }
          : { state: 'active' as const, closedAt: endedAt, verified: true }),
        failures: 0,
        updatedAt: endedAt,
      });
      pending.verifyToken = 'Valid';
      clock += 10 * 24 * HOUR;
      await hourly();
      expect(readWholeDay(oldest)).toBe(true);
      expect(readDay(nextDay(TODAY, 10))).toBe(false);
      expect((await results.summariesOf(String(id), [oldest]))[0]?.marketplace).toMatchObject({
        owed: '1.50',
      });
      expect((await results.surveyState(String(id)))?.openDays).toBeUndefined();
    },
  );

  it('a survey removed here, its completes of the days after still in the window then: watched once no window is read, a review after that counted', async () => {
    await survey(7918);
    // Removed today; the marketplace still runs it, and completes of two days on arrive here (the supplier's own
    // global postback, or the survey's URLs still cached).
    await registry.put({
      surveyId: '7918',
      state: 'removed',
      removedAt: new Date(clock).toISOString(),
      verified: false,
      failures: 0,
      updatedAt: new Date(clock).toISOString(),
    });
    const after = nextDay(TODAY, 2);
    const pending = await complete(7918, after, { verify: 'Pending' });
    const paid = await complete(7918, after);
    // A run a day, past the day the runs stop reading a window (the removal two days before the window's start).
    for (let day = 1; day <= 12; day++) {
      clock += 24 * HOUR;
      await hourly();
    }
    expect((await results.surveyState('7918'))?.openDays).toEqual([after]);
    // The buyer decides days later: one approved, the other rejected.
    pending.verifyToken = 'Valid';
    paid.verifyToken = 'Invalid';
    clock += 24 * HOUR;
    await hourly();
    expect((await results.summariesOf('7918', [after]))[0]?.marketplace).toMatchObject({
      owed: '1.50',
      pendingCompletes: 0,
    });
    expect((await results.attemptsByKey('7918', [paid]))[0]?.reconciliation?.verdict).toBe('invalidated');
  });

  it.each([
    ["first applied here at noon (the supplier's previous system had the morning)", 7920],
    ['removed here at noon (moved to another stack)', 7921],
  ] as const)(
    'a survey %s: the completes that ended outside that time that nothing here heard of are not judged nor counted',
    async (how, id) => {
      await survey(id);
      const noon = new Date(pacificDayRange(TODAY).start.getTime() + 12 * HOUR);
      const stamp = noon.toISOString();
      await registry.put({
        surveyId: String(id),
        failures: 0,
        updatedAt: stamp,
        ...(how.startsWith('first')
          ? { state: 'active' as const, verified: true, servingSince: stamp }
          : { state: 'removed' as const, verified: false, removedAt: stamp }),
      });
      const [morning, afternoon] = [9, 12.5].map(
        (h) => new Date(pacificDayRange(TODAY).start.getTime() + h * HOUR),
      );
      const outside = how.startsWith('first') ? morning : afternoon;
      const inside = how.startsWith('first') ? afternoon : morning;
      // Outside: one nothing here heard of, and one whose postback came here all the same (judged as ever).
      const elsewhere = await complete(id, TODAY, { clickedAt: outside as Date, arrived: false });
      await complete(id, TODAY, { clickedAt: outside as Date });
      // Inside: one received, one not (a hole in this side's records, money).
      await complete(id, TODAY, { clickedAt: inside as Date });
      await complete(id, TODAY, { clickedAt: inside as Date, arrived: false });
      clock = noon.getTime() + 6 * HOUR;
      const report = await hourly();
      // Said in the run's outcome (the CLI prints it), and not among its transactions.
      expect(report.outcomes[0]).toMatchObject({ elsewhereRows: 1, transactions: 3 });
      const [summary] = await results.summariesOf(String(id), [TODAY]);
      expect(summary?.verdicts).toEqual({ matched: 2, complete_not_received: 1 });
      expect(summary?.marketplace.transactions).toBe(3);
      expect((await results.attemptsByKey(String(id), [elsewhere]))[0]).toBeUndefined();
    },
  );

  it("a survey removed at noon and applied again at three: the completes that ended between are another system's, before and after", async () => {
    await survey(7922);
    const at = (hour: number) => new Date(pacificDayRange(TODAY).start.getTime() + hour * HOUR);
    // As the apply after the removal writes it: the first start kept, the time between noted.
    await registry.put({
      surveyId: '7922',
      state: 'active',
      verified: true,
      failures: 0,
      servingSince: at(-6 * 24).toISOString(),
      notServing: [{ from: at(12).toISOString(), to: at(15).toISOString() }],
      updatedAt: at(15).toISOString(),
    });
    const ended = (hour: number) => ({ clickedAt: at(hour - 1 / 6), completedAt: at(hour), arrived: false });
    const before = await complete(7922, TODAY, ended(9));
    const between = await complete(7922, TODAY, ended(13));
    const after = await complete(7922, TODAY, ended(16));
    clock = at(18).getTime();
    await hourly();
    const judged = await results.attemptsByKey('7922', [before, between, after]);
    expect(Object.fromEntries(judged.map((a) => [a.token, a.reconciliation?.verdict]))).toEqual({
      [before.token]: 'complete_not_received',
      [after.token]: 'complete_not_received',
    });
    expect(judged.map((a) => a.token)).not.toContain(between.token);
    expect((await results.summariesOf('7922', [TODAY]))[0]?.marketplace.transactions).toBe(2);
  });

  it.each([
    ['registered by applies the marketplace all refused', 7924, { neverTaken: true }],
    ['applied again after a removal without the marketplace taking it', 7925, { notServingSince: 'noon' }],
  ] as const)(
    "a survey %s: a complete nothing here heard of after that is not this stack's",
    async (_, id, how) => {
      await survey(id);
      const at = (hour: number) => new Date(pacificDayRange(TODAY).start.getTime() + hour * HOUR);
      await registry.put({
        surveyId: String(id),
        state: 'active',
        verified: false,
        failures: 1,
        ...('neverTaken' in how
          ? { neverTaken: true }
          : { servingSince: at(-6 * 24).toISOString(), notServingSince: at(12).toISOString() }),
        updatedAt: at(12).toISOString(),
      });
      const elsewhere = await complete(id, TODAY, {
        clickedAt: at(14),
        completedAt: at(14.25),
        arrived: false,
      });
      clock = at(18).getTime();
      const report = await hourly();
      expect(report.outcomes[0]).toMatchObject({ elsewhereRows: 1 });
      expect((await results.attemptsByKey(String(id), [elsewhere]))[0]).toBeUndefined();
    },
  );

  it('a survey removed at 1:45 am on the autumn change: a complete at 1:20 PDT, written "PST" by the marketplace, is still this stack\'s', async () => {
    await survey(7923);
    const removedAt = '2026-11-01T08:45:00.000Z'; // 01:45 PDT, the first pass of the repeated hour
    await registry.put({
      surveyId: '7923',
      state: 'removed',
      verified: false,
      failures: 0,
      servingSince: '2026-10-25T17:00:00.000Z',
      removedAt,
      updatedAt: removedAt,
    });
    // Ended at 08:20Z (01:20 PDT): its "1:20:00 am PST" reads as the later instant, 09:20Z, past the removal.
    const lost = await complete(7923, '2026-11-01', {
      clickedAt: new Date('2026-11-01T08:00:00.000Z'),
      completedAt: new Date('2026-11-01T08:20:00.000Z'),
      arrived: false,
    });
    clock = Date.parse('2026-11-01T20:00:00.000Z');
    await hourly();
    expect((await results.attemptsByKey('7923', [lost]))[0]?.reconciliation?.verdict).toBe(
      'complete_not_received',
    );
  });

  it('a settled day whose flag was lost is re-checked once its re-check is due, and the change is then reconciled', async () => {
    await seededWeek(7204);
    const settled = nextDay(TODAY, -4);
    const late = await complete(7204, settled, { arrived: false });
    await hourly(2);
    // The postback arrives days late, and the flag's write fails: the hit stands, the day is not flagged.
    const recorded = await withoutSummaryWrites(() => arrive(late, new Date(clock + 10 * 60_000)));
    expect(recorded.attempt.postback?.outcome).toBe('success');
    expect(recorded.unflaggedDays).toEqual([settled]);
    clock += HOUR;
    const quiet = await hourly(2);
    expect(quiet.outcomes[0]).toMatchObject({ skippedDays: 6, summariesWritten: 0 });
    expect(readDay(settled)).toBe(false);
    expect((await results.summariesOf('7204', [settled]))[0]?.verdicts).toMatchObject({
      complete_not_received: 1,
    });

    clock += HOUR + 60_000;
    const due = await hourly(2);
    expect(due.outcomes[0]).toMatchObject({ skippedDays: 0, summariesWritten: 1 });
    expect(WEEK.every(readDay)).toBe(true);
    const summary = (await results.summariesOf('7204', [settled]))[0];
    expect(summary?.verdicts).toEqual({ matched: 3 });
    // Unchanged settled days record the check, without rewriting their figures.
    const other = (await results.summariesOf('7204', [nextDay(TODAY, -5)]))[0];
    expect(other?.checkedAt).toBe(new Date(clock).toISOString());
    expect((other?.reconciledAt ?? '') < (other?.checkedAt ?? '')).toBe(true);
    await expectSameAsFullRecheck('7204');
  });
});

/** A survey's days and state as a release of an earlier edition of the rules left them: judged `verdicts`, no edition. */
async function judgedByEarlierEdition(
  surveyId: string,
  days: readonly string[],
  verdicts: Record<string, number>,
) {
  for (const summary of await results.summariesOf(surveyId, days)) {
    const { reconciledAt: _r, checkedAt: _c, ledgerChangedAt: _l, ...figures } = summary;
    await results.putDaySummary({ ...figures, verdicts }, new Date(clock), 'run-old');
  }
  const state = await results.surveyState(surveyId);
  if (!state) throw new Error(`survey ${surveyId} has no state`);
  const { rulesEdition: _e, ...earlier } = state;
  await results.putSurveyState(earlier);
}

describe('an upgrade across a change of the verdict rules', () => {
  it.each([
    [7260, 24],
    [7927, 720],
  ])(
    'days past the window an earlier edition judged are judged again by the next scheduled run, once; a listing that fails, a day later (survey %i, settled days re-checked every %i hours)',
    async (id, hours) => {
      const surveyId = String(id);
      await survey(id);
      const oldest = WEEK[0] as string;
      await complete(id, oldest, { verify: 'Valid' });
      await complete(id, oldest, { verify: 'Valid', arrived: false });
      await hourly(hours);
      expect((await results.surveyState(surveyId))?.rulesEdition).toBe(VERDICT_RULES_EDITION);
      // The day leaves the window.
      clock += 2 * 24 * HOUR;
      await hourly(hours);
      const [right] = await results.summariesOf(surveyId, [oldest]);
      expect(right?.verdicts).toEqual({ matched: 1, complete_not_received: 1 });
      // What a release of an earlier edition of the rules left: the day judged otherwise, no edition in the state.
      await judgedByEarlierEdition(surveyId, [oldest], { complete_not_paid: 2 });

      // The first run after the upgrade cannot list the day: the edition stays, tried again a day later.
      failListingsBefore = nextDay(oldest);
      clock += HOUR;
      try {
        await hourly(hours);
      } finally {
        failListingsBefore = undefined;
      }
      expect((await results.surveyState(surveyId))?.rulesEdition).toBeUndefined();
      clock += HOUR;
      await hourly(hours);
      expect(readDay(oldest)).toBe(false);
      expect((await results.summariesOf(surveyId, [oldest]))[0]?.verdicts).toEqual({ complete_not_paid: 2 });

      clock += 24 * HOUR;
      await hourly(hours);
      expect(readWholeDay(oldest)).toBe(true);
      expect((await results.summariesOf(surveyId, [oldest]))[0]?.verdicts).toEqual(right?.verdicts);
      expect((await results.surveyState(surveyId))?.rulesEdition).toBe(VERDICT_RULES_EDITION);
      // Once: the runs after it leave the day to its own looks.
      clock += HOUR;
      await hourly(hours);
      expect(readDay(oldest)).toBe(false);
    },
  );
});

describe('an upgrade across a change of the verdict rules, many days back', () => {
  it('judges the days of the window and of the horizon again a listing of days a run, newest first; each ends right', async () => {
    await survey(7265);
    // Days reconciled by hand back to 16 days ago (a complete on each), then the hourly schedule.
    const days = Array.from({ length: 17 }, (_, i) => nextDay(TODAY, i - 16));
    for (const day of days) await complete(7265, day);
    await engine().run(days[0] as string, TODAY, ['7265']);
    await hourly();
    // What a release of an earlier edition left: every day judged otherwise, no edition in the state.
    await judgedByEarlierEdition('7265', days, { complete_not_paid: 1 });
    const right = async () =>
      (await results.summariesOf('7265', days)).filter((s) => s.verdicts.matched === 1).map((s) => s.day);

    // The first run: the window (its oldest day, settled and checked an hour ago, included) and the seven days before it.
    clock += HOUR;
    await hourly();
    expect(await right()).toEqual(days.slice(days.length - 14));
    expect(await results.surveyState('7265')).toMatchObject({ rejudgedFrom: days[days.length - 14] });
    expect((await results.surveyState('7265'))?.rulesEdition).toBeUndefined();
    // The next: the days before those; then the edition is this one and nothing more is judged again.
    clock += HOUR;
    await hourly();
    expect(await right()).toEqual(days);
    expect((await results.surveyState('7265'))?.rulesEdition).toBe(VERDICT_RULES_EDITION);
    expect((await results.surveyState('7265'))?.rejudgedFrom).toBeUndefined();
    clock += HOUR;
    await hourly();
    expect(readDay(days[0] as string)).toBe(false);
  });
});

describe('judgements left for later', () => {
  it('a settled day that held discrepancies too recent to judge is read by the next run, and they are judged then', async () => {
    await survey(7206);
    const yesterday = nextDay(TODAY, -1);
    const midnight = pacificDayRange(TODAY).start.getTime();
    // 00:10 today, with only today fresh: a respondent clicked in at 23:50 and completed at 00:05; no postback yet.
    clock = midnight + 10 * 60_000;
    const late = await complete(7206, yesterday, {
      arrived: false,
      verify: 'Pending',
      clickedAt: new Date(midnight - 10 * 60_000),
      completedAt: new Date(midnight + 5 * 60_000),
    });
    const tuning = { freshDays: 1, settleMs: 10 * 60_000 };
    const first = await hourly(24, tuning);
    expect(first.outcomes[0]).toMatchObject({ status: 'reconciled', awaiting: 1 });
    expect((await results.summariesOf('7206', [yesterday]))[0]?.awaiting).toBe(1);

    // The postback arrives at 00:30; the marketplace's row does not change, and yesterday was checked an hour ago.
    await arrive(late, new Date(midnight + 30 * 60_000));
    clock += HOUR;
    const next = await hourly(24, tuning);
    expect(next.outcomes[0]).toMatchObject({ skippedDays: 5, summariesWritten: 1, awaiting: 0 });
    const summary = (await results.summariesOf('7206', [yesterday]))[0];
    expect(summary?.verdicts).toEqual({ matched: 1 });
    expect(summary?.awaiting).toBeUndefined();

    // Nothing left to judge: the run after leaves it alone.
    clock += HOUR;
    expect((await hourly(24, tuning)).outcomes[0]).toMatchObject({ skippedDays: 6, summariesWritten: 0 });
  });
});

describe('verdicts a run cannot stand behind', () => {
  it('a hit between the run reading an attempt and writing its verdict: not written, the day read again next run', async () => {
    await survey(7210);
    const yesterday = nextDay(TODAY, -1);
    const midnight = pacificDayRange(TODAY).start.getTime();
    const tuning = { settleMs: 10 * 60_000 };
    // A complete at 23:40 yesterday whose postback is late; its success redirect is here.
    const t = await complete(7210, yesterday, {
      arrived: false,
      clickedAt: new Date(midnight - 20 * 60_000),
      completedAt: new Date(midnight - 15 * 60_000),
    });
    await attempts.recordHit(
      {
        channel: 'redirect',
        surveyId: '7210',
        outcome: 'success',
        pid: t.pid,
        token: t.token,
        source: 'query',
      },
      new Date(midnight - 15 * 60_000),
    );
    // 00:20: the first run after yesterday ended reads it; the postback lands right after that read.
    clock = midnight + 20 * 60_000;
    const landed = postbackAfterRead(t);
    const overtaken = await hourly(24, tuning);
    expect(landed()).toBe(true);
    expect(overtaken.outcomes[0]).toMatchObject({ awaiting: 1, verdicts: {} });
    // The day's figures count the overtaken attempt as arrived, as any awaiting one (a success redirect no run has
    // judged is no complete here yet), with no verdict for it, and say it awaits.
    expect((await results.summariesOf('7210', [yesterday]))[0]).toMatchObject({
      verdicts: {},
      awaiting: 1,
      here: { attempts: 1, redirectOnlyCompletes: 0 },
    });
    const [attempt] = await attempts.attemptsOf('7210', t.pid);
    expect(attempt?.reconciliation).toBeUndefined();
    // 01:20: yesterday is read again and judged with the postback.
    clock += HOUR;
    await hourly(24, tuning);
    expect(readWholeDay(yesterday)).toBe(true);
    expect((await results.summariesOf('7210', [yesterday]))[0]?.verdicts).toEqual({ matched: 1 });
  });

  it('a discrepancy awaiting judgement again after a late hit: the day counts what arrived and the verdict finance lists', async () => {
    await survey(7229);
    const tuning = { settleMs: 10 * 60_000 };
    const hit = (channel: 'redirect' | 'postback', outcome: 'success' | 'fail') =>
      ({
        channel,
        surveyId: '7229',
        outcome,
        pid: 'p-claim',
        token: 'steady-claim',
        source: 'query',
      }) as const;
    // A success redirect the marketplace does not list: a claim, once settled.
    await attempts.recordHit(hit('redirect', 'success'), new Date(clock - HOUR));
    await hourly(24, tuning);
    expect((await results.summariesOf('7229', [TODAY]))[0]?.verdicts).toEqual({ unverified_claim: 1 });
    // Its fail postback arrives late; the next run, within the settling time, leaves it to a later run.
    clock += 60_000;
    await attempts.recordHit(hit('postback', 'fail'), new Date(clock));
    clock += 60_000;
    await hourly(24, tuning);
    // Meanwhile the day counts the attempt and the verdict it carries, as the list finance reads does.
    expect((await results.summariesOf('7229', [TODAY]))[0]).toMatchObject({
      awaiting: 1,
      verdicts: { unverified_claim: 1 },
      here: { attempts: 1 },
    });
    expect((await results.discrepancies(TODAY, '7229')).map((a) => a.reconciliation?.verdict)).toEqual([
      'unverified_claim',
    ]);
    clock += 15 * 60_000;
    await hourly(24, tuning);
    expect((await results.summariesOf('7229', [TODAY]))[0]?.verdicts).toEqual({ contradicted_claim: 1 });
  });

  it('an attempt whose transaction turns up on the day before: both days are right by the run after', async () => {
    await survey(7211);
    const day = nextDay(TODAY, -3);
    const before = nextDay(day, -1);
    // A postback on `day` for a transaction the marketplace does not list (yet).
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7211',
        outcome: 'success',
        pid: 'p-moved',
        token: 'steady-moved',
        source: 'query',
      },
      new Date(pacificDayRange(day).start.getTime() + 10 * HOUR),
    );
    await hourly();
    expect((await results.summariesOf('7211', [day]))[0]?.verdicts).toEqual({ complete_not_paid: 1 });
    // The marketplace now lists it, clicked in on the day before.
    const clickedAt = new Date(pacificDayRange(before).start.getTime() + 23 * HOUR);
    marketplace.state.transactions.push({
      surveyId: 7211,
      token: 'steady-moved',
      pid: 'p-moved',
      status: 'Completed',
      ip: '198.51.100.1',
      trackId: 'steady-moved',
      termReason: '',
      clickedAt,
      completedAt: new Date(clickedAt.getTime() + 10 * 60_000),
      verifyToken: 'Valid',
      notified: true,
    });
    clock += HOUR;
    await hourly();
    expect((await results.summariesOf('7211', [before]))[0]?.verdicts).toEqual({ matched: 1 });
    // The day the attempt left is flagged, and the next run takes it out of that day's figures.
    clock += HOUR;
    await hourly();
    expect((await results.summariesOf('7211', [day]))[0]?.verdicts).toEqual({});
    await expectSameAsFullRecheck('7211');
  });
});

describe('one token the marketplace lists on two days', () => {
  /** A complete's row on `first` at 10:00 Pacific, its postback here, and the same token's row on `second` too. */
  async function listedTwice(
    surveyId: number,
    first: string,
    second: string,
    copy: Partial<SimTransaction>,
    arrived = true,
  ) {
    await survey(surveyId);
    const row = await complete(surveyId, first, { arrived });
    marketplace.state.transactions.push({
      ...row,
      clickedAt: new Date(pacificDayRange(second).start.getTime() + 10 * HOUR),
      ...copy,
    });
    return row;
  }
  /** The survey's days from `from` to today on the clock, with the completes and owed each counts. */
  async function counted(surveyId: number, from: string) {
    const today = pacificDayOfClock();
    const days: string[] = [];
    for (let day = from; day <= today; day = nextDay(day)) days.push(day);
    return (await results.summariesOf(String(surveyId), days))
      .filter((s) => s.marketplace.transactions > 0)
      .map((s) => [s.day, s.marketplace.completes, s.marketplace.owed]);
  }
  const pacificDayOfClock = () => {
    let day = TODAY;
    while (pacificDayRange(day).end.getTime() <= clock) day = nextDay(day);
    return day;
  };
  const verdictOf = async (t: SimTransaction) =>
    (await results.attemptsByKey(String(t.surveyId), [{ pid: t.pid, token: t.token }]))[0]?.reconciliation;

  it.each([
    ['a complete on both', { surveyId: 7250, copy: {} }],
    [
      'a complete on the first, a termination at 0 on the second',
      { surveyId: 7251, copy: { status: 'Failed' } },
    ],
  ])(
    '%s: the first day counts it, every run for two weeks, as the days leave the window; the verdict stays',
    async (_, { surveyId, copy }) => {
      const [first, second] = [nextDay(TODAY, -5), nextDay(TODAY, -3)];
      const row = await listedTwice(surveyId, first, second, copy);
      for (let run = 0; run < 14 * 4; run++) {
        await hourly();
        expect(await counted(surveyId, nextDay(first, -1))).toEqual([[first, 1, '1.50']]);
        clock += 6 * HOUR;
      }
      expect(await verdictOf(row)).toMatchObject({
        verdict: 'matched',
        day: first,
        history: [{ day: first }],
      });
    },
  );

  it.each([
    ['its pid spelt otherwise (matched by token)', 7257, 'spelt'],
    ['under another token (matched by pid)', 7258, 'token'],
  ] as const)(
    'its attempt arrived %s: the later day makes no item of its own for the copy once the first day leaves the window',
    async (_, surveyId, how) => {
      const [first, second] = [nextDay(TODAY, -5), nextDay(TODAY, -2)];
      const row = await listedTwice(surveyId, first, second, {}, false);
      // Not under the row's own key: the respondent's postback, its pid spelt otherwise or its token another.
      const at = new Date(row.clickedAt.getTime() + 11 * 60_000);
      if (how === 'spelt') await arriveSpeltOtherwise(row, at);
      else await arrive({ ...row, token: `${row.token}-other` }, at);
      for (let run = 0; run < 14 * 4; run++) {
        await hourly();
        expect(await counted(surveyId, nextDay(first, -1))).toEqual([[first, 1, '1.50']]);
        clock += 6 * HOUR;
      }
      const item = (await results.attemptsByKey(String(surveyId), [{ pid: row.pid, token: row.token }]))[0];
      expect(item?.reconciliation?.verdict).not.toBe('complete_not_received');
    },
  );

  it('a day run alone and the hourly run agree: the earlier day found whatever the listing starts at', async () => {
    const first = nextDay(TODAY, -10);
    const row = await listedTwice(7263, first, TODAY, {}, false);
    await arriveSpeltOtherwise(row, new Date(row.clickedAt.getTime() + 11 * 60_000));
    await engine().run(first, first, ['7263']);
    for (const run of [() => engine().run(TODAY, TODAY, ['7263']), () => hourly()]) {
      const { outcomes } = await run();
      expect(outcomes[0]).toMatchObject({ status: 'reconciled', duplicateRows: 1 });
      expect(await counted(7263, first)).toEqual([[first, 1, '1.50']]);
    }
  });

  it("a run whose verdict write a hit overtook counts the later day's figures without the copy all the same", async () => {
    const first = nextDay(TODAY, -10);
    const row = await listedTwice(7264, first, TODAY, {}, false);
    await arriveSpeltOtherwise(row, new Date(row.clickedAt.getTime() + 11 * 60_000));
    await engine().run(first, first, ['7264']);
    // Another complete of today, its postback here; its postback again lands between the run's read and its write.
    const other = await complete(7264, TODAY);
    const landed = postbackAfterRead(other);
    const { outcomes } = await engine().run(TODAY, TODAY, ['7264']);
    expect(landed()).toBe(true);
    expect(outcomes[0]).toMatchObject({ status: 'reconciled', duplicateRows: 1, awaiting: 1 });
    expect(await counted(7264, first)).toEqual([
      [first, 1, '1.50'],
      [TODAY, 1, '1.50'],
    ]);
  });

  it('the earlier day never reconciled here: the later day counts the copy (counted nowhere else)', async () => {
    const [first, second] = [nextDay(TODAY, -9), nextDay(TODAY, -4)];
    const row = await listedTwice(7262, first, second, {}, false);
    await arriveSpeltOtherwise(row, new Date(row.clickedAt.getTime() + 11 * 60_000));
    listed.length = 0;
    const { outcomes } = await engine().run(second, second, ['7262']);
    expect(outcomes[0]).toMatchObject({ status: 'reconciled', lookbacks: 0, duplicateRows: 0 });
    expect(listed).toHaveLength(1);
    expect(await counted(7262, first)).toEqual([[second, 1, '1.50']]);
  });

  it("the earlier day asked alone only when its summary names the token; its listing failing, the summary's word stands", async () => {
    const [first, second] = [nextDay(TODAY, -9), nextDay(TODAY, -4)];
    const row = await listedTwice(7259, first, second, {}, false);
    await arriveSpeltOtherwise(row, new Date(row.clickedAt.getTime() + 11 * 60_000));
    await engine().run(first, first, ['7259']);
    expect((await results.summariesOf('7259', [first]))[0]?.crossKeyed).toEqual({
      tokens: [row.token],
      count: 1,
    });
    // A complete of the second day nothing arrived for, listed on no other day.
    const missing = await complete(7259, second, { arrived: false });
    const firstAlone = `/7259?startDate=${first}&endDate=${first}`;
    failListingsFrom = first;
    try {
      listed.length = 0;
      const { outcomes } = await engine().run(second, second, ['7259']);
      expect(outcomes[0]).toMatchObject({ status: 'reconciled', openFailures: 1, duplicateRows: 1 });
      expect(listed.filter((url) => url.includes(firstAlone))).toHaveLength(1);
    } finally {
      failListingsFrom = undefined;
    }
    const item = async (t: SimTransaction) =>
      (await results.attemptsByKey('7259', [{ pid: t.pid, token: t.token }]))[0]?.reconciliation?.verdict;
    for (let run = 0; run < 2; run++) {
      expect(await counted(7259, first)).toEqual([
        [first, 1, '1.50'],
        [second, 1, '1.50'],
      ]);
      expect(await item(row)).toBeUndefined();
      expect(await item(missing)).toBe('complete_not_received');
      listed.length = 0;
      const { outcomes } = await engine().run(second, second, ['7259']);
      expect(outcomes[0]).toMatchObject({
        status: 'reconciled',
        openFailures: 0,
        duplicateRows: 1,
        lookbacks: 0,
      });
      // The copy is looked for each time its day is judged, once a run.
      expect(listed.filter((url) => url.includes(firstAlone))).toHaveLength(1);
    }
    // A survey whose earlier days' summaries name no such token asks the marketplace nothing more.
    await survey(7261);
    await complete(7261, first);
    await engine().run(first, first, ['7261']);
    await complete(7261, second, { arrived: false });
    for (let run = 0; run < 2; run++) {
      listed.length = 0;
      await engine().run(second, second, ['7261']);
      expect(listed).toHaveLength(1);
    }
    expect(await counted(7261, first)).toEqual([
      [first, 1, '1.50'],
      [second, 1, '1.50'],
    ]);
  });

  it("the earlier day's listing failing: the survey is reconciled, the copy still the earlier day's; asked again, not every run", async () => {
    const first = nextDay(TODAY, -5);
    const row = await listedTwice(7253, first, TODAY, {});
    // A survey beside it with the same days and no copy.
    await survey(7254);
    await complete(7254, first);
    await complete(7254, TODAY);
    // Four days on: the first day is past the window, read alone when due.
    for (let run = 0; run < 16; run++) {
      await hourly();
      clock += 6 * HOUR;
    }
    failListingsFrom = first;
    const failed = new Map<string, number>();
    // Failures kept apart from the survey's own (a day past the window failing), beyond the control's.
    const apart = new Map<string, number>();
    const askingFirst = () => listed.some((url) => url.includes(`/7253?startDate=${first}&endDate=${first}`));
    let runsAsking = 0;
    try {
      // A day: the day holding the copy is judged when its re-check is due, and asks the first day; flagged, the
      // next run asks again, and then the day is left to its re-checks.
      for (let run = 0; run < 26; run++) {
        listed.length = 0;
        const { outcomes } = await hourly();
        if (askingFirst()) runsAsking++;
        for (const { surveyId, status, openFailures } of outcomes) {
          if (status !== 'reconciled') failed.set(surveyId, (failed.get(surveyId) ?? 0) + 1);
          apart.set(surveyId, (apart.get(surveyId) ?? 0) + openFailures);
        }
        expect(await counted(7253, first)).toEqual([[first, 1, '1.50']]);
        clock += HOUR;
      }
    } finally {
      failListingsFrom = undefined;
    }
    expect(failed).toEqual(new Map());
    expect(apart.get('7253') ?? 0).toBeGreaterThan(apart.get('7254') ?? 0);
    expect(runsAsking).toBe(2);
    expect(await verdictOf(row)).toMatchObject({ verdict: 'matched', day: first });
    // The listing answering again, the day's next re-check asks and finds the copy.
    runsAsking = 0;
    for (let run = 0; run < 24; run++) {
      listed.length = 0;
      await hourly();
      if (askingFirst()) runsAsking++;
      expect(await counted(7253, first)).toEqual([[first, 1, '1.50']]);
      clock += HOUR;
    }
    expect(runsAsking).toBe(1);
  });

  it('the earlier day listed alone answering a passing "No data found": the copy still the earlier day\'s, not counted twice', async () => {
    const first = nextDay(TODAY, -5);
    await listedTwice(7916, first, TODAY, {});
    for (let run = 0; run < 16; run++) {
      await hourly();
      clock += 6 * HOUR;
    }
    expect(await counted(7916, first)).toEqual([[first, 1, '1.50']]);
    noDataFrom = first;
    try {
      for (let run = 0; run < 26; run++) {
        await hourly();
        expect(await counted(7916, first)).toEqual([[first, 1, '1.50']]);
        clock += HOUR;
      }
    } finally {
      noDataFrom = undefined;
    }
  });

  it("the earlier day's listing failing for a copy listed today: today is judged by every run, so no flag is left for it", async () => {
    const first = nextDay(TODAY, -8);
    await listedTwice(7256, first, TODAY, {});
    await engine().run(first, first, ['7256']);
    const flagged: string[] = [];
    const flagDay = results.flagDay;
    results.flagDay = (surveyId, day, at) => {
      flagged.push(`${surveyId} ${day}`);
      return flagDay(surveyId, day, at);
    };
    failListingsFrom = first;
    try {
      for (let run = 0; run < 3; run++) {
        const { outcomes } = await hourly();
        expect(outcomes[0]).toMatchObject({ status: 'reconciled', openFailures: 1 });
        expect(await counted(7256, first)).toEqual([[first, 1, '1.50']]);
        clock += HOUR;
      }
    } finally {
      failListingsFrom = undefined;
      results.flagDay = flagDay;
    }
    expect(flagged).toEqual([]);
  });

  it('the earlier copy unreadable, held back: the later day does not count the token meanwhile', async () => {
    const first = nextDay(TODAY, -5);
    const row = await listedTwice(7255, first, TODAY, {});
    await hourly();
    expect(await counted(7255, first)).toEqual([[first, 1, '1.50']]);
    row.cpi = 'abc';
    clock += HOUR;
    await hourly();
    expect(await counted(7255, first)).toEqual([[first, 1, '1.50']]);
    row.cpi = undefined;
    clock += HOUR;
    await hourly();
    expect(await counted(7255, first)).toEqual([[first, 1, '1.50']]);
    expect(await verdictOf(row)).toMatchObject({ verdict: 'matched', day: first });
  });

  it('days judged one by one, in either order, count it once, on the first day; the first copy gone, on the second', async () => {
    const [first, second] = [nextDay(TODAY, -5), nextDay(TODAY, -2)];
    await survey(7252);
    const row = await complete(7252, first, { arrived: false });
    const copy = { ...row, clickedAt: new Date(pacificDayRange(second).start.getTime() + 10 * HOUR) };
    marketplace.state.transactions.push(copy);
    // The postback after both clicks (either row could be its).
    await arrive(row, new Date(copy.clickedAt.getTime() + 11 * 60_000));
    // The later day first: nothing tells it of the other, so it takes the token, until the first day is judged.
    await engine().run(second, second, ['7252']);
    expect(await counted(7252, first)).toEqual([[second, 1, '1.50']]);
    await engine().run(first, first, ['7252']);
    expect(await counted(7252, first)).toEqual([[first, 1, '1.50']]);
    for (const day of [second, first, second]) {
      const { outcomes } = await engine().run(day, day, ['7252']);
      // The copy is among the rows listed, not among the transactions counted.
      expect(outcomes[0]).toMatchObject({
        status: 'reconciled',
        changes: { new: 0, changed: 0 },
        transactions: day === first ? 1 : 0,
        duplicateRows: day === first ? 0 : 1,
      });
      expect(await counted(7252, first)).toEqual([[first, 1, '1.50']]);
    }
    expect(await verdictOf(row)).toMatchObject({ verdict: 'matched', day: first });
    // The copy on the first day gone (the row re-filed on the second alone): the second day takes it (the first
    // day's empty listing taken at its word at once).
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(row), 1);
    await engine(24, { emptyConfirmMs: 0 }).run(first, first, ['7252']);
    await engine().run(second, second, ['7252']);
    expect(await counted(7252, first)).toEqual([[second, 1, '1.50']]);
    expect(await verdictOf(row)).toMatchObject({ verdict: 'matched', day: second });
    for (const day of [first, second]) {
      const { outcomes } = await engine().run(day, day, ['7252']);
      expect(outcomes[0]).toMatchObject({ status: 'reconciled', changes: { new: 0, changed: 0 } });
    }
  });
});

describe('attempts a flag did not reach', () => {
  it("a late postback whose flag was lost: today's run, reading it in its lead, tells yesterday to look again", async () => {
    await survey(7212);
    const yesterday = nextDay(TODAY, -1);
    const midnight = pacificDayRange(TODAY).start.getTime();
    const tuning = { settleMs: 10 * 60_000 };
    // A complete clicked in at 23:00 yesterday, not received here by 23:30: judged complete_not_received.
    clock = midnight - 30 * 60_000;
    const t = await complete(7212, yesterday, {
      arrived: false,
      clickedAt: new Date(midnight - HOUR),
      completedAt: new Date(midnight - 50 * 60_000),
    });
    await hourly(24, tuning);
    clock = midnight + 20 * 60_000;
    await hourly(24, tuning);
    expect((await results.summariesOf('7212', [yesterday]))[0]?.verdicts).toEqual({
      complete_not_received: 1,
    });
    // 00:40: its postback arrives, and the flag's write fails.
    clock = midnight + 40 * 60_000;
    const recorded = await withoutSummaryWrites(() => arrive(t, new Date(clock)));
    expect(recorded.unflaggedDays).toEqual([yesterday]);
    // 01:20: today's run reads it (first seen two hours before today at most) and flags yesterday.
    clock = midnight + 80 * 60_000;
    await hourly(24, tuning);
    expect(readWholeDay(yesterday)).toBe(false);
    expect((await results.summariesOf('7212', [yesterday]))[0]?.ledgerChangedAt).toBe(
      new Date(clock + 1).toISOString(),
    );
    // 02:20: yesterday is reconciled with the postback.
    clock += HOUR;
    await hourly(24, tuning);
    expect(readWholeDay(yesterday)).toBe(true);
    expect((await results.summariesOf('7212', [yesterday]))[0]?.verdicts).toEqual({ matched: 1 });
  });
});

describe('yesterday', () => {
  it('is read by the first run after it ended and settled, which judges what reached only this side in its last hour', async () => {
    await survey(7208);
    const yesterday = nextDay(TODAY, -1);
    const midnight = pacificDayRange(TODAY).start.getTime();
    const tuning = { settleMs: 10 * 60_000 };
    // 23:30 yesterday: the day is today, and reconciled.
    clock = midnight - 30 * 60_000;
    await complete(7208, yesterday, { clickedAt: new Date(midnight - 3 * HOUR) });
    await hourly(24, tuning);
    // 23:58: a postback for a transaction the marketplace does not list (a complete it has not paid for). The
    // marketplace's rows of the day do not change, nothing awaits judgement, and nothing judged changed.
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7208',
        outcome: 'success',
        pid: 'p-unlisted',
        token: 'steady-unlisted',
        source: 'query',
      },
      new Date(midnight - 2 * 60_000),
    );
    // 00:05: yesterday is no longer fresh and its last hour is still settling; it is read, the postback too recent.
    clock = midnight + 5 * 60_000;
    const early = await hourly(24, tuning);
    expect(readWholeDay(yesterday)).toBe(true);
    expect(early.outcomes[0]).toMatchObject({ awaiting: 1 });
    // 01:05: read again, judged; the run after leaves it alone.
    clock += HOUR;
    const final = await hourly(24, tuning);
    expect(readWholeDay(yesterday)).toBe(true);
    expect(final.outcomes[0]).toMatchObject({ awaiting: 0, summariesWritten: 1 });
    expect((await results.summariesOf('7208', [yesterday]))[0]?.verdicts).toEqual({
      matched: 1,
      complete_not_paid: 1,
    });
    clock += HOUR;
    const after = await hourly(24, tuning);
    expect(readWholeDay(yesterday)).toBe(false);
    expect(after.outcomes[0]).toMatchObject({ skippedDays: 6, summariesWritten: 0 });
  });

  it('is read after its end even when nothing in it awaits judgement', async () => {
    await survey(7209);
    const yesterday = nextDay(TODAY, -1);
    const midnight = pacificDayRange(TODAY).start.getTime();
    const tuning = { settleMs: 10 * 60_000 };
    clock = midnight - 30 * 60_000;
    await hourly(24, tuning);
    // 23:45: the postback of a complete the marketplace does not list, quiet by the time of the next run.
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7209',
        outcome: 'success',
        pid: 'p-unlisted-2',
        token: 'steady-unlisted-2',
        source: 'query',
      },
      new Date(midnight - 15 * 60_000),
    );
    // 00:20: the first run after yesterday ended and settled judges it.
    clock = midnight + 20 * 60_000;
    await hourly(24, tuning);
    expect(readWholeDay(yesterday)).toBe(true);
    expect((await results.summariesOf('7209', [yesterday]))[0]?.verdicts).toEqual({ complete_not_paid: 1 });
  });
});

describe('a run across midnight', () => {
  it('started before midnight and reaching the survey after it: the day it judged late and the new day are both right by the next run', async () => {
    await survey(7226);
    const yesterday = nextDay(TODAY, -1);
    const midnight = pacificDayRange(TODAY).start.getTime();
    const tuning = { settleMs: 10 * 60_000 };
    const postback = (pid: string, token: string, outcome: 'success' | 'fail', at: number) =>
      attempts.recordHit(
        { channel: 'postback', surveyId: '7226', outcome, pid, token, source: 'query' },
        new Date(at),
      );
    // Yesterday: a paid complete, and at 23:58 the postback of a complete the marketplace does not list.
    await complete(7226, yesterday, { clickedAt: new Date(midnight - 3 * HOUR) });
    await postback('p-midnight', 'steady-midnight', 'success', midnight - 2 * 60_000);
    // The run starts at 23:55 (its window ends yesterday, its fresh day); it reaches the survey at 00:20.
    clock = midnight - 5 * 60_000;
    const records = results.surveyRecords;
    const stored = results;
    results = {
      ...stored,
      surveyRecords: async (...args) => {
        clock = Math.max(clock, midnight + 20 * 60_000);
        return records(...args);
      },
    };
    let late: Awaited<ReturnType<typeof hourly>>;
    try {
      late = await hourly(24, tuning);
    } finally {
      results = stored;
    }
    expect(late.days.at(-1)).toBe(yesterday);
    expect(late.outcomes[0]).toMatchObject({ status: 'reconciled', awaiting: 0 });
    expect((await results.summariesOf('7226', [yesterday]))[0]?.verdicts).toEqual({
      matched: 1,
      complete_not_paid: 1,
    });
    // 00:30: a complete of today arrives; 00:40 the unlisted one of yesterday gets a second postback, a fail.
    const today = await complete(7226, TODAY, {
      arrived: false,
      clickedAt: new Date(midnight + 15 * 60_000),
    });
    await arrive(today, new Date(midnight + 30 * 60_000));
    await postback('p-midnight', 'steady-midnight', 'fail', midnight + 40 * 60_000);
    // 00:55: the next run's window ends today; yesterday is read again for the late postback it was told of.
    clock = midnight + 55 * 60_000;
    const next = await hourly(24, tuning);
    expect(next.days.at(-1)).toBe(TODAY);
    expect(readWholeDay(yesterday)).toBe(true);
    expect((await results.summariesOf('7226', [TODAY]))[0]?.verdicts).toEqual({ matched: 1 });
    await expectSameAsFullRecheck('7226');
  });
});

describe("finance's figures and their freshness", () => {
  it('a skipped day shows the figures a full re-check gives, checked when it last was; fresh days when the run started', async () => {
    await seededWeek(7205);
    await hourly();
    const firstCheck = new Date(clock).toISOString();
    const period = { from: WEEK[0] as string, to: TODAY };
    const report = finance({ attempts, results, now: () => new Date(clock) });
    const rowsAfterFirst = await report.summaryRows(period, ['7205']);

    clock += HOUR;
    const run = await hourly();
    const rows = await report.summaryRows(period, ['7205']);
    const figures = (r: (typeof rows)[number]) => ({ ...r, lastReconciledAt: undefined });
    expect(rows.map(figures)).toEqual(rowsAfterFirst.map(figures));
    const checked = Object.fromEntries(rows.map((r) => [r.day, r.lastReconciledAt]));
    // Today was checked by the run that just finished, without a write; yesterday and the settled days when the
    // first run checked them (after yesterday had ended).
    expect(checked[TODAY]).toBe(run.runId);
    expect(checked[nextDay(TODAY, -1)]).toBe(firstCheck);
    expect(checked[nextDay(TODAY, -2)]).toBe(firstCheck);
    expect((await results.finishedRun(SCHEDULED_RUN))?.startedAt).toBe(run.runId);

    // A run in which the survey fails confirms nothing for it.
    clock += HOUR;
    marketplace.apiFaults = { ...NO_API_FAULTS, serverError: 1 };
    try {
      const failed = await hourly();
      expect(failed.outcomes.find((o) => o.surveyId === '7205')?.status).toBe('failed');
    } finally {
      marketplace.apiFaults = { ...NO_API_FAULTS };
    }
    const afterFailure = await report.summaryRows(period, ['7205']);
    expect(afterFailure.find((r) => r.day === TODAY)?.lastReconciledAt).toBe(firstCheck);
    await expectSameAsFullRecheck('7205');
  });
});

/** A manual run re-checks every day in full: it must find nothing to change. */
async function expectSameAsFullRecheck(surveyId: string) {
  const full = await engine().run(WEEK[0] as string, TODAY, [surveyId]);
  expect(full.outcomes[0]).toMatchObject({
    status: 'reconciled',
    summariesWritten: 0,
    changes: { new: 0, changed: 0, refreshed: 0 },
  });
}

/**
 * A survey with a Pending complete on the week's first day (an open day two days on) and one of today.
 */
const withOpenDay = async (surveyId: number) => {
  await survey(surveyId);
  const open = WEEK[0] as string;
  const pending = await complete(surveyId, open, { verify: 'Pending' });
  await complete(surveyId, TODAY);
  await hourly();
  clock += 2 * 24 * HOUR;
  await hourly();
  return { open, pending, before: (await results.summariesOf(String(surveyId), [open]))[0]?.verdicts };
};

describe('listings answered "No data found" for days that had rows', () => {
  /** While set, a listing whose range it matches is answered "No data found" (HTTP 400). */
  let emptyRange: ((start: string, end: string) => boolean) | undefined;
  /** While set, a listing of more than one day is answered too large to read (declared 2 MB over a 1 MB cap). */
  let wideTooLarge = false;
  beforeEach(() => {
    emptyRange = undefined;
    wideTooLarge = false;
  });
  const faulty = () =>
    reconciler({
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        maxBodyBytes: 1_048_576,
        fetch: async (input, init) => {
          const url = new URL(String(input));
          const [start, end] = [url.searchParams.get('startDate'), url.searchParams.get('endDate')];
          if (start && end && wideTooLarge && start !== end)
            return new Response('{}', { status: 200, headers: { 'content-length': String(2 * 1_048_576) } });
          if (start && end && emptyRange?.(start, end))
            return new Response(
              JSON.stringify({ apiStatus: 'Failure', msg: `No data found for survey: ${url.pathname}` }),
              { status: 400 },
            );
          return fetch(input, init);
        },
      }),
      attempts,
      registry,
      results,
      now: () => new Date(clock),
      settledRecheckMs: 24 * HOUR,
    });
  const run = async () => {
    const report = await faulty().scheduled(7, { deadline: new Date(clock + HOUR) });
    if (!report?.complete) throw new Error('the run did not finish');
    return report;
  };

  it('a survey listed a day at a time, one day answered "No data found" once: held, not taken at its word', async () => {
    await seededWeek(7401);
    wideTooLarge = true;
    expect((await run()).outcomes[0]?.status).toBe('reconciled');
    expect((await results.surveyState('7401'))?.listedByDayAt).toEqual(expect.any(String));
    const day = WEEK[3] as string;
    const before = (await results.summariesOf('7401', [day]))[0]?.verdicts;
    expect(before).toEqual({ matched: 2 });
    // A passing "No data found" for that one day's call.
    clock += HOUR;
    emptyRange = (start, end) => start === day && end === day;
    const held = await run();
    expect((await results.summariesOf('7401', [day]))[0]?.verdicts).toEqual(before);
    expect(held.outcomes[0]?.status).toBe('failed');
  });

  it('two days emptied for good an hour apart: both confirmed within a few runs', async () => {
    await seededWeek(7913);
    wideTooLarge = true;
    expect((await run()).outcomes[0]?.status).toBe('reconciled');
    const [x, y] = [WEEK[2] as string, WEEK[4] as string];
    const drop = (day: string) => {
      const { start, end } = pacificDayRange(day);
      for (const t of marketplace.state.transactions.filter(
        (t) => t.surveyId === 7913 && t.clickedAt >= start && t.clickedAt < end,
      ))
        marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(t), 1);
    };
    clock += HOUR;
    drop(x);
    await run();
    clock += HOUR;
    drop(y);
    const errors: (string | undefined)[] = [];
    for (let h = 0; h < 5; h++) {
      const report = await run();
      errors.push(report.outcomes[0]?.error);
      clock += HOUR;
    }
    expect(errors.at(-1)).toBeUndefined();
    expect((await results.summariesOf('7913', [x]))[0]?.marketplace.transactions).toBe(0);
  });

  it('an empty window listing one run, then the first empty listing of an open day the next run: held too (each day its own first answer)', async () => {
    const { open, before } = await withOpenDay(7402);
    expect((await results.surveyState('7402'))?.openDays).toEqual([open]);
    expect(before).toEqual({ matched: 1 });
    // A day on (the open day's daily look due): the window's listing answered "No data found" once (held).
    clock += 24 * HOUR;
    const covers = (start: string, end: string) => start <= open && open <= end;
    emptyRange = (start, end) => !covers(start, end);
    expect((await run()).outcomes[0]?.status).toBe('failed');
    expect(Object.keys((await results.surveyState('7402'))?.emptyDays ?? {})).toEqual([TODAY]);
    // An hour on: the window lists again; the open day's listing answers "No data found" for the first time.
    clock += HOUR;
    emptyRange = covers;
    await run();
    expect((await results.summariesOf('7402', [open]))[0]?.verdicts).toEqual(before);
  });

  it('an open day whose daily look answers "No data found" for the first time is held', async () => {
    const { open, before } = await withOpenDay(7404);
    clock += 24 * HOUR + HOUR;
    emptyRange = (start, end) => start <= open && open <= end;
    await run();
    expect((await results.summariesOf('7404', [open]))[0]?.verdicts).toEqual(before);
    expect(Object.keys((await results.surveyState('7404'))?.emptyDays ?? {})).toEqual([open]);
  });
});

describe('an empty answer held, then confirmed', () => {
  const postbackOf = (surveyId: number, token: string, at: number) =>
    attempts.recordHit(
      {
        channel: 'postback',
        surveyId: String(surveyId),
        outcome: 'success',
        pid: `x-${token}`,
        token,
        source: 'query',
      },
      new Date(at),
    );
  for (const withLookback of [false, true])
    it(`an open day emptied for good is confirmed at its next daily look (window look-back in that run: ${withLookback})`, async () => {
      const id = withLookback ? 7911 : 7910;
      await survey(id);
      const open = WEEK[0] as string;
      const gone = await complete(id, open, { verify: 'Pending' });
      // A row two days before it: in the window's look-back range later, outside the open day's own listing.
      await complete(id, nextDay(open, -2));
      await hourly();
      clock += 2 * 24 * HOUR;
      await hourly();
      expect((await results.surveyState(String(id)))?.openDays).toEqual([open]);
      marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(gone), 1);
      clock += 25 * HOUR;
      await hourly();
      expect(Object.keys((await results.surveyState(String(id)))?.emptyDays ?? {})).toEqual([open]);
      // Three daily looks, each run with a fresh postback of a token not listed (yet): the window looks back for it.
      for (let d = 1; d <= (withLookback ? 3 : 1); d++) {
        clock += 24 * HOUR;
        if (withLookback) await postbackOf(id, `unlisted-${id}-${d}`, clock - 60_000);
        const report = await hourly();
        if (withLookback) expect(report.outcomes[0]?.lookbacks).toBeGreaterThanOrEqual(1);
      }
      // A day after its first empty answer, empty again: taken at its word.
      expect((await results.summariesOf(String(id), [open]))[0]?.marketplace.transactions).toBe(0);
      expect((await results.surveyState(String(id)))?.emptyDays).toBeUndefined();
    });
});

describe('an empty look-back', () => {
  it('the first empty answer for an open day, met by the window look-back: the day is held, the window is still judged', async () => {
    const id = 7912;
    const { open, pending: gone } = await withOpenDay(id);
    expect((await results.surveyState(String(id)))?.openDays).toEqual([open]);
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(gone), 1);
    clock += 25 * HOUR;
    // A complete of today, its postback here: the window's figures should move.
    const fresh = await complete(id, nextDay(TODAY, 3), { clickedAt: new Date(clock - 2 * HOUR) });
    // And a postback of a token not listed (yet): the window looks back for it (over the open day).
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: String(id),
        outcome: 'success',
        pid: 'x-unlisted',
        token: 'unlisted-7912',
        source: 'query',
      },
      new Date(clock - 60_000),
    );
    const report = await hourly();
    expect(report.outcomes[0]?.status).toBe('reconciled');
    expect(
      (await results.attemptsByKey(String(id), [{ pid: fresh.pid, token: fresh.token }]))[0]?.reconciliation
        ?.verdict,
    ).toBe('matched');
  });
});

describe('finance during a hold', () => {
  it('an open day held for its empty answer: finance names its figures as stale', async () => {
    const id = 7914;
    await survey(id);
    const open = WEEK[0] as string;
    const gone = await complete(id, open, { verify: 'Pending' });
    await hourly();
    clock += 2 * 24 * HOUR;
    await hourly();
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(gone), 1);
    clock += 25 * HOUR;
    const report = await hourly();
    expect(report.outcomes[0]?.openFailures).toBe(1);
    expect(Object.keys((await results.surveyState(String(id)))?.emptyDays ?? {})).toEqual([open]);
    const failing = await finance({ attempts, results, now: () => new Date(clock) }).failingReconciliations(
      { from: open, to: open },
      [String(id)],
    );
    expect(failing.map((f) => f.days)).toEqual([[open]]);
  });
});

describe('a day past the review horizon, emptied', () => {
  it('an operator re-checking an old day whose rows are gone for good: taken at its word (no stamp is kept past the horizon)', async () => {
    const id = 7915;
    await survey(id);
    const old = nextDay(TODAY, -70);
    const gone = await complete(id, old);
    expect((await engine().run(old, old, [String(id)])).outcomes[0]?.status).toBe('reconciled');
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(gone), 1);
    clock += HOUR;
    expect((await engine().run(old, old, [String(id)])).outcomes[0]?.status).toBe('reconciled');
    expect((await results.summariesOf(String(id), [old]))[0]?.marketplace.transactions).toBe(0);
    expect((await results.surveyState(String(id)))?.emptyDays).toBeUndefined();
  });
});
