/**
 * Runs reconciliation: for each survey and window, fetch the marketplace's transactions and the ledger's
 * attempts, classify (verdict-rules.ts), and write verdicts and day summaries. One survey's window is held in
 * memory at a time; a survey the marketplace answers with an error is marked failed and retried later, never
 * counted as zero transactions, and never stops the others. A long run records how far it got so the next
 * invocation resumes there.
 *
 * Over 300 lines on purpose: a run's checkpoint, resumption and per-survey state move together; the pure rules
 * are in verdict-rules.ts already.
 */

import { StoreUnavailable } from '../ledger/document-client';
import type {
  LedgerStore,
  OutsiderKey,
  ReconciliationStore,
  RunState,
  SurveyReconciliationState,
  SurveyRegistration,
  SurveyRegistry,
  VerdictChange,
} from '../ledger/ledger-store';
import {
  MARKETPLACE_DOWN_SURVEYS,
  type MalformedRow,
  type MarketplaceClient,
  MarketplaceError,
  marketplaceDown,
  type Rows,
} from '../marketplace/marketplace-client';
import {
  distinctTransactions,
  filedAt,
  filedDay,
  type Placement,
  type Transaction,
} from '../marketplace/marketplace-records';
import { pacificDay, pacificDayRange } from '../marketplace/pacific-time';
import type { Attempt } from '../receiving/attempt';
import { runBounded, throwIfFailed, valuesOrThrow } from '../shared/bounded-work';
import { onCreationDay, placedByCreationDay } from './creation-days';
import {
  checkRegardless,
  DEFAULT_FRESH_DAYS,
  DEFAULT_SETTLED_RECHECK_HOURS,
  editionAfter,
  editionOf,
  freshDaysOf,
  lastCheckedAt,
  REVIEW_HORIZON_DAYS,
  type RecheckPlan,
  rejudgeDue,
  SCHEDULED_RUN,
  sameFigures,
  transactionsChanged,
} from './recheck-policy';
import { servedHere } from './serving-time';
import { verdictUnchanged } from './verdict-equality';
import { isMoneyKind, type VerdictKind } from './verdict-kinds';
import {
  type AttemptVerdict,
  type Awaiting,
  arrivedHere,
  attemptKeysToRead,
  attemptRange,
  type DaySummary,
  DEFAULT_LOOKBACK_DAYS,
  fetchRange,
  filedOn,
  impliedDay,
  lookbackRange,
  needsLookback,
  nextDay,
  pacificDays,
  pidPairedBesideWindow,
  reconcileSurveyWindow,
  type SurveyWindow,
  summarize,
  unheardReversals,
} from './verdict-rules';

export { REVIEW_HORIZON_DAYS, SCHEDULED_RUN } from './recheck-policy';

/** A complete not paid the marketplace lists no row for: a signed postback of a token it does not know. */
const chasedWithoutRow = (entry: AttemptVerdict) =>
  entry.verdict.kind === 'complete_not_paid' && entry.verdict.detail.marketplaceStatus === 'missing';

export interface ReconcilerDeps {
  readonly marketplace: MarketplaceClient;
  readonly attempts: LedgerStore;
  readonly registry: SurveyRegistry;
  readonly results: ReconciliationStore;
  readonly now?: () => Date;
  /** Surveys reconciled at once. */
  readonly concurrency?: number;
  /** Verdict writes in flight at once within a survey. */
  readonly writeConcurrency?: number;
  readonly onSurvey?: (outcome: SurveyOutcome, done: number, total: number) => void;
  /** How long a discrepancy must have been quiet before it is judged (the other side may still catch up). */
  readonly settleMs?: number;
  /**
   * How long after a listing first answered no rows for days it had listed rows for an empty answer is taken at its
   * word (default `EMPTY_CONFIRM_MS`; 0: at once).
   */
  readonly emptyConfirmMs?: number;
  /**
   * Leave the agreements of non-completes that tell them again by themselves without a verdict (the
   * `matchedVerdicts` setting `implied`; verdict-rules.ts `impliedMatch`): a write unit each less. Off, every
   * verdict is written.
   */
  readonly impliedMatches?: boolean;
  /**
   * How many Pacific days before a window's attempts their transactions are looked for, in one date-range call
   * per survey window (default 7; 0 turns the look-back off).
   */
  readonly lookbackDays?: number;
  /**
   * Scheduled runs: how many of the newest Pacific days are reconciled every run (default 1, today; yesterday is
   * reconciled until a run has checked it after its end and `settleMs`, then when something changes it).
   */
  readonly freshDays?: number;
  /**
   * Scheduled runs: an older day whose transactions did not change is reconciled again once it has not been
   * checked for this long (default 24 hours). Manual runs always reconcile every day they are given.
   */
  readonly settledRecheckMs?: number;
  /**
   * Scheduled runs: the whole window's transactions are listed by the first run of every this many hours (UTC,
   * default 1: every run); the runs between list only the days they check regardless (today, failed, flagged, due
   * days...). A supplier whose surveys list tens of thousands of rows a day raises it: a settled day's change at the
   * marketplace (a reversal, a review) then reaches its figures within that many hours instead of one.
   */
  readonly windowListHours?: number;
  /** Least time between two saves of a run's cursor while it runs (default 10 s; the end is always saved). */
  readonly progressEveryMs?: number;
  /**
   * How far behind the table `attempts.attemptsOfSurvey` reads in the normal course (the attempt feed's lag,
   * feed-attempts.ts; default 0, the items): a discrepancy settles that much later.
   */
  readonly attemptsLagMs?: number;
  /**
   * As of when the attempts read at `at` are taken to be complete (default `attemptsLagMs` back; the attempt feed's
   * tolerated lag or its probe, feed-attempts.ts `asOf`): a survey's days are recorded as checked then, a late hit's
   * flag set since stays (so its day is judged again by a run that reads it), and a verdict whose attempt a hit
   * changed after then is left for the next run.
   */
  readonly attemptsAsOf?: (at: Date) => Promise<Date>;
  /** The order a run takes its surveys in (the attempt feed's: bucket by bucket); default as listed or named. */
  readonly readOrder?: (surveys: readonly string[]) => string[];
}

/**
 * A day past the window with no complete awaiting review can still change: the buyer adjusts a Valid complete to
 * Invalid, or a termination to a complete, after the fact. Such days are listed again this often (the marketplace's
 * rows only; the ledger is read when their fingerprint changed) until the review horizon, so a late reversal
 * reaches what is owed within a week.
 */
export const REVIEWED_RECHECK_DAYS = 7;
const REVIEWED_RECHECK_MS = REVIEWED_RECHECK_DAYS * 86_400_000;
/** Days past the window are listed this many at a time at most, so one call never spans the whole horizon. */
const PAST_DAYS_PER_CALL = 7;
/** Days past the window judged again per run after a change of the rules' edition: one listing's worth. */
const REJUDGE_DAYS_PER_RUN = PAST_DAYS_PER_CALL;

export interface SurveyOutcome {
  readonly surveyId: string;
  readonly status: 'reconciled' | 'failed' | 'deferred';
  readonly days: readonly string[];
  readonly error?: string;
  /** A failed survey's: since when its runs have failed (this one's time if the last run did not). */
  readonly failingSince?: string;
  readonly transactions: number;
  readonly attempts: number;
  readonly malformedRows: number;
  /** Rows the marketplace listed more than once (same token), counted once. */
  readonly duplicateRows: number;
  /** Rows that ended outside the time the survey was this stack's, nothing here heard of: neither judged nor counted. */
  readonly elsewhereRows?: number;
  readonly undated: number;
  /** Discrepancies too recent to judge this run. */
  readonly awaiting: number;
  /** Attempts of the window's transactions first seen outside it, found by their key. */
  readonly readByKey: number;
  /** Look-back calls made (at most one per contiguous window). */
  readonly lookbacks: number;
  /**
   * Calls listing one day alone: to place rows without a click or start time (`creation-days.ts`), or because the
   * whole window's answer was larger than the client reads.
   */
  readonly dayListings: number;
  /** Attempts whose transaction was clicked in before the window, left to that day's run. */
  readonly earlier: number;
  /**
   * Items created for a transaction by an earlier run, retired now that the attempt behind it is found (it
   * arrived under another spelling of the pid).
   */
  readonly superseded: number;
  /** Items created for a transaction the marketplace lists no more, retired. */
  readonly withdrawn: number;
  /** Stored verdicts cleared: their attempt is now judged with another of the same respondent. */
  readonly collapsed: number;
  /**
   * Windows of days past the window (open or reviewed days) that could not be reconciled, and earlier days of a
   * token listed twice that could not be listed (`listedOnEarlierDays`): read again next time.
   */
  readonly openFailures: number;
  readonly openError?: string;
  /** Failed because the marketplace did not answer, after its client's retries (a time-out, a 5xx, a 429). */
  readonly marketplaceUnavailable?: boolean;
  /** The marketplace answered a listing of this survey's (a survey ended before the window may ask for none). */
  readonly marketplaceAnswered?: boolean;
  /**
   * Left (`deferred`) because the marketplace asked for no calls until then (epoch ms): a Retry-After longer than
   * the run's client waits. The run takes up no more surveys; its invocation may wait it out and resume.
   */
  readonly heldOffUntil?: number;
  /**
   * Failed only because a listing answered no rows for days that had rows (`EMPTY_CONFIRM_MS`): held, confirmed or
   * not within the hour, so counted apart from the failed surveys the alarm counts (`held` in the run's totals).
   */
  readonly held?: boolean;
  /** Settled days left alone: their transactions unchanged and checked recently (scheduled runs only). */
  readonly skippedDays: number;
  /** Day summaries written because their figures changed. */
  readonly summariesWritten: number;
  readonly verdicts: Partial<Record<VerdictKind, number>>;
  /** Verdicts written for the first time, changed (history grew), or refreshed with newer marketplace facts. */
  readonly changes: Readonly<Record<Exclude<VerdictChange, 'unchanged' | 'stale'>, number>>;
  /** The first few verdicts that changed, to show what moved. */
  readonly changed: readonly { token: string; from: string; to: string }[];
}

export interface RunReport {
  readonly runId: string;
  readonly days: readonly string[];
  readonly outcomes: readonly SurveyOutcome[];
  /** False when the run stopped at its deadline; the next invocation resumes it. */
  readonly complete: boolean;
  /**
   * Stopped early because the marketplace did not answer for MARKETPLACE_DOWN_SURVEYS surveys in a row: the
   * surveys after them are left for the next scheduled invocation (not resumed at once), which tries again.
   */
  readonly marketplaceUnavailable?: boolean;
  /**
   * Stopped early because the marketplace asked for no calls until then (a Retry-After longer than the run's client
   * waits): the surveys from the first it refused are left, none of them recorded failed.
   */
  readonly marketplaceRefusedUntil?: string;
}

export interface ReconcileRunOptions {
  readonly deadline?: Date;
  readonly runId?: string;
}

/** An attempt's key within its survey as one string (pid and token), for sets and maps. */
const keyOf = (pid: string, token: string) => JSON.stringify([pid, token]);

/** How many invocations may die with the cursor at one survey before the run passes over it. */
export const DEATHS_BEFORE_PASSING_OVER = 2;
/**
 * How long a survey's listings of several days are made a day at a time after one was too large to read: a week,
 * then the whole range is tried again (a survey whose traffic fell back is listed in one call again).
 */
export const LISTED_BY_DAY_MS = 7 * 86_400_000;
/**
 * How long after a listing first answered no rows for days it had listed rows for a second empty answer is taken at
 * its word: the marketplace answers "No data found" for an empty list, and now and then, for minutes, for a full
 * one; read as zero at once, every complete of those days would show reversed until the rows came back. The next
 * hourly run confirms a genuine emptying.
 */
export const EMPTY_CONFIRM_MS = 45 * 60_000;

/** A listing answered no rows for days that had rows, held until a later one confirms it (`confirmEmpty`). */
class EmptyListingHeld extends Error {}

/** Whether two sets of pending first empty answers hold the same days and times, in whatever key order. */
const sameStamps = (
  a: Readonly<Record<string, string>> = {},
  b: Readonly<Record<string, string>> = {},
): boolean =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([day, at]) => b[day] === at);

/** A listing with no rows at all, readable or not: what the marketplace's "No data found" reads as. */
const isEmpty = (listed: Rows<unknown>): boolean => listed.rows.length === 0 && listed.malformed.length === 0;

