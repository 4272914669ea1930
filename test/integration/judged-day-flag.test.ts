/**
 * A late hit flags the earlier day whose verdict it made stale (judged-day-flag.ts): on the live and the buffered
 * path, never for a repeat or for today, never lost to the summary's own rewrite nor for want of a summary.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeEach, describe, expect, it } from 'vitest';
import { staleDays } from '../../functions/ledger/judged-day-flag';
import { summaryKey } from '../../functions/ledger/ledger-schema';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  type LedgerStore,
  type ReconciliationStore,
} from '../../functions/ledger/ledger-store';
import type { Attempt } from '../../functions/receiving/attempt';
import type { Hit } from '../../functions/receiving/hit-request';
import type { DaySummary } from '../../functions/reconciliation/verdict-rules';
import { freshTable } from '../support/ledger';

const SURVEY = '8801';
/** Pacific 2026-11-20 is long over by the hits below (2026-11-23 UTC). */
const JUDGED_DAY = '2026-11-20';
const LATE = new Date('2026-11-23T18:00:00.000Z');

let documents: ReturnType<typeof createDocumentClient>;
let table: string;
let ledger: LedgerStore;
let results: ReconciliationStore;
/** The store's clock: when the ledger changes. */
let recordedAt: Date;
/** While set, writes to day summaries fail below the SDK's retries (the store is unavailable for them). */
let summaryWritesFail = false;

beforeEach(async () => {
  const { endpoint, tableName } = await freshTable();
  table = tableName;
  documents = createDocumentClient({ endpoint });
  documents.middlewareStack.add(
    (next, context) => async (args) => {
      const key = (args.input as { Key?: { pk?: string } }).Key;
      if (summaryWritesFail && context.commandName === 'UpdateItemCommand' && key?.pk?.startsWith('SUMMARY#'))
        throw Object.assign(new Error('injected: the store is unavailable'), { name: 'InternalServerError' });
      return next(args);
    },
    { step: 'initialize', name: 'summaryFaults' },
  );
  recordedAt = LATE;
  ledger = createLedgerStore(documents, tableName, () => recordedAt);
  results = createReconciliationStore(documents, tableName);
});

const hit = (
  token: string,
  channel: Hit['channel'] = 'postback',
  outcome: Hit['outcome'] = 'success',
): Hit => ({
  channel,
  surveyId: SURVEY,
  outcome,
  pid: `p-${token}`,
  token,
  source: 'query',
});

const summary = (day: string, extra: Partial<DaySummary> = {}): DaySummary => ({
  surveyId: SURVEY,
  day,
  here: { attempts: 1, postbackCompletes: 0, redirectOnlyCompletes: 0, nonCompletes: 0 },
  marketplace: {
    transactions: 1,
    byStatus: { Completed: 1 },
    completes: 1,
    validCompletes: 1,
    pendingCompletes: 0,
    invalidCompletes: 0,
    owed: '1.50',
    pending: '0.00',
  },
  verdicts: { complete_not_received: 1 },
  ...extra,
});

/** An attempt judged `complete_not_received` on `day` (its redirect only reached here), and the day's summary. */
async function judged(token: string, day = JUDGED_DAY, withSummary = true) {
  // Recorded live, when it was made (one recorded days later is a drained hit, which flags the day it was made).
  const later = recordedAt;
  recordedAt = new Date(`${day}T20:00:00.000Z`);
  const { attempt } = await ledger.recordHit(hit(token, 'redirect'), recordedAt);
  recordedAt = later;
  await results.recordVerdict(
    {
      surveyId: SURVEY,
      pid: attempt.pid,
      token,
      attempt,
      verdict: { kind: 'complete_not_received', day, detail: { postback: 'none', redirect: 'success' } },
    },
    new Date(`${day}T21:00:00.000Z`),
  );
  if (withSummary) await results.putDaySummary(summary(day), new Date(`${day}T21:00:00.000Z`), 'run-1');
}

/** The day's item as stored, whatever it holds. */
const dayItem = async (day = JUDGED_DAY) =>
  (
    await documents.send(
      new GetCommand({ TableName: table, Key: summaryKey(SURVEY, day), ConsistentRead: true }),
    )
  ).Item;
const flagAlone = (at: Date, day = JUDGED_DAY) => ({
  ...summaryKey(SURVEY, day),
  kind: 'day-flag',
  ledgerChangedAt: at.toISOString(),
});

