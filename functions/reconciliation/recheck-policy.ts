/**
 * What a scheduled run may leave alone. The newest day changes every hour and is reconciled every run; an older
 * (settled) day is reconciled again only when something says it may have changed: it has no summary, its last
 * run failed, it has not been checked since it ended (and the settle time after), it held discrepancies too
 * recent to judge, a late hit changed an attempt judged for it (judged-day-flag.ts), the marketplace's rows for it
 * differ from those it was reconciled with, or it has not been checked for `settledRecheckMs` (the bound on how
 * late a change only this side sees reaches a settled day's figures should its flag be lost). A summary whose
 * figures did not change is not rewritten.
 */
import type { FinishedRun, StoredDaySummary, SurveyReconciliationState } from '../ledger/ledger-store';
import type { Transaction } from '../marketplace/marketplace-records';
import { pacificDayRange } from '../marketplace/pacific-time';
import { canonicalJson, transactionsDigest } from './transactions-digest';
import type { DaySummary } from './verdict-rules';
import { nextDay, VERDICT_RULES_EDITION } from './verdict-rules';

/**
 * How long after its day a complete may still be reviewed and the day re-read for it: past the window, a day
 * holding completes still Pending is re-read once a day for up to this many days.
 */
export const REVIEW_HORIZON_DAYS = 60;

/** The scheduled run's name: its run state and its finished-run record are kept under it. */
export const SCHEDULED_RUN = 'reconcile';

/**
 * Today (Pacific) is reconciled every run. Yesterday is reconciled until a run has checked it after it ended, and
 * then like any settled day: its late changes are flagged or seen in the marketplace's rows.
 */
export const DEFAULT_FRESH_DAYS = 1;
/** A settled day is re-checked at least once a day. */
export const DEFAULT_SETTLED_RECHECK_HOURS = 24;

/** A scheduled run's plan for one survey: which days it checks whatever changed, and what the last run checked. */
export interface RecheckPlan {
  /** Days reconciled in full every run. */
  readonly freshDays: ReadonlySet<string>;
  readonly settledRecheckMs: number;
  /** How long after a day ends its last attempts and transactions may still be settling (the reconciler's). */
  readonly settleMs?: number;
  readonly lastRun?: FinishedRun | undefined;
  /** False: list only the days checked regardless, not the whole window (reconciler's `windowListHours`). */
  readonly listWholeWindow?: boolean;
}

/** The newest `freshDays` days of a run's days (the run's last day is today). */
export function freshDaysOf(days: readonly string[], freshDays: number): string[] {
  const today = days[days.length - 1];
  if (!today) return [];
  const first = nextDay(today, 1 - freshDays);
  return days.filter((day) => day >= first);
}

/** Whether a day's new figures are those stored (then nothing needs writing). */
export function sameFigures(summary: DaySummary, stored: DaySummary | undefined): boolean {
  if (!stored) return false;
  const figures = (s: DaySummary) =>
    canonicalJson({
      here: s.here,
      marketplace: s.marketplace,
      verdicts: s.verdicts,
      awaiting: s.awaiting ?? 0,
      transactionsDigest: s.transactionsDigest,
      outsiders: s.outsiders ?? 0,
      crossKeyed: s.crossKeyed,
    });
  return figures(summary) === figures(stored);
}

/**
 * When a stored summary's figures were last confirmed: its own record, or the start of the last finished
 * scheduled run when that run checked the day for the survey (a fresh day of it, the survey in it and not failed).
 */
export function lastCheckedAt(summary: StoredDaySummary, lastRun: FinishedRun | undefined): string {
  const own = summary.checkedAt > summary.reconciledAt ? summary.checkedAt : summary.reconciledAt;
  if (!lastRun || !checkedBy(lastRun, summary.surveyId, summary.day)) return own;
  const byRun = runCheckedAt(lastRun);
  return byRun > own ? byRun : own;
}

/** As of when a finished run checked the days it checked: its start, or earlier when it read the attempt feed. */
const runCheckedAt = (run: FinishedRun): string => run.checkedAsOf ?? run.startedAt;

/** Whether a finished run checked a survey's day in full. */
function checkedBy(run: FinishedRun, surveyId: string, day: string): boolean {
  return (
    run.freshDays.includes(day) && run.surveys.includes(surveyId) && !run.failedSurveys.includes(surveyId)
  );
}

/**
 * The reader's form of `lastCheckedAt` for many summaries: the finished run's lists as sets, built once.
 */