/** Since when a survey's runs have failed, as of a failure at `at`: kept from its state if its last run failed too. */
const failingSinceOf = (state: SurveyReconciliationState | undefined, at: Date): string =>
  state?.lastError !== undefined
    ? (state.failingSince ?? state.lastErrorAt ?? at.toISOString())
    : at.toISOString();

/**
 * The state of a survey whose reconciliation failed at `at`: the days to read again, the error and since when, and
 * what it was waiting for (its days past the window) kept from the state before.
 */
const failedSurveyState = (
  surveyId: string,
  state: SurveyReconciliationState | undefined,
  failedDays: readonly string[],
  error: string,
  at: Date,
): SurveyReconciliationState => ({
  surveyId,
  ...(state?.lastReconciledAt ? { lastReconciledAt: state.lastReconciledAt } : {}),
  // Kept: the days past the window waiting for review are retried with the rest.
  ...(state?.openDays ? { openDays: state.openDays, openCheckedAt: state.openCheckedAt } : {}),
  ...(state?.reviewedDays
    ? {
        reviewedDays: state.reviewedDays,
        reviewedCheckedAt: state.reviewedCheckedAt,
        ...(state.reviewedFinalDay ? { reviewedFinalDay: state.reviewedFinalDay } : {}),
      }
    : {}),
  // Kept: the edition of the rules its days stand judged by, and a listing too large to read.
  ...editionOf(state),
  ...(state?.listedByDayAt ? { listedByDayAt: state.listedByDayAt } : {}),
  failedDays: [...failedDays],
  lastError: error,
  lastErrorAt: at.toISOString(),
  failingSince: failingSinceOf(state, at),
});

/** A run's report of a Retry-After that stopped it, as an ISO time. */
const refusedUntil = (heldOffUntil: number | undefined) =>
  heldOffUntil !== undefined ? { marketplaceRefusedUntil: new Date(heldOffUntil).toISOString() } : {};

const emptyOutcome = (
  surveyId: string,
  days: readonly string[],
  status: SurveyOutcome['status'],
  error?: string,
  failingSince?: string,
): SurveyOutcome => ({
  surveyId,
  status,
  days,
  ...(error ? { error } : {}),
  ...(failingSince ? { failingSince } : {}),
  transactions: 0,
  attempts: 0,
  malformedRows: 0,
  duplicateRows: 0,
  undated: 0,
  awaiting: 0,
  readByKey: 0,
  lookbacks: 0,
  dayListings: 0,
  earlier: 0,
  superseded: 0,
  withdrawn: 0,
  collapsed: 0,
  openFailures: 0,
  skippedDays: 0,
  summariesWritten: 0,
  verdicts: {},
  changes: { new: 0, changed: 0, refreshed: 0 },
  changed: [],
});