const flagOf = async (day = JUDGED_DAY) =>
  (await results.summariesOf(SURVEY, [day]))[0]?.ledgerChangedAt ?? 'unflagged';

describe('a late hit on the live path', () => {
  it('flags the day of the verdict it made stale, with the time it was recorded', async () => {
    await judged('late-1');
    // Recorded a little after the request came in (the signature check, the store's retries).
    recordedAt = new Date(LATE.getTime() + 1500);
    const recorded = await ledger.recordHit(hit('late-1'), LATE);
    expect(recorded).toMatchObject({ effect: 'recorded' });
    expect(recorded.unflaggedDays).toBeUndefined();
    expect(await flagOf()).toBe(recordedAt.toISOString());
  });

  it('does not flag for a repeat, which changes nothing judged', async () => {
    await judged('late-2');
    await ledger.recordHit(hit('late-2', 'redirect'), LATE);
    expect(await flagOf()).toBe('unflagged');
  });

  it('never flags for an attempt it creates, even in the last hour of a Pacific day', async () => {
    // 23:30 PST on 2026-11-22, a day whose summary exists.
    const at = new Date('2026-11-23T07:30:00.000Z');
    recordedAt = at;
    await results.putDaySummary(summary('2026-11-22'), new Date('2026-11-23T07:00:00.000Z'), 'run-1');
    await ledger.recordHit(hit('first-1'), at);
    recordedAt = new Date(at.getTime() + 60_000);
    await ledger.recordHit(hit('first-1', 'redirect'), recordedAt);
    expect(await flagOf('2026-11-22')).toBe('unflagged');
  });

  it('on a day without a summary leaves the flag alone, which no reader takes for one and its first summary keeps', async () => {
    // A run writes a day's verdicts before its first summary: the hit comes in between.
    await judged('late-3', JUDGED_DAY, false);
    await ledger.recordHit(hit('late-3'), LATE);
    expect(await dayItem()).toEqual(flagAlone(LATE));
    expect(await results.summariesOf(SURVEY, [JUDGED_DAY])).toEqual([]);
    expect((await results.surveyRecords(SURVEY, [JUDGED_DAY])).summaries).toEqual([]);
    expect(await results.daySummaries(JUDGED_DAY)).toEqual([]);
    // The run's summary, checked when the run began (before the hit): the flag stands newer than the check.
    await results.putDaySummary(summary(JUDGED_DAY), new Date(LATE.getTime() - 60_000), 'run-1');
    const [stored] = await results.summariesOf(SURVEY, [JUDGED_DAY]);
    expect(stored).toMatchObject({ ledgerChangedAt: LATE.toISOString(), runId: 'run-1' });
    expect(await results.daySummaries(JUDGED_DAY)).toHaveLength(1);
  });

  it('on a day without a summary never moves a flag back either', async () => {
    await judged('late-3b', JUDGED_DAY, false);
    await ledger.recordHit(hit('late-3b'), LATE);
    await results.flagDay(SURVEY, JUDGED_DAY, new Date(LATE.getTime() - 1));
    await results.recordSummaryCheck(SURVEY, JUDGED_DAY, new Date(LATE.getTime() + 1));
    // Nor is a check recorded on it: a check is of figures, and there are none.
    expect(await dayItem()).toEqual(flagAlone(LATE));
  });

  it('never moves the flag back', async () => {
    await judged('late-4');
    await judged('late-5');
    await ledger.recordHit(hit('late-4'), LATE);
    recordedAt = new Date(LATE.getTime() - 60_000);
    await ledger.recordHit(hit('late-5'), recordedAt);
    expect(await flagOf()).toBe(LATE.toISOString());
  });

  it('a failed flag leaves the hit standing and says which day it could not flag', async () => {
    await judged('late-6');
    summaryWritesFail = true;
    try {
      const recorded = await ledger.recordHit(hit('late-6'), LATE);
      expect(recorded.attempt.postback?.outcome).toBe('success');
      expect(recorded.unflaggedDays).toEqual([JUDGED_DAY]);
    } finally {
      summaryWritesFail = false;
    }
    expect(await flagOf()).toBe('unflagged');
  });
});