export function checkedAtReader(lastRun: FinishedRun | undefined): (summary: StoredDaySummary) => string {
  if (!lastRun) return (summary) => lastCheckedAt(summary, undefined);
  const fresh = new Set(lastRun.freshDays);
  const surveys = new Set(lastRun.surveys);
  const failed = new Set(lastRun.failedSurveys);
  return (summary) => {
    const own = lastCheckedAt(summary, undefined);
    const byRun =
      fresh.has(summary.day) && surveys.has(summary.surveyId) && !failed.has(summary.surveyId)
        ? runCheckedAt(lastRun)
        : '';
    return byRun > own ? byRun : own;
  };
}

/** Why a day of a scheduled run is reconciled before its transactions are listed, or undefined. */
export function checkRegardless(
  day: string,
  plan: RecheckPlan,
  context: {
    readonly surveyId: string;
    readonly stored: StoredDaySummary | undefined;
    readonly failedDays: readonly string[];
    readonly now: Date;
  },
): 'fresh' | 'unreconciled' | 'failed' | 'unfinished' | 'awaiting' | 'ledger' | 'due' | undefined {
  if (plan.freshDays.has(day)) return 'fresh';
  if (!context.stored) return 'unreconciled';
  if (context.failedDays.includes(day)) return 'failed';
  const checkedAt = lastCheckedAt(context.stored, plan.lastRun);
  const checked = Date.parse(checkedAt);
  // The last hours of a day that stopped being fresh at midnight: checked once the day and its settling are over.
  if (!(checked >= pacificDayRange(day).end.getTime() + (plan.settleMs ?? 0))) return 'unfinished';
  if ((context.stored.awaiting ?? 0) > 0) return 'awaiting';
  if ((context.stored.ledgerChangedAt ?? '') > checkedAt) return 'ledger';
  if (!(checked > context.now.getTime() - plan.settledRecheckMs)) return 'due';
  return undefined;
}

/** Whether the marketplace's rows for a settled day differ from those its summary was reconciled with. */
export function transactionsChanged(
  day: string,
  rows: readonly Transaction[],
  stored: StoredDaySummary | undefined,
): boolean {
  return stored?.transactionsDigest !== transactionsDigest(rows, day);
}

/** What a survey's state says of the edition of the verdict rules its days stand judged by (verdict-rules.ts). */
export type RulesEdition = Pick<
  SurveyReconciliationState,
  'rulesEdition' | 'rejudgeTriedAt' | 'rejudgedFrom'
>;

/** The edition fields of a state as they are (absent ones left out). */
export const editionOf = (state: SurveyReconciliationState | undefined): RulesEdition => ({
  ...(state?.rulesEdition !== undefined ? { rulesEdition: state.rulesEdition } : {}),
  ...(state?.rejudgeTriedAt !== undefined ? { rejudgeTriedAt: state.rejudgeTriedAt } : {}),
  ...(state?.rejudgedFrom !== undefined ? { rejudgedFrom: state.rejudgedFrom } : {}),
});

/**
 * Whether a scheduled run judges a survey's days again: they stand judged by another edition of the rules (an
 * upgrade, or a rollback), and no try of it failed within `retryMs`. A survey without a state has nothing judged.
 */
export const rejudgeDue = (
  state: SurveyReconciliationState | undefined,
  now: Date,
  retryMs: number,
): boolean =>
  state !== undefined &&
  state.rulesEdition !== VERDICT_RULES_EDITION &&
  (state.rejudgeTriedAt ?? '') <= new Date(now.getTime() - retryMs).toISOString();

/**
 * The edition fields a survey's state keeps after a run: this edition for its first run (nothing was judged before)
 * and once its days have all been judged again; while they are, the oldest day judged so far (`continueBefore`, the
 * next run goes on before it); and, when a listing of theirs failed, when (tried again `retryMs` later).
 */
export function editionAfter(
  state: SurveyReconciliationState | undefined,
  run: {
    readonly rejudging: boolean;
    readonly failed: boolean;
    readonly continueBefore?: string | undefined;
  },
  at: Date,
): RulesEdition {
  if (!state) return { rulesEdition: VERDICT_RULES_EDITION };
  if (!run.rejudging) return editionOf(state);
  const kept = state.rulesEdition !== undefined ? { rulesEdition: state.rulesEdition } : {};
  if (run.failed) return { ...editionOf(state), rejudgeTriedAt: at.toISOString() };
  if (run.continueBefore !== undefined) return { ...kept, rejudgedFrom: run.continueBefore };
  return { rulesEdition: VERDICT_RULES_EDITION };
}