export function reconciler(deps: ReconcilerDeps) {
  const now = deps.now ?? (() => new Date());

  /**
   * Records a survey that failed outside its own reconciliation (its records unreadable, its invocations dying on
   * it) as any failed survey's is: its days to read again, the error, and since when, so that finance names it among
   * the surveys whose figures are stale and it counts as failing long. Its state read apart (the read that failed
   * may have been it: then nothing is written, the write being only onto the state as read). Since when it fails.
   */
  async function recordSurveyFailure(surveyId: string, days: readonly string[], error: string) {
    const at = now();
    const state = await deps.results.surveyState(surveyId).catch(() => undefined);
    const failed = failedSurveyState(
      surveyId,
      state,
      // Bounded as any failed survey's are: days before the review horizon are not read again.
      [...new Set([...(state?.failedDays ?? []), ...days])]
        .filter((day) => day >= nextDay(pacificDay(at), -REVIEW_HORIZON_DAYS))
        .sort(),
      error,
      at,
    );
    await deps.results.putSurveyState(failed, { asRead: state }).catch(() => false);
    return failed.failingSince;
  }
  const concurrency = deps.concurrency ?? 4;
  const writeConcurrency = deps.writeConcurrency ?? 16;
  const lookbackDays = deps.lookbackDays ?? DEFAULT_LOOKBACK_DAYS;
  const freshDays = deps.freshDays ?? DEFAULT_FRESH_DAYS;
  const settledRecheckMs = deps.settledRecheckMs ?? DEFAULT_SETTLED_RECHECK_HOURS * 3_600_000;
  /**
   * How often days past the window that wait for a review are read, and how soon a failed weekly look is made again:
   * daily, or as often as settled days are re-checked if that is oftener. Never less often than daily, whatever the
   * setting: a review weeks later must reach what is owed, and a look within the horizon before it closes.
   */
  const dailyRecheckMs = Math.min(settledRecheckMs, 86_400_000);
  const progressEveryMs = deps.progressEveryMs ?? 10_000;
  const windowListMs = (deps.windowListHours ?? 1) * 3_600_000;
  /** As of when attempts read at `at` are taken to be complete (`at` itself for the items). */
  const attemptsAsOf = (at: Date): Promise<Date> =>
    deps.attemptsAsOf
      ? deps.attemptsAsOf(at)
      : Promise.resolve(new Date(at.getTime() - (deps.attemptsLagMs ?? 0)));

  /**
   * The registry as one invocation sees it: listed once (a run's survey list and each survey's expected CPI come
   * from it) rather than read once per survey. If the listing fails, each survey reads its own registration, as
   * before; one that cannot be read is reconciled without an expected CPI.
   */
  function registryView(firstDay?: string) {
    let listing: Promise<Map<string, SurveyRegistration>> | undefined;
    const all = () => {
      // Live surveys and those ended within the review horizon (and the longest window before it) of the run's first
      // day, or of today: the ones a run reconciles (registeredSurveys); one ended before is read by key when named.
      const horizonMs = (REVIEW_HORIZON_DAYS + 33) * 86_400_000;
      const since = Math.min(
        now().getTime() - horizonMs,
        firstDay === undefined
          ? Number.POSITIVE_INFINITY
          : pacificDayRange(firstDay).start.getTime() - horizonMs,
      );
      const endedSince = new Date(since).toISOString();
      listing ??= deps.registry
        .list({ endedSince })
        .then((list) => new Map(list.map((r) => [r.surveyId, r])));
      return listing;
    };
    return {
      all,
      // One the listing lacks (ended long ago, reconciled by hand for an old day) is read by key.
      of: (surveyId: string) =>
        all().then(
          (map) => map.get(surveyId) ?? deps.registry.get(surveyId).catch(() => undefined),
          () => deps.registry.get(surveyId).catch(() => undefined),
        ),
    };
  }
  type RegistryView = ReturnType<typeof registryView>;

  /**
   * Reconciles one survey over the days (grouped into contiguous windows) and records its state. With a plan (the
   * scheduled run), settled days nothing says have changed are left alone; without one, every day is reconciled.
   */
  async function reconcileSurvey(
    surveyId: string,
    windowDays: readonly string[],
    runId: string,
    plan?: RecheckPlan,
    registry: RegistryView = registryView(),
  ): Promise<SurveyOutcome> {
    // Its registration comes from the invocation's one listing (in memory once listed).
    const registration = await registry.of(surveyId);
    // A survey removed (or closed at the marketplace) before the window has no new attempts: a scheduled run reads
    // only its days past the window.
    const endedAt = registration?.state === 'removed' ? registration.removedAt : registration?.closedAt;
    const removedBefore =
      plan !== undefined &&
      endedAt !== undefined &&
      pacificDay(new Date(endedAt)) < nextDay(windowDays[0] ?? '', -1);
    const days = removedBefore ? [] : windowDays;
    const windowStart = windowDays[0];
    /** Whether a row ended while the survey was this stack's (`serving-time.ts`). */
    const servedByThisStack = servedHere(registration);
    /** Rows left out as another system's this run, by token. */
    const leftOut = new Set<string>();
    /**
     * The run's transactions and attempts, by token and by key: those of the days it judged (a listing reads the days
     * beside a window too, whose rows are theirs), each once however many parts of the run read it.
     */
    const countedRows = new Set<string>();
    const countedAttempts = new Set<string>();
    // One batch read for the survey's own records.
    const {
      state,
      summaries: storedList,
      flags = new Map<string, string>(),
    } = await deps.results.surveyRecords(surveyId, days);
    const at = now();
    /** As of when the attempts this run reads are taken to be complete: checks are recorded as of then. */
    const asOf = await attemptsAsOf(at);
    /** A flag this run sets for the next run: just after what it records as checked. */
    const flagTime = new Date(asOf.getTime() + 1);
    const failedDays = state?.failedDays ?? [];
    // Days past the window still waiting for the buyer's review: re-read once a day (their summaries then too).
    const horizon = nextDay(pacificDay(at), -REVIEW_HORIZON_DAYS);
    const past = (state?.openDays ?? []).filter((day) => !days.includes(day) && day >= horizon);
    const open =
      plan !== undefined &&
      (state?.openCheckedAt ?? '') <= new Date(at.getTime() - dailyRecheckMs).toISOString()
        ? past
        : [];
    // Days past the window with nothing awaiting review (`reviewedDays`): their rows listed again once a week, and
    // each once more on the day it reaches the review horizon: a weekly look falls up to a week before that, and a
    // reversal after it would never be read. `reviewedFinalDay` is the last day so listed: one whose last look did
    // not happen (its listing failed, no run that day) is listed by the next run, a day past the horizon.
    const weeklyLookDue =
      plan !== undefined &&
      (state?.reviewedCheckedAt ?? '') <= new Date(at.getTime() - REVIEWED_RECHECK_MS).toISOString();
    // (One later than the horizon is no reviewed day: a run's own day, as a release before this one kept it.)
    const lastFinal = (state?.reviewedFinalDay ?? '') <= horizon ? (state?.reviewedFinalDay ?? '') : '';
    const finalLookDue = (day: string) =>
      plan !== undefined && day > lastFinal && day <= horizon && day >= nextDay(horizon, -1);
    const reviewed = (state?.reviewedDays ?? []).filter(
      (day) =>
        !days.includes(day) &&
        !open.includes(day) &&
        ((weeklyLookDue && day >= horizon) || finalLookDue(day)),
    );
    // Days that left the window since the last finished run without a run seeing them as its oldest (no run for a
    // day or more): listed now, so one holding completes still to review or to watch is not dropped. For a survey
    // this run is the first to read no window of (removed or closed since the last run read one), every day that
    // run read: of its window, only the oldest was sorted into the days to look at again.
    const lastRun = plan?.lastRun;
    const lastOldest =
      lastRun?.surveys.includes(surveyId) &&
      !lastRun.failedSurveys.includes(surveyId) &&
      windowStart !== undefined
        ? nextDay(pacificDay(new Date(lastRun.startedAt)), 1 - windowDays.length)
        : undefined;
    const lastReadWindow =
      lastOldest !== undefined &&
      !(endedAt !== undefined && pacificDay(new Date(endedAt)) < nextDay(lastOldest, -1));
    const skippedUntil =
      removedBefore && lastReadWindow && lastRun
        ? nextDay(pacificDay(new Date(lastRun.startedAt)), 1)
        : windowStart;
    const skipped: string[] = [];
    if (lastOldest !== undefined && skippedUntil !== undefined)
      for (let day = nextDay(lastOldest, 1); day < skippedUntil; day = nextDay(day, 1))
        if (
          day >= horizon &&
          !(state?.openDays ?? []).includes(day) &&
          !(state?.reviewedDays ?? []).includes(day) &&
          !failedDays.includes(day)
        )
          skipped.push(day);
    /** Reviewed (and skipped) days are read in full only when their rows changed (or a late hit flagged them). */
    const byRowsOnly = new Set([...reviewed, ...skipped]);
    // Days before the window a late hit flagged (a postback re-sent days late, a hit drained or redriven after an
    // outage): reconciled by this run, as a flagged day of the window is, not at their next daily or weekly look.
    const flaggedPast =
      plan === undefined || windowStart === undefined
        ? []
        : [...flags.keys()].filter((day) => day < windowStart && day >= horizon);
    /** Days a verdict of this run moved away from: judged again before the run ends (`forced`). */
    const leftDays = new Set<string>();
    /**
     * Days an attempt counted on a day this run judges now belongs to (its row turned up on a day beside it), when
     * this run does not judge them: judged before the run ends too, or the day it left would stop counting it while
     * its verdict still names that day until the other day's own next look (a week, for a reviewed day).
     */
    const goneToDays = new Set<string>();
    /** Days judged whatever the policy says (judged again after an upgrade of the rules, or a verdict left them). */
    const forced = new Set<string>();
    // Days an edition of the verdict rules other than this one judged (an upgrade, or a rollback): the days of the
    // horizon that have a summary are judged again, newest first, REJUDGE_DAYS_PER_RUN a run (`rejudgedFrom` is where
    // the next run goes on); a listing that fails is tried again a day later. The first step judges the window's
    // days again too: one that leaves the window before its daily re-check would keep the older figures.
    const rejudging =
      plan !== undefined && windowStart !== undefined && rejudgeDue(state, at, dailyRecheckMs);
    const rejudgeBefore = state?.rejudgedFrom ?? windowStart;
    const rejudgeable =
      rejudging && rejudgeBefore !== undefined && horizon < rejudgeBefore
        ? (await deps.results.summariesOf(surveyId, pacificDays(horizon, nextDay(rejudgeBefore, -1))))
            .map((summary) => summary.day)
            .sort()
        : [];
    const rejudged = new Set(rejudgeable.slice(-REJUDGE_DAYS_PER_RUN));
    /** Older days left for the next run to judge again. */
    const rejudgeLeft = rejudgeable.length > rejudged.size;
    for (const day of rejudged) {
      byRowsOnly.delete(day);
      forced.add(day);
    }
    if (rejudging && state?.rejudgedFrom === undefined) for (const day of days) forced.add(day);
    const pastDays = new Set([...open, ...reviewed, ...skipped, ...flaggedPast, ...rejudged]);
    const stored = new Map(storedList.map((summary) => [summary.day, summary]));
    const allDays = [...new Set([...days, ...failedDays, ...pastDays])].sort();
    /** Days past the window alone: read after the others, and a failure there does not fail the survey. */
    const pastAlone = allDays.filter(
      (day) => pastDays.has(day) && !days.includes(day) && !failedDays.includes(day),
    );
    // Quiet since before what this run's reads show, by the settle time.
    const settledBefore = new Date(at.getTime() - (deps.attemptsLagMs ?? 0) - (deps.settleMs ?? 0));
    /** When this survey began to fail: kept from the state if its last run failed too, else now. */
    const failingSince = () => failingSinceOf(state, at);
    const outcome = {
      ...emptyOutcome(surveyId, allDays, 'reconciled'),
      verdicts: {} as Partial<Record<VerdictKind, number>>,
    };
    /** Whether the marketplace answered a listing of this survey's (the run's breaker: `marketplaceAnswered`). */
    let answered = false;
    /** When a listing of several days was last too large to read, within the last week (`listedByDays`). */
    let listedByDayAt =
      state?.listedByDayAt !== undefined && Date.parse(state.listedByDayAt) > at.getTime() - LISTED_BY_DAY_MS
        ? state.listedByDayAt
        : undefined;
    /** Days a listing answered empty for although their figures counted rows, and when first (`confirmEmpty`). */
    const emptyDays = new Map<string, string>(Object.entries(state?.emptyDays ?? {}));
    /** The pending first empty answers as the state keeps them: those of days still within the horizon. */
    const emptyDaysKept = () => {
      const kept = [...emptyDays].filter(([day]) => day >= horizon).sort(([a], [b]) => a.localeCompare(b));
      return kept.length > 0 ? { emptyDays: Object.fromEntries(kept) } : {};
    };
    const changes = { new: 0, changed: 0, refreshed: 0 };
    const changed: { token: string; from: string; to: string }[] = [];
    /**
     * Days of the window a row that cannot be read holds back, with the error naming the row: a row whose token, pid
     * and day still read keeps only its day from being judged (retried by every run, as a failed survey's days are)
     * and its token's and pid's attempts from being judged on any other day; the rest of the survey is reconciled.
     */
    const blocked = new Map<string, string>();
    const heldTokens = new Set<string>();
    /** Its pid too: an attempt under another token may be matched with the row by pid. */
    const heldPids = new Set<string>();

    /**
     * A complete judged reversed because its row is listed no more, and a signed postback of its token that reached
     * this receiver under another spelling of the pid, first seen on a later day than any window holding both: the
     * one complete is chased (complete not paid, where the attempt was judged), not also reversed. Each run that
     * judges either finds the other through the discrepancy index, over the days within the review horizon whose
     * summaries count that kind: one batch read of the summaries, then a Query a day that has one, once a survey-run,
     * and only when the window has such an item or such an attempt. A pair one run missed (an index a moment behind,
     * a run that died between) is mended by the next that judges either day.
     */
    const judgedOn = new Map<string, Promise<Attempt[]>>();
    let horizonSummaries: ReturnType<ReconciliationStore['summariesOf']> | undefined;
    const judgedAcrossDays = async (kind: VerdictKind): Promise<Attempt[]> => {
      horizonSummaries ??= deps.results.summariesOf(surveyId, pacificDays(horizon, pacificDay(at)));
      // The figures as they stand: a day this run summarized since the batch read counts what it wrote. The same
      // counts, the same look; a count this run changed, a new one.
      const counts = new Map((await horizonSummaries).map((s) => [s.day, s.verdicts[kind] ?? 0]));
      for (const [day, figures] of latest) if (day >= horizon) counts.set(day, figures.verdicts[kind] ?? 0);
      const days = [...counts].filter(([, n]) => n > 0).sort(([a], [b]) => a.localeCompare(b));
      const look = JSON.stringify([kind, days]);
      let found = judgedOn.get(look);
      if (!found) {
        found = deps.results.judgedAs(
          surveyId,
          kind,
          days.map(([day]) => day),
        );
        judgedOn.set(look, found);
      }
      return found;
    };
    /** Before judging: the tokens of the window's items reversed for a missing row that such an attempt carries. */
    async function heardElsewhere(window: SurveyWindow): Promise<Set<string>> {
      const items = unheardReversals(window);
      if (items.length === 0) return new Set();
      const chased = (await judgedAcrossDays('complete_not_paid')).filter(arrivedHere);
      return new Set(
        items.filter((i) => chased.some((a) => a.token === i.token && a.pid !== i.pid)).map((i) => i.token),
      );
    }
    /** After judging complete not paid without a row: the items of their tokens judged reversed, retired. */
    async function retireReversalsOf(entries: readonly AttemptVerdict[]) {
      if (entries.length === 0) return;
      const reversed = await judgedAcrossDays('invalidated');
      for (const entry of entries)
        for (const item of reversed) {
          const judged = item.reconciliation;
          if (
            item.token !== entry.token ||
            item.pid === entry.pid ||
            arrivedHere(item) ||
            judged?.detail.marketplaceStatus !== 'missing'
          )
            continue;
          if (!(await deps.results.retireItem(item, at, 'withdrawn'))) continue;
          outcome.withdrawn++;
          await deps.results.flagDay(surveyId, judged.day, flagTime);
          // A day this run judged already counted it: judged again before the run ends, as a day a verdict left.
          if (judgedThisRun.has(judged.day)) leftDays.add(judged.day);
        }
    }

    /**
     * Adds to each judged day's outsiders the attempts judged (or awaiting judgement) on it that a reading of that
     * day alone does not hold: filed by the day index (or the feed) outside the day's `attemptRange` (`placedAt`:
     * an item made on another day, its row moved here; else its first sighting: a postback days late). Not an
     * attempt a reading missed only because the attempt feed trails the table: the next reading has it. Before the
     * day's summary, which counts them: the count says the set is there. Returns each day's count (known and added).
     */
    async function noteOutsiders(
      result: ReturnType<typeof reconcileSurveyWindow>,
      known: ReadonlyMap<string, readonly OutsiderKey[]>,
    ): Promise<Map<string, number>> {
      const ranges = new Map<string, { from: string; to: string }>();
      const rangeOf = (day: string) => {
        let range = ranges.get(day);
        if (!range) {
          const { from, to } = attemptRange([day]);
          range = { from: from.toISOString(), to: to.toISOString() };
          ranges.set(day, range);
        }
        return range;
      };
      const judgedOn = [
        ...result.verdicts.flatMap(({ verdict, attempt }) =>
          attempt ? [{ day: verdict.day, attempt }] : [],
        ),
        ...[...result.waiting].flatMap(([day, waiting]) =>
          waiting.flatMap(({ attempt }) => (attempt ? [{ day, attempt }] : [])),
        ),
      ];
      const found = new Map<string, Map<string, OutsiderKey>>();
      for (const { day, attempt } of judgedOn) {
        const { from, to } = rangeOf(day);
        // Where nothing says where it is filed, read by key all the same.
        const filedAt = attempt.placedAt ?? attempt.firstSeenAt;
        if (filedAt !== undefined && filedAt >= from && filedAt < to) continue;
        const ofDay = found.get(day) ?? new Map<string, OutsiderKey>();
        ofDay.set(keyOf(attempt.pid, attempt.token), { pid: attempt.pid, token: attempt.token });
        found.set(day, ofDay);
      }
      const counts = new Map<string, number>();
      for (const day of new Set([...found.keys(), ...known.keys()])) {
        const had = new Set((known.get(day) ?? []).map(({ pid, token }) => keyOf(pid, token)));
        const added = [...(found.get(day)?.entries() ?? [])].filter(([key]) => !had.has(key));
        if (added.length > 0)
          await deps.results.addOutsiders(
            surveyId,
            day,
            added.map(([, key]) => key),
          );
        counts.set(day, had.size + added.length);
      }
      return counts;
    }

    /** Judges the days of `window` (contiguous) from the rows listed for the wider window, and records the result. */
    async function reconcileDays(
      window: readonly string[],
      listing: {
        /** One row per token, from the day that lists it first (`distinctTransactions`). */
        readonly rows: readonly Transaction[];
        /** The other days' rows of those tokens. */
        readonly copies: readonly Transaction[];
        /** The first day listed. */
        readonly from: string;
      },
      seen: readonly Attempt[],
      lookback: (
        lookedFor: ReadonlySet<string>,
      ) => Promise<{ rows: readonly Transaction[]; malformed: readonly unknown[] } | undefined>,
    ) {
      const range = fetchRange(window);
      const listed = listing.rows;
      // What a call for just these days would have listed, and the rows before them already at hand.
      const [from, to] = [range.from.toISOString(), range.to.toISOString()];
      const inRange = (t: Transaction) => {
        const at = filedAt(t);
        return at === undefined || (at >= from && at < to);
      };
      const listedHere = listed.filter(inRange);
      const before = listed.filter((t) => (filedAt(t) ?? from) < from);
      // The window's transactions whose attempts were first seen outside it (a late finisher, a postback
      // re-sent days later): read by key, so the verdict does not depend on how wide the window is.
      const keys = attemptKeysToRead({ days: window, transactions: listedHere, attempts: seen });
      const keyed = keys.length > 0 ? await deps.results.attemptsByKey(surveyId, keys) : [];
      // Rows whose token a day before the listing lists too, as a verdict of it says: that day's (the earliest
      // copy stands, `distinctTransactions`), not matched or counted here.
      const copied = await listedOnEarlierDays(window, listedHere, [...seen, ...keyed], listing.from);
      const transactions = copied.size > 0 ? listedHere.filter((t) => !copied.has(t)) : listedHere;
      const copies = [...listing.copies.filter(inRange), ...copied];
      // An item that says its transaction's attempt arrived under another pid: that attempt, by its key.
      const held = new Set([...seen, ...keyed].map((a) => keyOf(a.pid, a.token)));
      const pointed = new Map<string, { pid: string; token: string }>();
      for (const { arrivedAs, token } of [...seen, ...keyed])
        if (arrivedAs && !held.has(keyOf(arrivedAs, token)))
          pointed.set(keyOf(arrivedAs, token), { pid: arrivedAs, token });
      // The attempts judged on these days from outside their reading (ledger-schema.ts `outsidersKey`): by key too,
      // whether or not a row still leads to them.
      const outsidersKnown = await deps.results.outsidersOf(
        surveyId,
        window.filter((day) => (stored.get(day)?.outsiders ?? 0) > 0),
      );
      for (const keys of outsidersKnown.values())
        for (const { pid, token } of keys)
          if (!held.has(keyOf(pid, token))) pointed.set(keyOf(pid, token), { pid, token });
      const byKey =
        pointed.size > 0
          ? [...keyed, ...(await deps.results.attemptsByKey(surveyId, [...pointed.values()]))]
          : keyed;
      // The attempts of a token (or pid) whose row cannot be read wait for it (judged on no day meanwhile). Not an
      // attempt of the pid whose own token has a row here: that row is its, matched by token, never the held one.
      const rowTokens = heldPids.size > 0 ? new Set(listed.map((t) => t.token)) : undefined;
      const waiting = (a: Attempt) =>
        !heldTokens.has(a.token) && !(heldPids.has(a.pid) && !rowTokens?.has(a.token));
      const read = [...seen, ...byKey].filter(waiting);
      // Rows that ended outside the time the survey was this stack's that nothing here heard of went to another
      // system's URLs: not judged (no complete "not received" for the supplier's previous system or the stack the
      // survey moved to), nor counted in the day's figures. A row whose token an attempt or item here carries is
      // judged as ever.
      const heardOf = new Set(read.map((a) => a.token));
      const ours = (t: Transaction) => heardOf.has(t.token) || servedByThisStack(t);
      const served = transactions.every(ours) ? transactions : transactions.filter(ours);
      // Counted once a run, though the parts of a window it judges each read the days beside them.
      if (served !== transactions) {
        const kept = new Set(served);
        for (const t of transactions)
          if (!kept.has(t) && !leftOut.has(t.token)) {
            leftOut.add(t.token);
            outcome.elsewhereRows = leftOut.size;
          }
      }
      const sidesWith = (attempts: readonly Attempt[]) => ({
        surveyId,
        days: window,
        transactions: served,
        copies,
        attempts,
        expectedCpi: registration?.expectedCpi,
        cpiHistory: registration?.cpiHistory,
        settledBefore,
        lookbackDays,
        impliedMatches: deps.impliedMatches === true,
        // Between the runs that list the whole window, a claim's look-back waits for the next of them (days past the
        // window, which those runs do not judge as such, look back as before).
        claimsWait: plan?.listWholeWindow === false && window.every((day) => days.includes(day)),
      });
      // A row of a day beside the window paired by pid with an attempt of it: its own attempt, by key, first.
      const beside = pidPairedBesideWindow({ ...sidesWith(read), earlier: before });
      const sides = sidesWith(
        beside.length > 0
          ? [...read, ...(await deps.results.attemptsByKey(surveyId, beside)).filter(waiting)]
          : read,
      );
      const { attempts } = sides;
      // Attempts with no transaction at hand: look through the days before the window before judging them.
      const earlier =
        lookbackRange(window, lookbackDays) && needsLookback({ ...sides, earlier: before })
          ? await lookback(new Set(attempts.map((a) => a.token)))
          : undefined;
      // A look-back this run made anyway (for a postback) serves the claims too: none of them waits.
      const judged = {
        ...sides,
        earlier: [...before, ...(earlier?.rows ?? [])],
        ...(earlier ? { claimsWait: false } : {}),
      };
      let result = reconcileSurveyWindow({ ...judged, heardElsewhere: await heardElsewhere(judged) });
      // Money owed for a row nothing arrived for, about to get an item of its own: unless a day before the listing
      // lists its token too, its attempt judged there under another key (a pid spelt otherwise, another token).
      const moved = await copiesOfEarlierDays(result.verdicts, judged.transactions, listing.from);
      /** The rows the verdicts were judged on: without those found to be copies of an earlier day's. */
      let rowsJudged: readonly [readonly Transaction[], readonly Transaction[]] = [served, copies];
      if (moved) {
        const again = {
          ...judged,
          transactions: judged.transactions.filter((t) => !moved.has(t)),
          copies: [...judged.copies, ...moved],
        };
        rowsJudged = [again.transactions, again.copies];
        result = reconcileSurveyWindow({ ...again, heardElsewhere: await heardElsewhere(again) });
      }
      // A signed complete no listing at hand has (none within the look-back): its token looked for in the ledger once,
      // under another pid, over the review horizon. Only signed postbacks (a forged redirect costs nothing to send).
      const unsearched = result.verdicts.filter(
        (v) =>
          v.attempt !== undefined &&
          arrivedHere(v.attempt) &&
          v.verdict.kind === 'complete_not_paid' &&
          v.verdict.detail.marketplaceStatus === 'missing' &&
          v.attempt.reconciliation?.detail?.twinSearched !== true,
      );
      if (unsearched.length > 0) {
        const sameToken = await attemptsOfTokens(unsearched.map((v) => ({ pid: v.pid, token: v.token })));
        const tokensSearched = new Set(unsearched.map((v) => v.token));
        const again = {
          ...judged,
          transactions: rowsJudged[0],
          copies: rowsJudged[1],
          sameToken,
          tokensSearched,
        };
        result = reconcileSurveyWindow({ ...again, heardElsewhere: await heardElsewhere(again) });
      }
      for (const { day, attempt } of result.elsewhere) {
        const counted = attempt.reconciliation?.day;
        if (counted !== undefined && counted !== day && window.includes(counted)) goneToDays.add(day);
        // Without a verdict, perhaps an agreement left unwritten on the day it was first seen (`impliedMatches`,
        // this run's setting or an earlier run's): the day it now belongs to is to count it.
        const implied = impliedDay(attempt);
        if (implied !== undefined && implied !== day && window.includes(implied)) await flagForImplied(day);
      }
      // Attempts of another settled day that had a hit since that day's last check: whatever kept the hit's own
      // flag from being set (a failed write), that day is reconciled by the next run. Days this run reconciles
      // itself are left out.
      if (plan) {
        const missed = new Set<string>();
        for (const { day, attempt } of result.elsewhere) {
          const summary = stored.get(day);
          if (!allDays.includes(day) || judgedThisRun.has(day) || plan.freshDays.has(day) || !summary)
            continue;
          if ((summary.awaiting ?? 0) > 0) continue;
          if ((attempt.lastSeenAt ?? '') > lastCheckedAt(summary, plan.lastRun)) missed.add(day);
        }
        for (const day of missed) await deps.results.flagDay(surveyId, day, flagTime);
      }
      // What arrived here, judged on these days: not the items kept for transactions never seen here, nor the
      // attempts of the days beside them.
      const besideDays = new Set(result.elsewhere.map(({ attempt }) => keyOf(attempt.pid, attempt.token)));
      for (const a of attempts)
        if ((a.redirect || a.postback) && !besideDays.has(keyOf(a.pid, a.token)))
          countedAttempts.add(keyOf(a.pid, a.token));
      outcome.attempts = countedAttempts.size;
      for (const t of rowsJudged[0]) {
        const day = filedDay(t);
        if (day === undefined || window.includes(day)) countedRows.add(t.token);
      }
      outcome.transactions = countedRows.size;
      outcome.awaiting += result.awaiting;
      outcome.readByKey += byKey.length;
      outcome.earlier += result.earlier;
      for (const item of result.superseded)
        if (await deps.results.retireItem(item, at, 'superseded')) outcome.superseded++;
      for (const item of result.withdrawn)
        if (await deps.results.retireItem(item, at, 'withdrawn')) outcome.withdrawn++;
      for (const attempt of result.collapsed)
        if (await deps.results.clearVerdict(attempt, at)) outcome.collapsed++;
      for (const { pid, token, arrivedAs, day } of result.pointers) {
        if (!(await deps.results.pointToArrival(surveyId, pid, token, arrivedAs, at))) continue;
        await deps.results.flagDay(surveyId, day, flagTime);
        // A click day already past the window is read by the next daily read of the days past it.
        if (!days.includes(day) && day >= horizon) reread.add(day);
      }
      // Verdicts a hit overtook between this run's read and its write: left for the next run, which the day's
      // summary tells to read the day again by counting them as awaiting.
      const overtaken: AttemptVerdict[] = [];
      const count = (kind: VerdictKind) => {
        outcome.verdicts[kind] = (outcome.verdicts[kind] ?? 0) + 1;
      };
      // Verdicts the attempts already carry are counted here: only the rest are written, side by side.
      const toRecord: AttemptVerdict[] = [];
      for (const entry of result.verdicts)
        if (verdictUnchanged(entry)) count(entry.verdict.kind);
        else toRecord.push(entry);
      const writes = await runBounded(
        toRecord.map((entry) => async () => {
          // Read as of `asOf`: a hit after it overtook the read (the verdict is left for the next run).
          const change = await deps.results.recordVerdict(entry, at, asOf);
          if (change === 'stale') {
            overtaken.push(entry);
            return;
          }
          count(entry.verdict.kind);
          if (change === 'unchanged') return;
          changes[change]++;

          // Moved to this day from another (its transaction turned up here): that day counted it.
          const left = entry.attempt?.reconciliation?.day;
          if (change === 'changed' && left !== undefined && left !== entry.verdict.day) leftDays.add(left);
          // Or, without a verdict, perhaps as an agreement left unwritten on the day it was first seen (a day of
          // this window is judged now): flagged as soon as the verdict is written, as the store flags the day a
          // stored verdict leaves.
          const implied = change === 'new' ? impliedDay(entry.attempt) : undefined;
          if (implied !== undefined && implied !== entry.verdict.day && !window.includes(implied))
            await flagForImplied(implied);
          if (change === 'changed' && changed.length < 20) {
            changed.push({
              token: entry.token,
              from: entry.attempt?.reconciliation?.verdict ?? '-',
              to: entry.verdict.kind,
            });
          }
        }),
        { concurrency: writeConcurrency },
      );
      throwIfFailed(writes);
      await retireReversalsOf(result.verdicts.filter(chasedWithoutRow));
      outcome.awaiting += overtaken.length;
      const outsiders = await noteOutsiders(result, outsidersKnown);
      await Promise.all(
        result.summaries
          .map((figures) =>
            withOvertaken(
              figures,
              overtaken,
              result.verdicts,
              rowsJudged,
              result.waiting.get(figures.day) ?? [],
            ),
          )
          .map((figures) => {
            const count = outsiders.get(figures.day) ?? 0;
            return count > 0 ? { ...figures, outsiders: count } : figures;
          })
          .map(async (summary) => {
            latest.set(summary.day, summary);
            const previous = stored.get(summary.day);
            if (!sameFigures(summary, previous)) {
              // Over the figures read only: another run's written since (from a listing newer or older than this
              // run's) leaves the day to the next run, flagged, rather than to whichever run wrote last.
              if (await deps.results.putDaySummary(summary, asOf, runId, { asRead: previous }))
                outcome.summariesWritten++;
              else await deps.results.flagDay(surveyId, summary.day, flagTime);
              return;
            }
            // Unchanged: a fresh day's check is recorded once for the whole run (its finished-run record).
            if (plan?.freshDays.has(summary.day)) return;
            return deps.results.recordSummaryCheck(surveyId, summary.day, asOf);
          }),
      );
    }

    /** Days this survey's run reconciles: the ones done and the ones about to be, in the window at hand. */
    const judgedThisRun = new Set<string>();
    /** Each day's figures as they stand after this run: as stored, or as this run found them. */
    const latest = new Map<string, DaySummary>(stored);
    /** Days past the window to read once more (a pointer left for their attempt). */
    const reread = new Set<string>();
    /** The survey's transactions of one Pacific day alone. */
    const listDay = (day: string) =>
      deps.marketplace.getSurveyTransactions(surveyId, { startDate: day, endDate: day });
    /**
     * The tokens of a day before the listing at hand, with the day each is filed under there, listed alone once a
     * run (`listedOnEarlierDays`); undefined when that listing failed.
     */
    const tokensOfDay = new Map<string, Promise<ReadonlyMap<string, string> | undefined>>();
    /**
     * The rows of `days` whose token a day before `listedFrom` lists too: the marketplace listing one transaction on
     * two days, each listing showing one copy. The earliest day's stands (`distinctTransactions`), whichever day a run
     * lists. Such a day is known by a verdict an earlier run gave the token from a row of it, and asked again, alone
     * (the row may have moved since: re-filed here, the row is this day's; shown there with a time of this day, it is
     * this day's too). Nothing to ask without such a verdict. Where that listing fails, the verdict is taken at its
     * word (the row left to the earlier day, as the last run found it) and the day judged here is flagged, once, for
     * the next run (not a fresh day, which every run judges; a day that came flagged falls back on its own re-checks,
     * not judged every run while the listing keeps failing): a day this run does not list does not fail the survey.
     */
    async function listedOnEarlierDays(
      days: readonly string[],
      rows: readonly Transaction[],
      attempts: readonly Attempt[],
      listedFrom: string,
    ): Promise<Set<Transaction>> {
      const copied = new Set<Transaction>();
      const judgedOn = new Map<string, string>();
      for (const { token, reconciliation: judged } of attempts)
        if (judged?.marketplace && judged.day < listedFrom) noteEarliest(judgedOn, token, judged.day);
      if (judgedOn.size === 0) return copied;
      const owned = new Set(days);
      const unsure = new Set<string>();
      for (const row of rows) {
        const earlier = judgedOn.get(row.token);
        const day = filedDay(row);
        if (earlier === undefined || day === undefined || !owned.has(day)) continue;
        const listed = await tokensListedOn(earlier);
        const filedThere = listed?.get(row.token);
        if (listed === undefined) unsure.add(day);
        if (listed === undefined || (filedThere !== undefined && filedThere < day)) copied.add(row);
      }
      return setApart(copied, unsure);
    }
    /**
     * The attempts of each token under another pid than the one given, judged with a transaction, over the review
     * horizon (attempt-store.ts `attemptsByToken`: the token's share of each day's index, a query a day).
     */
    async function attemptsOfTokens(
      of: readonly { pid: string; token: string }[],
    ): Promise<ReadonlyMap<string, readonly Attempt[]>> {
      const from = pacificDayRange(horizon).start;
      const to = new Date(at.getTime() + 86_400_000);
      const found = new Map<string, Attempt[]>();
      for (const { pid, token } of of) {
        const others = (await deps.attempts.attemptsByToken(surveyId, token, from, to)).filter(
          (a) => a.pid !== pid && a.reconciliation?.marketplace !== undefined,
        );
        if (others.length > 0) found.set(token, others);
      }
      return found;
    }
    /** A day's tokens listed alone, with the day each is filed under there, once a run (`tokensOfDay`). */
    function tokensListedOn(day: string) {
      let tokens = tokensOfDay.get(day);
      if (!tokens) {
        outcome.dayListings++;
        tokens = listDay(day).then(
          ({ rows, malformed }) => {
            // Asked only of a day said to hold a token: no rows at all there (a passing "No data found") is no
            // answer, the copy taken on trust as when the listing fails; the day's own listing settles it.
            if (isEmpty({ rows, malformed })) {
              outcome.openFailures++;
              outcome.openError ??= `listing ${day} alone: no rows, where a verdict places a token`;
              return undefined;
            }
            const filed = new Map<string, string>();
            for (const t of rows) noteEarliest(filed, t.token, filedDay(onCreationDay(t, day)) ?? day);
            // A copy there that no longer reads is still that day's (its own run holds it back meanwhile).
            for (const { placed } of malformed)
              if (placed) noteEarliest(filed, placed.token, pacificDay(new Date(placed.filedAt)));
            return filed;
          },
          (error: unknown) => {
            outcome.openFailures++;
            if (error instanceof Error) outcome.openError ??= `listing ${day} alone: ${error.message}`;
            return undefined;
          },
        );
        tokensOfDay.set(day, tokens);
      }
      return tokens;
    }
    /**
     * Rows found to be copies of an earlier day's: counted among the transactions listed, by no day here. The days
     * whose earlier listing failed (the copy taken on trust) are flagged, once, for the next run.
     */
    async function setApart(copied: Set<Transaction>, unsure: ReadonlySet<string>) {
      for (const day of unsure)
        if (!flags.has(day) && !plan?.freshDays.has(day) && day >= horizon)
          await deps.results.flagDay(surveyId, day, flagTime);
      outcome.duplicateRows += copied.size;
      return copied;
    }
    /**
     * The rows of a window's new money items (a complete listed, nothing arrived for it under its key) that are
     * copies of an earlier day's row of the token: the marketplace listing one transaction on two days, the attempt
     * judged on the earlier day under another key (a pid spelt otherwise, matched by token; another token, matched by
     * pid), which a reading of the later day alone cannot find. A day before the listing, within the review horizon,
     * whose summary names the token among its rows judged so (`crossKeyed`; or has more than it names) is asked,
     * alone, once a run: the token there, filed on a day before the row's, the row is that day's
     * (`distinctTransactions`). Where that listing fails, a summary that names the token is taken at its word and the
     * day flagged for the next run, as `listedOnEarlierDays` does. Nothing is asked of the marketplace otherwise, and
     * nothing at all without such an item (a complete missing here, once).
     */
    async function copiesOfEarlierDays(
      verdicts: readonly AttemptVerdict[],
      transactions: readonly Transaction[],
      listedFrom: string,
    ): Promise<Set<Transaction> | undefined> {
      const fresh = verdicts.filter(
        (v) => !v.attempt && isMoneyKind(v.verdict.kind) && v.verdict.marketplace !== undefined,
      );
      if (fresh.length === 0) return undefined;
      // The days within the review horizon before the listing, whatever the window (the summaries' batch read the
      // look across days shares, once a survey-run), as this run leaves them.
      horizonSummaries ??= deps.results.summariesOf(surveyId, pacificDays(horizon, pacificDay(at)));
      const marks = new Map<string, DaySummary['crossKeyed']>();
      for (const summary of await horizonSummaries) marks.set(summary.day, summary.crossKeyed);
      for (const [day, summary] of latest) if (day >= horizon) marks.set(day, summary.crossKeyed);
      // Days whose summaries name a token judged under another key, oldest first.
      const marked = [...marks]
        .filter(
          (entry): entry is [string, NonNullable<DaySummary['crossKeyed']>] =>
            entry[0] < listedFrom && !!entry[1],
        )
        .sort(([a], [b]) => a.localeCompare(b));
      const copied = new Set<Transaction>();
      const unsure = new Set<string>();
      for (const { token, verdict } of fresh) {
        const row = transactions.find((t) => t.token === token);
        if (!row) continue;
        for (const [day, { tokens, count }] of marked) {
          const named = tokens.includes(token);
          if (!named && count === tokens.length) continue;
          const listed = await tokensListedOn(day);
          const filedThere = listed?.get(token);
          // On trust only where the summary names the token.
          if (listed === undefined && named) unsure.add(verdict.day);
          if ((listed === undefined && named) || (filedThere !== undefined && filedThere < verdict.day)) {
            copied.add(row);
            break;
          }
        }
      }
      if (copied.size === 0) return undefined;
      return setApart(copied, unsure);
    }
    /**
     * Rows listed for `range` with those lacking a click time (and a start that tells its day) placed on their
     * creation day, by listing its days one by one (`creation-days.ts`). One no single day lists (the marketplace
     * not up to date with itself) stays filed by its start if it has one; without, it fails the survey for this
     * run, retried by the next: filed by its completion it could be counted on another day as well as its own.
     */
    async function placed(
      rows: readonly Transaction[],
      range: { startDate: string; endDate: string },
      { required = true } = {},
    ) {
      const placement = await placedByCreationDay(
        rows,
        pacificDays(range.startDate, range.endDate),
        async (day) => (await listDay(day)).rows,
      );
      outcome.dayListings += placement.calls;
      // One with a start just after a midnight stays filed by it (its day or the one before): only a row with
      // neither time could be counted days away from its own.
      const untold = placement.unplaced.filter((t) => t.startedAt === undefined);
      const [first] = untold;
      if (first && required)
        throw new Error(
          `${untold.length} transaction rows without a click or start time that no day of ${range.startDate}..${range.endDate} lists alone (row ${first.token}): their day cannot be told`,
        );
      return placement.rows;
    }

    /**
     * The survey's transactions of `range`: one call, or one call a day when the whole range's answer is larger than
     * the client reads (a large survey's week; each day is a fraction of it), or did not come in time (a marketplace
     * that takes longer to gather a week than the client waits: each day may answer in time; asked for the range
     * again, it never would). Listed a day at a time after a time-out, the survey goes on so only once every day
     * answered: a marketplace that is down answers no day either.
     */
    async function listedByDays(
      range: { startDate: string; endDate: string },
      judges: readonly string[] = [],
    ) {
      /** Of the days listed, those the listing is to judge (the hold is theirs: a look-back's judges none). */
      const judged = (listed: readonly string[]) => listed.filter((day) => judges.includes(day));
      // Too large to read within the last week: a day at a time from the start, not the cap's bytes downloaded first.
      let timedOut = false;
      if (listedByDayAt === undefined || range.startDate === range.endDate) {
        try {
          const listed = await deps.marketplace.getSurveyTransactions(surveyId, range);
          answered = true;
          confirmEmpty(judged(pacificDays(range.startDate, range.endDate)), isEmpty(listed));
          return listed;
        } catch (error) {
          timedOut = error instanceof MarketplaceError && error.kind === 'timeout';
          if (
            !(error instanceof MarketplaceError && (error.tooLarge || timedOut)) ||
            range.startDate === range.endDate
          )
            throw error;
          if (!timedOut) listedByDayAt = at.toISOString();
        }
      }
      const rows: Transaction[] = [];
      const malformed: MalformedRow[] = [];
      const emptied: string[] = [];
      for (const day of pacificDays(range.startDate, range.endDate)) {
        const part = await listDay(day);
        answered = true;
        outcome.dayListings++;
        // Listed under its day: a row without a click or start time is placed by it, not listed again.
        // One at a time: a day of a survey ten times the size lists over 100,000 rows, more arguments than one call
        // takes (`push(...rows)` overflows the stack).
        for (const t of part.rows) rows.push(onCreationDay(t, day));
        for (const row of part.malformed) malformed.push(row);
        if (isEmpty(part)) emptied.push(day);
        else confirmEmpty(judged([day]), false);
      }
      confirmEmpty(judged(emptied), true);
      if (timedOut) listedByDayAt = at.toISOString();
      return { rows, malformed };
    }

    /**
     * Of a listing of `days` that answered no rows at all (`answeredEmpty`; the marketplace's "No data found"), the
     * days whose figures counted rows: unconfirmed, that fails the survey for this run (its days stay as they were,
     * read again by the next run or look), and only an empty answer `EMPTY_CONFIRM_MS` after each day's first is taken
     * at its word. A listing with rows clears its days' pending first answers.
     */
    function confirmEmpty(days: readonly string[], answeredEmpty: boolean) {
      if (!answeredEmpty) {
        for (const day of days) emptyDays.delete(day);
        return;
      }
      // Within the review horizon: a day before it (an operator's run over an old day) keeps no stamp to confirm by.
      const counted = days.filter(
        (day) => day >= horizon && (stored.get(day)?.marketplace.transactions ?? 0) > 0,
      );
      const confirmMs = deps.emptyConfirmMs ?? EMPTY_CONFIRM_MS;
      const unconfirmed = counted.filter((day) => {
        const since = emptyDays.get(day);
        return confirmMs > 0 && !(since !== undefined && Date.parse(since) <= at.getTime() - confirmMs);
      });
      // Confirmed days are forgotten only with the listing taken: held for another day, they keep their stamps.
      if (unconfirmed.length === 0) {
        for (const day of counted) emptyDays.delete(day);
        return;
      }
      for (const day of unconfirmed) if (!emptyDays.has(day)) emptyDays.set(day, at.toISOString());
      const before = unconfirmed.reduce(
        (sum, day) => sum + (stored.get(day)?.marketplace.transactions ?? 0),
        0,
      );
      const from = unconfirmed
        .map((day) => Date.parse(emptyDays.get(day) as string))
        .sort((a, b) => b - a)[0];
      throw new EmptyListingHeld(
        `the marketplace listed no transactions for ${unconfirmed.length === 1 ? unconfirmed[0] : `${unconfirmed[0]}..${unconfirmed.at(-1)} (${unconfirmed.length} days)`}, where it listed ${before} before: taken as a passing fault until a listing from ${new Date((from as number) + confirmMs).toISOString()} on says so too`,
      );
    }

    /** Days flagged by this run for agreements left unwritten (`flagForImplied`). */
    const impliedFlagged = new Set<string>();
    /**
     * Flags for the next run a day an agreement left unwritten (`impliedMatches`, this run's setting or an earlier
     * run's) was counted on, or is to be counted on, when its row turned up on another day (what such a day counts
     * of it is attempts here, never money: only non-completes are implied). Not a fresh day (every run judges it),
     * nor a day flagged already: this run or the next judges it, from a listing of its own that has the row where it
     * is now, whether before or after the move was found here. Once a run.
     */
    async function flagForImplied(day: string) {
      if (plan?.freshDays.has(day) || flags.has(day) || impliedFlagged.has(day)) return;
      impliedFlagged.add(day);
      await deps.results.flagDay(surveyId, day, flagTime);
    }

    /** Whether a listing with rows holds fewer for one of `window`'s days than its stored figures counted. */
    function fewerRowsThanCounted(
      window: readonly string[],
      listed: { rows: readonly Transaction[]; held: readonly { placed: { filedAt: string } }[] },
    ): boolean {
      // No row at all is an empty answer's, held and confirmed as such (`confirmEmpty`).
      if (listed.rows.length === 0) return false;
      const heldDays = new Set(listed.held.map(({ placed }) => pacificDay(new Date(placed.filedAt))));
      return window.some((day) => {
        const counted = stored.get(day)?.marketplace.transactions;
        if (counted === undefined || counted === 0 || heldDays.has(day)) return false;
        return listed.rows.filter(filedOn(day)).length < counted;
      });
    }

    /** Reconciles one contiguous window of the survey's days. */
    async function reconcileWindow(window: readonly string[], holdDays = true, listedAgain = false) {
      const range = fetchRange(window);
      const stampsBefore = new Map(emptyDays);
      const context = { surveyId, failedDays, now: at };
      // Days checked whatever the marketplace lists: their attempts are read while it answers.
      const regardless = plan
        ? window.filter((day) => {
            if (forced.has(day)) return true;
            const why = checkRegardless(day, plan, { ...context, stored: stored.get(day) });
            return why !== undefined && !(why === 'due' && byRowsOnly.has(day));
          })
        : window;
      const groups = contiguous(regardless);
      // Both sides at once; if the marketplace fails, the ledger reads are simply discarded. A survey already
      // failing (its days retried every run) reads the ledger only once the marketplace has answered.
      const listing = listedByDays(range, window)
        .then((rows) => readable(rows, holdDays ? window : []))
        .then(async ({ rows, held }) => ({
          ...heldOnEarlierDays(distinctTransactions(await placed(rows, range)), held),
          held,
        }));
      if (failedDays.length > 0) await listing;
      const [listed, seenByGroup] = await Promise.all([
        listing,
        Promise.all(
          groups.map((group) => {
            const { from, to } = attemptRange(group);
            return deps.attempts.attemptsOfSurvey(surveyId, from, to);
          }),
        ),
      ]);
      // A day listed with fewer rows than its figures counted (a row re-filed elsewhere or withdrawn, or an answer
      // cut short without saying so: a replica behind, a page the marketplace did not mention): listed once more,
      // and judged from that second answer, before anything is judged. Its paid completes are not turned into
      // unpaid ones, nor its owed figure cut, by one short answer.
      if (!listedAgain && fewerRowsThanCounted(window, listed)) {
        // The second answer is confirmed against the stamps as they were before the first.
        emptyDays.clear();
        for (const [day, since] of stampsBefore) emptyDays.set(day, since);
        return reconcileWindow(window, holdDays, true);
      }
      outcome.duplicateRows += listed.duplicates + listed.copies.length;
      outcome.malformedRows += listed.held.length;
      const heldMessage = listed.held.length > 0 ? unreadable(listed.held).message : '';
      for (const { placed } of listed.held) {
        blocked.set(pacificDay(new Date(placed.filedAt)), heldMessage);
        heldTokens.add(placed.token);
        // A blank pid names no respondent (never paired by pid): it holds back no attempt of its own.
        if (placed.pid !== '') heldPids.add(placed.pid);
      }
      const judged = (days: readonly string[]) => contiguous(days.filter((day) => !blocked.has(day)));
      outcome.undated += listed.rows.filter((t) => filedAt(t) === undefined).length;
      // Settled days whose transactions changed since they were reconciled.
      const allListed = listed.copies.length > 0 ? [...listed.rows, ...listed.copies] : listed.rows;
      const changedDays = window.filter(
        (day) => !regardless.includes(day) && transactionsChanged(day, allListed, stored.get(day)),
      );
      outcome.skippedDays += window.length - regardless.length - changedDays.length;
      for (const day of [...regardless, ...changedDays]) judgedThisRun.add(day);
      // One look-back call at most per window, as if the window were reconciled whole.
      let lookback: Promise<Awaited<ReturnType<MarketplaceClient['getSurveyTransactions']>>> | undefined;
      const lookbackOnce = async (lookedFor: ReadonlySet<string>) => {
        const wanted = lookbackRange(window, lookbackDays);
        if (!wanted) return undefined;
        const first = !lookback;
        lookback ??= listedByDays(wanted, []).then(async (earlier) => ({
          ...earlier,
          rows: await placed(earlier.rows, wanted, { required: false }),
        }));
        const earlier = await lookback;
        if (first) {
          outcome.lookbacks++;
          outcome.malformedRows += earlier.malformed.length;
        }
        // An unreadable row there that may be the transaction an attempt is looked for by (its token, or none
        // readable): not judged without it. Any other is counted.
        const blocking = earlier.malformed.filter((m) => !m.reference || lookedFor.has(m.reference));
        if (blocking.length > 0) throw unreadable(blocking);
        return earlier;
      };
      for (const [i, group] of groups.entries())
        for (const part of judged(group))
          await reconcileDays(part, { ...listed, from: range.startDate }, seenByGroup[i] ?? [], lookbackOnce);
      for (const group of judged(changedDays)) {
        const { from, to } = attemptRange(group);
        const seen = await deps.attempts.attemptsOfSurvey(surveyId, from, to);
        await reconcileDays(group, { ...listed, from: range.startDate }, seen, lookbackOnce);
      }
    }

    // Between the runs that list the whole window, a window day nothing makes due is not listed at all.
    const unlisted = new Set(
      plan?.listWholeWindow === false
        ? days.filter(
            (day) =>
              !forced.has(day) &&
              checkRegardless(day, plan, { surveyId, failedDays, now: at, stored: stored.get(day) }) ===
                undefined,
          )
        : [],
    );
    outcome.skippedDays += unlisted.size;
    // Days past the window are never merged into the window's own listing (a failure there must not fail it).
    const windows = contiguous(allDays.filter((day) => !pastAlone.includes(day) && !unlisted.has(day)));
    const pastWindows = contiguous(pastAlone).flatMap((w) => chunks(w, PAST_DAYS_PER_CALL));
    try {
      // Failed days outside the window too: their summaries' outsiders say which attempts their reading must add.
      const unreadSummaries = [
        ...new Set([...pastDays, ...failedDays.filter((d) => !days.includes(d))]),
      ].sort();
      if (unreadSummaries.length > 0)
        for (const summary of await deps.results.summariesOf(surveyId, unreadSummaries)) {
          stored.set(summary.day, summary);
          latest.set(summary.day, summary);
        }
      for (const window of windows) await reconcileWindow(window);
      // Days past the window: one that fails (a row unreadable there) stays as it was, read again the next day.
      let reviewedFailed = false;
      let rejudgeFailed = false;
      const failedFlagged = new Set<string>();
      for (const window of pastWindows) {
        try {
          await reconcileWindow(window, false);
        } catch (error) {
          outcome.openFailures++;
          if (window.some((day) => byRowsOnly.has(day))) reviewedFailed = true;
          if (window.some((day) => rejudged.has(day))) rejudgeFailed = true;
          for (const day of window) latest.delete(day);
          // A flagged day (a late hit, a verdict that moved away) whose judging failed: read daily until it is
          // judged, not left to its weekly look with its figures apart from its list meanwhile.
          for (const day of window)
            if (flags.has(day)) {
              failedFlagged.add(day);
              reread.add(day);
            }
          if (error instanceof Error) outcome.openError ??= error.message;
        }
      }
      // Days a verdict of this run moved away from (its transaction turned up on another day), and days not judged by
      // this run that an attempt went to, within the horizon: judged (again) now, so that when the run ends no day
      // counts the attempt beside the day it moved to, and their summaries agree with the discrepancy list. Once:
      // should this fail, or a verdict move again, the flag the move left (or, for a day an attempt went to, the one
      // left in the catch below) brings the day to the next run.
      const goneTo = [...goneToDays].filter((day) => !judgedThisRun.has(day) && day >= horizon);
      const again = [...new Set([...leftDays, ...goneTo])].filter((day) => day >= horizon).sort();
      // A day an attempt went to has no flag of a move: should its judging fail (its listing, a read or a write),
      // it is flagged, so the next run judges it; not again when it was flagged already (a flagged day whose judging
      // fails is read daily until judged, `failedFlagged`).
      const judgedAgain = new Set<string>();
      try {
        if (again.length > 0)
          for (const summary of await deps.results.summariesOf(surveyId, again))
            stored.set(summary.day, summary);
        for (const day of again) forced.add(day);
        for (const window of contiguous(again).flatMap((w) => chunks(w, PAST_DAYS_PER_CALL))) {
          await reconcileWindow(window, false);
          for (const day of window) judgedAgain.add(day);
        }
      } catch (error) {
        outcome.openFailures++;
        if (error instanceof Error) outcome.openError ??= error.message;
        for (const day of goneTo.filter((day) => !judgedAgain.has(day) && !flags.has(day)))
          await deps.results.flagDay(surveyId, day, flagTime).catch(() => undefined);
      }
      // Days with completes still Pending, from the window's oldest (the next to leave it) back to the horizon:
      // read again after they leave the window. A manual run over other days keeps them, with its pointers' days.
      const oldest = days[0];
      const openDays = !plan
        ? [...new Set([...(state?.openDays ?? []), ...reread])].sort()
        : [...new Set([...allDays, ...(state?.openDays ?? []), ...reread])]
            .filter((day) => {
              if (day < horizon || (oldest !== undefined && day > oldest)) return false;
              if (reread.has(day)) return true;
              const figures = latest.get(day);
              // Not read this run (not due yet): it stays open as it was. A status or review this product does not
              // know is open too: what it turns into is money.
              return figures
                ? figures.marketplace.pendingCompletes > 0 || (figures.verdicts.unknown_status ?? 0) > 0
                : (state?.openDays ?? []).includes(day);
            })
            .sort();
      // Days past the window (or the next to leave it) with transactions, or attempts only this side has, and no
      // complete awaiting review: watched for the marketplace's changes after the fact (a Valid complete turned
      // Invalid, a termination adjusted to a complete, a complete listed late: a day this side saw traffic on and
      // the marketplace listed nothing for may have been answered "no data" by a marketplace not yet up to date).
      const reviewedDays = !plan
        ? (state?.reviewedDays ?? []).filter((day) => !openDays.includes(day))
        : [...new Set([...allDays, ...(state?.reviewedDays ?? [])])]
            .filter((day) => {
              if (day < horizon || (oldest !== undefined && day > oldest) || openDays.includes(day))
                return false;
              const figures = latest.get(day);
              // A verdict on a day with neither (a complete's item judged reversed after its row went) keeps it
              // watched too: listed again, the row undoes the reversal.
              const judged = Object.values(figures?.verdicts ?? {}).some((n) => (n ?? 0) > 0);
              return figures
                ? (figures.marketplace.transactions > 0 || figures.here.attempts > 0 || judged) &&
                    figures.marketplace.pendingCompletes === 0
                : (state?.reviewedDays ?? []).includes(day);
            })
            .sort();
      const listsChanged =
        openDays.join() !== (state?.openDays ?? []).join() ||
        reviewedDays.join() !== (state?.reviewedDays ?? []).join();
      // Days an unreadable row held back: the survey failed, the error naming the row; they are failed days,
      // retried by every run, within the horizon as a failed survey's are (a row that never reads does not keep
      // its survey failing for good).
      const heldError = blocked.values().next().value;
      const heldDays = [...blocked.keys()].filter((day) => day >= horizon).sort();
      // The edition of the rules its days past the window now stand judged by: this one for a survey's first run
      // (nothing was judged before) and once a scheduled run has judged them again, the one before while a listing
      // of theirs failed (tried again a day later).
      const edition = editionAfter(
        state,
        {
          rejudging,
          failed: rejudgeFailed,
          continueBefore: rejudgeLeft ? [...rejudged].sort()[0] : undefined,
        },
        at,
      );
      // A survey whose state says nothing new (reconciled before, nothing failed) is not rewritten.
      const rewrite =
        heldError !== undefined ||
        !state ||
        state.failedDays.length > 0 ||
        state.lastError !== undefined ||
        listsChanged ||
        open.length > 0 ||
        reviewed.length > 0 ||
        edition.rulesEdition !== state.rulesEdition ||
        edition.rejudgeTriedAt !== state.rejudgeTriedAt ||
        edition.rejudgedFrom !== state.rejudgedFrom ||
        listedByDayAt !== state.listedByDayAt ||
        !sameStamps(emptyDaysKept().emptyDays, state.emptyDays);
      /** The reviewed days at (or a day past) the horizon this run listed: their last look. */
      const finalDaysRead = reviewed.filter((day) => day <= horizon).sort();
      const next: SurveyReconciliationState = {
        surveyId,
        lastReconciledAt: at.toISOString(),
        failedDays: heldDays,
        ...(heldError !== undefined
          ? { lastError: heldError, lastErrorAt: at.toISOString(), failingSince: failingSince() }
          : {}),
        ...(openDays.length > 0
          ? {
              openDays,
              // Read now, or the first open day a failed flagged day: its daily look is a day from now.
              openCheckedAt:
                open.length > 0 || ((state?.openDays ?? []).length === 0 && failedFlagged.size > 0)
                  ? at.toISOString()
                  : state?.openCheckedAt,
            }
          : {}),
        ...(reviewedDays.length > 0
          ? {
              reviewedDays,
              // Listed now: the next look in a week; if that failed, tomorrow.
              reviewedCheckedAt:
                !weeklyLookDue || reviewed.length === 0
                  ? state?.reviewedCheckedAt
                  : new Date(
                      at.getTime() - (reviewedFailed ? REVIEWED_RECHECK_MS - dailyRecheckMs : 0),
                    ).toISOString(),
              // The day at the horizon (or the one a day past it) listed by this run; failed, the next run tries.
              ...(finalDaysRead.length > 0 && !reviewedFailed
                ? { reviewedFinalDay: finalDaysRead.at(-1) }
                : state?.reviewedFinalDay
                  ? { reviewedFinalDay: state.reviewedFinalDay }
                  : {}),
            }
          : {}),
        ...edition,
        ...(listedByDayAt !== undefined ? { listedByDayAt } : {}),
        // Empty answers waiting to be confirmed by their days' next listing (a day past the window: its next look).
        ...emptyDaysKept(),
      };
      // Another run that wrote the state since this one read it (an operator's run beside the hourly one) wins:
      // this run's write, built from the older read, would drop that run's open and reviewed days; the next run
      // writes it afresh.
      if (rewrite && !(await deps.results.putSurveyState(next, { asRead: state })))
        throw new Error(
          'its reconciliation state was written by another run while this one reconciled it; the next run reconciles it again',
        );
      // Flagged days this run judged (or checked since their flag, or beyond the horizon) are dealt with, and so are
      // days past the window it tried: one that failed there goes back to its daily or weekly look (the summary
      // keeps its flag), not to every run. A flag left behind, should this write fail, costs a spare read only.
      // A flag set after what this run's attempts are taken to show (the feed's lag, or the lag it tolerates) stays
      // for the next run, which sees its hit.
      const dealtWith = [...flags]
        .filter(
          ([day, flaggedAt]) =>
            day < horizon ||
            (flaggedAt <= asOf.toISOString() &&
              (pastDays.has(day) ||
                (judgedThisRun.has(day) && latest.has(day) && !blocked.has(day)) ||
                (stored.get(day)?.checkedAt ?? '') >= flaggedAt)),
        )
        .map(([day, flaggedAt]) => ({ day, at: flaggedAt }));
      await deps.results.clearDayFlags(surveyId, dealtWith).catch(() => undefined);
      if (heldError !== undefined)
        return {
          ...outcome,
          changes,
          changed,
          status: 'failed',
          error: heldError,
          failingSince: failingSince(),
          ...(answered ? { marketplaceAnswered: true } : {}),
        };
      return { ...outcome, changes, changed, ...(answered ? { marketplaceAnswered: true } : {}) };
    } catch (error) {
      // The marketplace asked for no calls for longer than the client waits: nothing is held against the survey (not
      // recorded failed); it is left, as one not taken up is, for the run to resume after the pause.
      if (error instanceof MarketplaceError && error.heldOffUntil !== undefined)
        return { ...emptyOutcome(surveyId, allDays, 'deferred'), heldOffUntil: error.heldOffUntil };
      const message = error instanceof Error ? error.message : String(error);
      // The window is not "zero transactions": it is unknown, and retried with the next run whatever its days.
      await deps.results
        .putSurveyState(
          {
            ...failedSurveyState(
              surveyId,
              state,
              // Bounded: a row that never reads would otherwise widen every later run's reads day after day. Days
              // past the window stay open days (read daily), not failed ones (read hourly).
              allDays.filter((day) => day >= horizon && (!pastDays.has(day) || failedDays.includes(day))),
              message,
              at,
            ),
            // What this run learnt of its listings' size: the next run does not download the cap's bytes again.
            ...(listedByDayAt !== undefined ? { listedByDayAt } : {}),
            // Empty answers waiting to be confirmed: from when each day's was first seen.
            ...emptyDaysKept(),
          },
          // Not over another run's state written meanwhile (this run's failure is then its own to report).
          { asRead: state },
        )
        .catch(() => false);
      return {
        ...emptyOutcome(surveyId, allDays, 'failed', message, failingSince()),
        ...(error instanceof EmptyListingHeld ? { held: true } : {}),
        ...(marketplaceDown(error) ? { marketplaceUnavailable: true } : {}),
        // A listing it answered before the call that failed (a look-back, a day listed alone): it is up.
        ...(answered ? { marketplaceAnswered: true } : {}),
      };
    }
  }

  /**
   * The window's rows, all of them readable: a row that cannot be read is not "no transaction"
   * (its complete would drop out of what is owed and its attempt turn into a false discrepancy). One whose token
   * and day still read, a day of `holdable`, is returned as `held` (its day and token are then not judged); any
   * other fails the survey, naming it, and its days are retried by every run until the row reads.
   */
  function readable(
    listed: Awaited<ReturnType<MarketplaceClient['getSurveyTransactions']>>,
    holdable: readonly string[],
  ) {
    const held: (MalformedRow & { placed: Placement })[] = [];
    for (const row of listed.malformed) {
      if (!row.placed || !holdable.includes(pacificDay(new Date(row.placed.filedAt))))
        throw unreadable([row, ...listed.malformed.filter((other) => other !== row)]);
      held.push({ ...row, placed: row.placed });
    }
    return { rows: listed.rows, held };
  }

  /**
   * The rows whose token an unreadable row held back on an earlier day carries, moved to the copies: that day's, as a
   * readable copy there would be (`distinctTransactions`), not counted here while it cannot be read.
   */
  function heldOnEarlierDays<T extends { rows: Transaction[]; copies: Transaction[] }>(
    listed: T,
    held: readonly { placed: Placement }[],
  ): T {
    if (held.length === 0) return listed;
    const heldOn = new Map<string, string>();
    for (const { placed } of held) noteEarliest(heldOn, placed.token, pacificDay(new Date(placed.filedAt)));
    const later = (t: Transaction) => {
      const [day, own] = [heldOn.get(t.token), filedDay(t)];
      return day !== undefined && own !== undefined && day < own;
    };
    return {
      ...listed,
      rows: listed.rows.filter((t) => !later(t)),
      copies: [...listed.copies, ...listed.rows.filter(later)],
    };
  }

  /** The error that fails a survey for rows that cannot be read, naming the first. */
  function unreadable(malformed: readonly MalformedRow[]): Error {
    const [first] = malformed;
    return new Error(
      `${malformed.length} unreadable transaction rows (row ${first?.index}${first?.reference ? ` ${first.reference}` : ''}: ${first?.problem})`,
    );
  }

  /**
   * Reconciles surveys in order, `concurrency` at a time, taking up no new survey after the deadline, nor once the
   * marketplace has not answered for MARKETPLACE_DOWN_SURVEYS surveys in a row (`marketplaceUnavailable`).
   */
  async function reconcileSurveys(
    surveys: readonly string[],
    days: readonly string[],
    runId: string,
    registry: RegistryView,
    options: ReconcileRunOptions & {
      plan?: RecheckPlan;
      onProgress?: (cursor: number) => Promise<void>;
      onFailed?: (surveyId: string) => void;
    } = {},
  ): Promise<{ outcomes: SurveyOutcome[]; marketplaceUnavailable: boolean; heldOffUntil?: number }> {
    const deferred = (index: number) => emptyOutcome(surveys[index] as string, days, 'deferred');
    /** Until when the marketplace asked for no calls, once a survey was refused so: none starts after it. */
    let heldOffUntil: number | undefined;
    const finished = new Set<number>();
    let settled = 0;
    let done = 0;
    /** Surveys that failed in a row because the marketplace was down (`marketplaceDown`): at MARKETPLACE_DOWN_SURVEYS, none starts. */
    let unavailable = 0;
    const report = await runBounded(
      surveys.map((surveyId) => async () => {
        // A read that fails before the survey's own work begins (its records, its registration) for any reason but
        // the store being down (that ends the invocation: the next run starts where it stopped) fails that survey,
        // as a failure within it does: an item that cannot be read would otherwise hold the run at it for good.
        // Recorded as any failed survey's is, so that it counts as failing (and for how long) like the others.
        const outcome = await reconcileSurvey(surveyId, days, runId, options.plan, registry).catch(
          async (error: unknown) => {
            if (error instanceof StoreUnavailable) throw error;
            const message = error instanceof Error ? error.message : String(error);
            return emptyOutcome(
              surveyId,
              days,
              'failed',
              message,
              await recordSurveyFailure(surveyId, days, message),
            );
          },
        );
        // Only an answer says the marketplace is back: a survey ended before the window may ask it nothing.
        if (outcome.marketplaceAnswered) unavailable = 0;
        else if (outcome.marketplaceUnavailable) unavailable++;
        if (outcome.heldOffUntil !== undefined)
          heldOffUntil = Math.max(heldOffUntil ?? 0, outcome.heldOffUntil);
        return outcome;
      }),
      {
        concurrency,
        now,
        // A marketplace down (or refusing with 429s) fails every survey after its client's retries: the run stops
        // taking them up instead of spending every survey's calls, and time, on it.
        // Asked for no calls for longer than the client waits: every survey would be refused at its first call.
        stopWhen: () => unavailable >= MARKETPLACE_DOWN_SURVEYS || heldOffUntil !== undefined,
        deadline: options.deadline,
        onSettled: async (result, index) => {
          if (result.status === 'failed') return;
          // A survey refused so is left as one not taken up: the cursor stays at it.
          if (result.status === 'done' && result.value.heldOffUntil === undefined) {
            if (result.value.status === 'failed') options.onFailed?.(result.value.surveyId);
            finished.add(index);
            while (finished.has(settled)) settled++;
            await options.onProgress?.(settled);
          }
          deps.onSurvey?.(result.status === 'done' ? result.value : deferred(index), ++done, surveys.length);
        },
      },
    );
    return {
      outcomes: valuesOrThrow(report, deferred),
      marketplaceUnavailable: unavailable >= MARKETPLACE_DOWN_SURVEYS,
      ...(heldOffUntil !== undefined ? { heldOffUntil } : {}),
    };
  }

  return {
    reconcileSurvey,

    /**
     * Reconciles the given surveys (default: every registered survey) over Pacific days [from, to]: every day in
     * full, whatever changed.
     */
    async run(
      from: string,
      to: string,
      surveyIds?: readonly string[],
      options: ReconcileRunOptions = {},
    ): Promise<RunReport> {
      const days = pacificDays(from, to);
      if (days.length === 0) throw new RangeError('from must not be after to');
      // A day still to come has no transactions: reconciled, it would show in finance as checked, owing nothing.
      const today = pacificDay(now());
      if (to > today)
        throw new RangeError(`${to} is after today (${today}, Pacific): it has nothing to reconcile yet`);
      const registry = registryView(days[0]);
      const named = surveyIds ?? (await registeredSurveys(registry, days));
      const surveys = deps.readOrder ? deps.readOrder(named) : named;
      const runId = options.runId ?? `manual-${now().toISOString()}`;
      const { outcomes, marketplaceUnavailable, heldOffUntil } = await reconcileSurveys(
        surveys,
        days,
        runId,
        registry,
        options,
      );
      return {
        runId,
        days,
        outcomes,
        complete: outcomes.every((o) => o.status !== 'deferred'),
        ...(marketplaceUnavailable ? { marketplaceUnavailable } : {}),
        ...refusedUntil(heldOffUntil),
      };
    },

    /**
     * The scheduled run: the trailing `windowDays` Pacific days through today, for every registered survey; the
     * newest `freshDays` of them in full, the settled ones when something says they changed (recheck-policy.ts).
     * Resumes an unfinished run instead of starting another; returns undefined when another invocation holds it.
     */
    async scheduled(
      windowDays: number,
      options: {
        /** No survey is started after it. */
        deadline: Date;
        /**
         * When the invocation is over whatever it does (the Lambda's own limit; default the deadline): the run is
         * held until then, so an invocation still finishing its last surveys is never taken for dead.
         */
        leaseUntil?: Date;
      },
    ): Promise<RunReport | undefined> {
      const leaseUntil = (options.leaseUntil ?? options.deadline).toISOString();
      const started = now();
      const registry = registryView();
      // The registry is listed once per invocation whatever it does (a new run's surveys, each survey's
      // registration): asked for beside the run's two records, not after them.
      registry.all().catch(() => undefined);
      const [stored, lastRun] = await Promise.all([
        deps.results.runState(SCHEDULED_RUN),
        deps.results.finishedRun(SCHEDULED_RUN),
      ]);
      let state = stored;
      // An invocation that ends releases the run (a lease of the epoch); one whose lease ran out without that died.
      const previousDied =
        state !== undefined &&
        !state.finishedAt &&
        state.leaseUntil !== undefined &&
        Date.parse(state.leaseUntil) > 0 &&
        Date.parse(state.leaseUntil) < started.getTime();
      if (!state || state.finishedAt) {
        const previousRunId = state?.runId;
        const today = pacificDay(started);
        const days = pacificDays(nextDay(today, 1 - windowDays), today);
        // Surveys the last run passed over because invocations died on them go last: they cannot hold up the rest.
        const stoppedBefore = new Set(lastRun?.stoppedSurveys ?? []);
        const listed = await registeredSurveys(registry, days);
        const surveys = deps.readOrder ? deps.readOrder(listed) : listed;
        state = {
          runId: started.toISOString(),
          days,
          surveys: [
            ...surveys.filter((s) => !stoppedBefore.has(s)),
            ...surveys.filter((s) => stoppedBefore.has(s)),
          ],
          cursor: 0,
          startedAt: started.toISOString(),
          freshDays: freshDaysOf(days, freshDays),
          failedSurveys: [],
          // Held from the start by the invocation that starts it: the one write takes the run and its lease.
          leaseUntil,
        };
        // Only over the run read: two invocations at once (the scheduler delivers at least once; a resume beside
        // the hourly one) would each start a run, the later replacing the first, lease and all, both reconciling.
        // Refused, it is this invocation's own write whose answer was lost (the SDK's retry then finds its own run)
        // or another invocation's run.
        if (!(await deps.results.putRunState(SCHEDULED_RUN, state, { replacing: previousRunId }))) {
          const stands = await deps.results.runState(SCHEDULED_RUN);
          if (stands?.runId !== state.runId || stands.leaseUntil !== leaseUntil) return undefined;
        }
      } else if (!(await deps.results.acquireRun(SCHEDULED_RUN, state.runId, started, new Date(leaseUntil))))
        return undefined;
      const run: RunState = state;
      // A run started before fresh days were recorded checks every day in full.
      const fresh = run.freshDays ?? run.days;
      const hoursBucket = (iso: string) => Math.floor(Date.parse(iso) / windowListMs);
      const plan: RecheckPlan = {
        freshDays: new Set(fresh),
        settledRecheckMs,
        settleMs: deps.settleMs ?? 0,
        lastRun,
        // The first run of each `windowListHours` lists the whole window; the ones after it in the same hours not.
        listWholeWindow:
          windowListMs <= 3_600_000 ||
          !lastRun ||
          hoursBucket(run.startedAt) !== hoursBucket(lastRun.startedAt),
      };
      const failedSurveys = new Set(run.failedSurveys ?? []);
      const stoppedSurveys = new Set(run.stoppedSurveys ?? []);
      const passedOver: SurveyOutcome[] = [];
      let from = run.cursor;
      let stall = run.stall;
      if (previousDied) stall = { cursor: from, times: stall?.cursor === from ? stall.times + 1 : 1 };
      // Died twice with the cursor at the same survey: it is passed over (failed in this run, last in the next), so
      // a survey too big for the function's memory or time cannot stop every other survey's reconciliation.
      // One the last run passed over already needs one death only: it is last, but would still hold up the finish.
      const passedBefore = (lastRun?.stoppedSurveys ?? []).includes(run.surveys[from] ?? '');
      const passed =
        stall && stall.times >= (passedBefore ? 1 : DEATHS_BEFORE_PASSING_OVER)
          ? run.surveys[from]
          : undefined;
      if (stall && passed !== undefined) {
        failedSurveys.add(passed);
        stoppedSurveys.add(passed);
        const error = `the run's invocations died ${stall.times === 1 ? 'once' : `${stall.times} times`} with this survey next (out of memory or time): passed over, taken last by the next run`;
        // A write that fails leaves that to the next death.
        passedOver.push(
          emptyOutcome(passed, run.days, 'failed', error, await recordSurveyFailure(passed, run.days, error)),
        );
        from++;
        stall = undefined;
      }
      let cursor = from;
      let savedAt = now().getTime();
      const save = (extra: Partial<RunState>) =>
        deps.results.putRunState(SCHEDULED_RUN, {
          ...run,
          cursor,
          failedSurveys: [...failedSurveys],
          stall: cursor === stall?.cursor ? stall : undefined,
          stoppedSurveys: [...stoppedSurveys],
          ...extra,
        });
      // Saved before any work: an invocation that dies again finds the count.
      if (previousDied) await save({ leaseUntil });
      /** Whether the marketplace's silence stopped the run early (the next scheduled invocation tries again). */
      let marketplaceUnavailable = false;
      /** Until when the marketplace asked for no calls, if that stopped the run early. */
      let heldOffUntil: number | undefined;
      /** Reconciles the run's surveys from `start` (up to `end`), moving the cursor as they settle. */
      const reconcileFrom = async (start: number, end = run.surveys.length, saveEvery = progressEveryMs) => {
        const done = await reconcileSurveys(run.surveys.slice(start, end), run.days, run.runId, registry, {
          deadline: options.deadline,
          plan,
          onFailed: (surveyId) => failedSurveys.add(surveyId),
          // The cursor is saved now and then, not per survey: a crash redoes at most that much, idempotently.
          onProgress: async (settled) => {
            if (start + settled > cursor) cursor = start + settled;
            if (now().getTime() - savedAt < saveEvery) return;
            savedAt = now().getTime();
            await save({ leaseUntil });
          },
        });
        if (done.marketplaceUnavailable) marketplaceUnavailable = true;
        if (done.heldOffUntil !== undefined) heldOffUntil = Math.max(heldOffUntil ?? 0, done.heldOffUntil);
        return done.outcomes;
      };
      const reconciled: SurveyOutcome[] = [];
      try {
        // After a death, the survey at the cursor runs alone and its end is saved at once: should the invocation
        // die again, that survey is the one it died on, not one that merely ran beside it. The rest then save the
        // cursor as each settles, not every few seconds: a death among them (the survey it died on before was not
        // the one at a cursor saved seconds earlier) leaves the cursor at the survey that died, so the next
        // invocation passes over that one, not one survey a death.
        // Added one at a time, as the rows of a day are: a run over many surveys.
        const add = (outcomes: readonly SurveyOutcome[]) => {
          for (const outcome of outcomes) reconciled.push(outcome);
        };
        if (stall && from < run.surveys.length) {
          add(await reconcileFrom(from, from + 1, 0));
          if (cursor > from && !marketplaceUnavailable && heldOffUntil === undefined)
            add(await reconcileFrom(from + 1, run.surveys.length, 0));
          else add(run.surveys.slice(from + 1).map((s) => emptyOutcome(s, run.days, 'deferred')));
        } else add(await reconcileFrom(from));
      } catch (error) {
        // A failure is no death: the run is released for the next invocation, which resumes at the cursor.
        await save({ leaseUntil: new Date(0).toISOString() }).catch(() => undefined);
        throw error;
      }
      const outcomes = [...passedOver, ...reconciled];
      const complete = outcomes.every((o) => o.status !== 'deferred');
      const finishedAt = now().toISOString();
      await save({ ...(complete ? { finishedAt } : {}), leaseUntil: new Date(0).toISOString() });
      if (complete) {
        await deps.results.putFinishedRun(SCHEDULED_RUN, {
          runId: run.runId,
          startedAt: run.startedAt,
          ...(deps.attemptsAsOf || deps.attemptsLagMs
            ? { checkedAsOf: (await attemptsAsOf(new Date(run.startedAt))).toISOString() }
            : {}),
          finishedAt,
          freshDays: fresh,
          surveys: run.surveys,
          failedSurveys: [...failedSurveys],
          stoppedSurveys: [...stoppedSurveys],
        });
      }
      return {
        runId: run.runId,
        days: run.days,
        outcomes,
        complete,
        ...(marketplaceUnavailable ? { marketplaceUnavailable } : {}),
        ...refusedUntil(heldOffUntil),
      };
    },
  };

  /**
   * Surveys with redirects here: active ones, and removed or closed ones that may still have attempts in the window
   * or, within the review horizon, completes the buyer has yet to review (their days past the window only).
   */
  async function registeredSurveys(registry: RegistryView, days: readonly string[]): Promise<string[]> {
    const last = days[days.length - 1] ?? '';
    const recent = (at: string | undefined) =>
      at !== undefined && pacificDay(new Date(at)) >= nextDay(last, -REVIEW_HORIZON_DAYS);
    return [...(await registry.all()).values()]
      .filter((r) =>
        r.state === 'active'
          ? r.closedAt === undefined || recent(r.closedAt)
          : recent(r.removedAt) && r.neverApplied !== true,
      )
      .map((r) => r.surveyId);
  }
}