describe("the survey's flagged days", () => {
  it('lists every flagged day, and a run takes each off on its own: one flagged again since keeps its flag', async () => {
    const days = ['2026-11-10', '2026-11-11', '2026-11-12'];
    for (const day of days) await results.flagDay(SURVEY, day, new Date('2026-11-23T10:00:00.000Z'));
    const { flags } = await results.surveyRecords(SURVEY, []);
    expect([...(flags ?? new Map()).keys()].sort()).toEqual(days);
    // Between the run's read and its clearing, a hit flags the middle day again.
    await results.flagDay(SURVEY, '2026-11-11', new Date('2026-11-23T10:30:00.000Z'));
    await results.clearDayFlags(
      SURVEY,
      [...(flags ?? new Map())].map(([day, at]) => ({ day, at })),
    );
    const after = (await results.surveyRecords(SURVEY, [])).flags;
    expect(Object.fromEntries(after ?? new Map())).toEqual({ '2026-11-11': '2026-11-23T10:30:00.000Z' });
  });
});

describe('a late hit drained from the buffer', () => {
  it('flags with the time it is recorded, not the time it was made', async () => {
    await judged('buffered-1');
    const made = new Date('2026-11-21T10:00:00.000Z');
    expect(await ledger.recordBufferedHit(hit('buffered-1'), made, 'buffer-1')).toBe(true);
    expect(await flagOf()).toBe(LATE.toISOString());
  });

  it('of an attempt no run has judged flags the day it was first seen, which a run may have checked without it', async () => {
    await results.putDaySummary(summary(JUDGED_DAY), new Date(`${JUDGED_DAY}T21:00:00.000Z`), 'run-1');
    // Made at noon Pacific on that day, drained days later: the attempt is new.
    const made = new Date(`${JUDGED_DAY}T20:00:00.000Z`);
    expect(await ledger.recordBufferedHit(hit('buffered-new'), made, 'buffer-new')).toBe(true);
    expect(await flagOf()).toBe(LATE.toISOString());
  });

  it('a failed flag fails the delivery, and the redelivery, a repeat, flags', async () => {
    await judged('buffered-2');
    summaryWritesFail = true;
    try {
      await expect(ledger.recordBufferedHit(hit('buffered-2'), LATE, 'buffer-2')).rejects.toThrow();
    } finally {
      summaryWritesFail = false;
    }
    expect(await flagOf()).toBe('unflagged');
    recordedAt = new Date(LATE.getTime() + 60_000);
    expect(await ledger.recordBufferedHit(hit('buffered-2'), LATE, 'buffer-2')).toBe(false);
    expect(await flagOf()).toBe(recordedAt.toISOString());
    const [attempt] = await ledger.attemptsOf(SURVEY, 'p-buffered-2');
    expect(attempt?.postback?.sightings).toMatchObject([{ outcome: 'success', hits: 1 }]);
  });
});

describe('the summary rewrite', () => {
  it('keeps a flag set while the run read the day, and drops figures the new ones lack', async () => {
    await judged('race-1', JUDGED_DAY, false);
    await results.putDaySummary(
      summary(JUDGED_DAY, { awaiting: 2 }),
      new Date('2026-11-23T10:00:00Z'),
      'run-1',
    );
    expect((await results.summariesOf(SURVEY, [JUDGED_DAY]))[0]?.awaiting).toBe(2);
    await ledger.recordHit(hit('race-1'), LATE);
    // A run that started before the hit writes its figures after it.
    await results.putDaySummary(summary(JUDGED_DAY), new Date(LATE.getTime() - 60_000), 'run-2');
    const [stored] = await results.summariesOf(SURVEY, [JUDGED_DAY]);
    expect(stored).toMatchObject({ ledgerChangedAt: LATE.toISOString(), runId: 'run-2' });
    expect(stored?.awaiting).toBeUndefined();
    expect(stored?.ledgerChangedAt && stored.ledgerChangedAt > stored.checkedAt).toBe(true);
  });
});