export type Reconciler = ReturnType<typeof reconciler>;

/** Totals over a run's survey outcomes. */
export function totals(outcomes: readonly SurveyOutcome[]) {
  const verdicts: Partial<Record<VerdictKind, number>> = {};
  const sum = {
    surveys: outcomes.length,
    reconciled: 0,
    failed: 0,
    /** Of the failed, those held for an empty listing (`held`): not counted in `failed`. */
    held: 0,
    deferred: 0,
    transactions: 0,
    attempts: 0,
    malformedRows: 0,
    duplicateRows: 0,
    awaiting: 0,
    readByKey: 0,
    lookbacks: 0,
    earlier: 0,
    superseded: 0,
    withdrawn: 0,
    collapsed: 0,
    openFailures: 0,
    skippedDays: 0,
    summariesWritten: 0,
    changed: 0,
    new: 0,
  };
  for (const o of outcomes) {
    if (o.status === 'failed' && o.held) sum.held++;
    else sum[o.status]++;
    sum.transactions += o.transactions;
    sum.attempts += o.attempts;
    sum.malformedRows += o.malformedRows;
    sum.duplicateRows += o.duplicateRows;
    sum.awaiting += o.awaiting;
    sum.readByKey += o.readByKey;
    sum.lookbacks += o.lookbacks;
    sum.earlier += o.earlier;
    sum.superseded += o.superseded;
    sum.withdrawn += o.withdrawn;
    sum.collapsed += o.collapsed;
    sum.openFailures += o.openFailures;
    sum.skippedDays += o.skippedDays;
    sum.summariesWritten += o.summariesWritten;
    sum.changed += o.changes.changed;
    sum.new += o.changes.new;
    for (const [kind, n] of Object.entries(o.verdicts))
      verdicts[kind as VerdictKind] = (verdicts[kind as VerdictKind] ?? 0) + (n ?? 0);
  }
  return { ...sum, verdicts };
}

/** A day's figures with the verdicts a hit overtook counted as awaiting judgement instead, as awaiting ones are. */
function withOvertaken(
  summary: DaySummary,
  overtaken: readonly AttemptVerdict[],
  verdicts: readonly AttemptVerdict[],
  [transactions, copies]: readonly [readonly Transaction[], readonly Transaction[]],
  waiting: readonly Awaiting[],
): DaySummary {
  const ofDay = overtaken.filter((entry) => entry.verdict.day === summary.day);
  if (ofDay.length === 0) return summary;
  const kept = verdicts.filter((entry) => !overtaken.includes(entry));
  return summarize(summary.surveyId, summary.day, kept, transactions, [...waiting, ...ofDay], copies);
}

/** Notes `day` as `token`'s in `days` when it is earlier than the one noted (the earliest day a token is on). */
function noteEarliest(days: Map<string, string>, token: string, day: string): void {
  const noted = days.get(token);
  if (noted === undefined || day < noted) days.set(token, day);
}

/** `list` in consecutive pieces of at most `size`. */
function chunks<T>(list: readonly T[], size: number): T[][] {
  const pieces: T[][] = [];
  for (let i = 0; i < list.length; i += size) pieces.push(list.slice(i, i + size));
  return pieces;
}

/** Splits sorted days into runs of consecutive days. */
function contiguous(days: readonly string[]): string[][] {
  const windows: string[][] = [];
  for (const day of days) {
    const last = windows[windows.length - 1];
    if (last && nextDay(last[last.length - 1] as string) === day) last.push(day);
    else windows.push([day]);
  }
  return windows;
}