describe('which days a hit made stale', () => {
  const attempt = (day?: string, firstSeenAt?: string) =>
    ({
      surveyId: SURVEY,
      pid: 'p',
      token: 't',
      ...(firstSeenAt ? { firstSeenAt } : {}),
      ...(day ? { reconciliation: { verdict: 'matched', day } } : {}),
    }) as unknown as Attempt;
  const now = new Date('2026-11-23T09:00:00Z'); // 01:00 PST on the 23rd

  it('the earlier day whose verdict a changing hit met', () => {
    expect(staleDays(attempt('2026-11-22'), 'recorded', now)).toEqual(['2026-11-22']);
    expect(staleDays(attempt('2026-11-22'), 'conflict', now)).toEqual(['2026-11-22']);
  });

  it('not for a repeat, nor for today', () => {
    expect(staleDays(attempt('2026-11-22'), 'duplicate', now)).toEqual([]);
    expect(staleDays(attempt('2026-11-23'), 'recorded', now)).toEqual([]);
  });

  it('without a verdict: the day first seen, once that is over an hour ago and before today', () => {
    // Noon PST on the 21st: the UTC dates 7 and 8 hours earlier are both the 21st.
    expect(staleDays(attempt(undefined, '2026-11-21T20:00:00Z'), 'recorded', now)).toEqual(['2026-11-21']);
    // 23:30 PST on the 22nd: the 22nd, and by the daylight-saving bound the 23rd, which is today.
    expect(staleDays(attempt(undefined, '2026-11-23T07:30:00Z'), 'recorded', now)).toEqual(['2026-11-22']);
    // Half an hour ago: no run has judged it yet.
    expect(staleDays(attempt(undefined, '2026-11-23T08:30:00Z'), 'recorded', now)).toEqual([]);
    expect(staleDays(attempt(), 'recorded', now)).toEqual([]);
  });

  it('yesterday as soon as the Pacific day turned, in standard and in daylight-saving time', () => {
    // 00:01 PST (UTC-8) and 00:01 PDT (UTC-7): yesterday's verdict is stale from the first minute.
    expect(staleDays(attempt('2026-11-22'), 'recorded', new Date('2026-11-23T08:01:00Z'))).toEqual([
      '2026-11-22',
    ]);
    expect(staleDays(attempt('2026-06-09'), 'recorded', new Date('2026-06-10T07:01:00Z'))).toEqual([
      '2026-06-09',
    ]);
    // 23:59 PDT: still today.
    expect(staleDays(attempt('2026-06-09'), 'recorded', new Date('2026-06-10T06:59:00Z'))).toEqual([]);
  });
});

describe('a verdict written over an attempt the run did not read as it is', () => {
  const verdictFor = (token: string) => ({
    surveyId: SURVEY,
    pid: `p-${token}`,
    token,
    verdict: { kind: 'complete_not_received' as const, day: JUDGED_DAY, detail: { postback: 'none' } },
  });

  it('is stale when a hit came during the run: not written, and its day flagged', async () => {
    await results.putDaySummary(summary(JUDGED_DAY), new Date(`${JUDGED_DAY}T21:00:00.000Z`), 'run-1');
    const runAt = new Date('2026-11-23T12:00:00.000Z');
    // The run read no attempt for this transaction; a hit makes one a moment later.
    await ledger.recordHit(hit('overtaken'), new Date(runAt.getTime() + 2_000));
    expect(await results.recordVerdict(verdictFor('overtaken'), runAt)).toBe('stale');
    const [attempt] = await ledger.attemptsOf(SURVEY, 'p-overtaken');
    expect(attempt?.reconciliation).toBeUndefined();
    expect(await flagOf()).toBe(new Date(runAt.getTime() + 1).toISOString());
  });

  it('is stale too when the hit is older than the run: an attempt the run did not read is not judged as an item', async () => {
    await results.putDaySummary(summary(JUDGED_DAY), new Date(`${JUDGED_DAY}T21:00:00.000Z`), 'run-1');
    await ledger.recordHit(hit('older'), new Date(`${JUDGED_DAY}T20:00:00.000Z`));
    const runAt = new Date('2026-11-23T12:00:00.000Z');
    // (The hit, recorded days after it was made, flagged its day itself.)
    expect(await flagOf()).toBe(LATE.toISOString());
    // Not counted by the run (a reading that missed the attempt judged it as if nothing had arrived).
    expect(await results.recordVerdict(verdictFor('older'), runAt)).toBe('stale');
    const [attempt] = await ledger.attemptsOf(SURVEY, 'p-older');
    expect(attempt?.reconciliation).toBeUndefined();
    // Still flagged for the next run, never moved back.
    expect(await flagOf()).toBe(
      [LATE.toISOString(), new Date(runAt.getTime() + 1).toISOString()].sort().at(-1),
    );
  });
});
