/**
 * Finance's answers, from what reconciliation stored: per survey and per Pacific day what was completed here
 * and counted by the marketplace, what it owes (exact decimals), what is disputed, and when it was last checked.
 * Pure: the caller reads the day summaries and discrepancies; this shapes them for JSON, CSV and HTML.
 */

import type { FailingSpell } from '../health/health-transition';
import type { StoredDaySummary } from '../ledger/ledger-store';
import { PACIFIC_TIME_ZONE } from '../marketplace/pacific-time';
import type { Attempt } from '../receiving/attempt';
import {
  CLAIM_KINDS,
  DISCREPANCY_KINDS,
  MONEY_KINDS,
  VERDICT_KINDS,
  type VerdictKind,
} from '../reconciliation/verdict-kinds';
import { parseAmount, sumAmounts } from '../shared/money';

export interface Totals {
  readonly completesPostback: number;
  readonly completesRedirectOnly: number;
  readonly marketplaceCompletes: number;
  readonly validCompletes: number;
  readonly pendingCompletes: number;
  readonly invalidCompletes: number;
  /** Sum of CPI of valid completes. */
  readonly owed: string;
  /** Sum of CPI of completes the buyer has not reviewed yet. */
  readonly pending: string;
  /** Discrepancies by kind, unverified success claims excepted (they are in `claims`). */
  readonly discrepancies: Readonly<Partial<Record<VerdictKind, number>>>;
  /** Discrepancies of the money kinds: what finance has to chase. Forged redirects never change it. */
  readonly moneyDiscrepancies: number;
  /** Success redirects nothing backs (`unverified_claim`, `contradicted_claim`), by kind: a forgery signal. */
  readonly claims: Readonly<Partial<Record<VerdictKind, number>>>;
  /**
   * Attempts whose discrepancy the last run left for a later one (too recent to judge: a channel or the
   * marketplace may still catch up): counted above under the verdict they had, or none. Above 0, the day's
   * discrepancy figures are provisional.
   */
  readonly awaiting: number;
  /** Attempts both sides agree on: with the discrepancies and claims, every attempt judged. */
  readonly matched: number;
}

export interface SurveyDayRow extends Totals {
  readonly surveyId: string;
  readonly day: string;
  readonly lastReconciledAt: string;
}

export interface SurveyTotals extends Totals {
  readonly surveyId: string;
  readonly days: number;
  readonly lastReconciledAt: string;
}

export interface Discrepancy {
  readonly surveyId: string;
  readonly pid: string;
  readonly token: string;
  readonly kind: VerdictKind;
  readonly day: string;
  readonly money: boolean;
  readonly marketplaceStatus: string;
  readonly verifyToken: string;
  readonly cpi: string;
  /**
   * What the survey's price at the click says the attempt was worth, on the money discrepancies: a complete not
   * paid (no transaction, or one filed under another status), a reversal, a price mismatch (the prices it may
   * carry, `1.50 or 1.75` around a price change). Empty otherwise, and on verdicts recorded before it was kept.
   */
  readonly expectedCpi: string;
  /** What arrived here: postback and redirect outcomes. */
  readonly postback: string;
  readonly redirect: string;
  readonly since: string;
  /** Without a transaction: the first Pacific day one was looked for from (an older one is beyond the look-back). */
  readonly searchedFrom: string;
}

/** A period's survey-day rows with each survey's totals and the period's. */
export interface PeriodSummary {
  readonly totals: Totals & { readonly surveys: number };
  readonly surveys: readonly SurveyTotals[];
  readonly days: readonly SurveyDayRow[];
}

/**
 * What the period's money discrepancies add up to, each from its list (so each total can be rebuilt from the
 * discrepancy CSV): completes reversed after the fact (`invalidated`, at the price they took), completes signed here
 * the marketplace does not pay (`complete_not_paid`, at the survey's price at the click), and completes the
 * marketplace lists that never reached this receiver (`complete_not_received`, at the marketplace's price: already
 * in owed or pending, so a hole in this side's records, not money to claim). One of them without a price known (a
 * verdict recorded before prices were kept, or of a survey with no registered price whose row shows 0) is counted in
 * `unpriced` and left out of the sums. Completes listed at a price below the survey's at the click (`cpi_mismatch`,
 * a Valid complete listed at 0 among them) add up their differences in `underpaid`; one listed above it adds nothing.
 * `unknown_status` is listed, not summed.
 */
export interface DisputedAmounts {
  readonly reversed: string;
  readonly notPaid: string;
  readonly notReceived: string;
  /** `cpi_mismatch` completes listed below the survey's price at the click: what the differences add up to. */
  readonly underpaid: string;
  readonly unpriced: number;
}

/** A survey whose last reconciliation of some of the period's days failed: their figures are not up to date. */
export interface ReconciliationFailure {
  readonly surveyId: string;
  /** The period's days still to reconcile (retried by every run). */
  readonly days: readonly string[];
  /** The last run's error, when the runs began to fail, and when the last of them failed. */
  readonly error: string;
  readonly failingSince: string;
  readonly lastFailedAt: string;
}

export interface FinanceReport extends PeriodSummary {
  readonly amounts: DisputedAmounts;
  /** Surveys whose reconciliation of days in the period is failing: those days' figures are stale or missing. */
  readonly reconciliationFailing: readonly ReconciliationFailure[];
  /** The zone the report's calendar days are in: the marketplace's. */
  readonly timeZone: typeof PACIFIC_TIME_ZONE;
  readonly from: string;
  readonly to: string;
  readonly generatedAt: string;
  /** Money and other discrepancies, unverified claims excepted. */
  readonly discrepancies: readonly Discrepancy[];
  /** Unverified success claims, listed apart: a burst of them is a forgery signal, not a debt. */
  readonly claims: readonly Discrepancy[];
  /**
   * Surveys the health check found failing at any time in the period (each failing spell that overlaps it): a
   * stretch in which completes may have gone unpaid, to read beside the discrepancies.
   */
  readonly failingSurveys: readonly FailingSpell[];
}

/** One survey-day of a summary, as a row; `checkedAt`: when its figures were last confirmed (recheck-policy.ts). */
export function dayRow(summary: StoredDaySummary, checkedAt = summary.checkedAt): SurveyDayRow {
  const discrepancies: Partial<Record<VerdictKind, number>> = {};
  const claims: Partial<Record<VerdictKind, number>> = {};
  for (const kind of DISCREPANCY_KINDS) {
    const n = summary.verdicts[kind];
    if (n) (CLAIM_KINDS.has(kind) ? claims : discrepancies)[kind] = n;
  }
  return {
    surveyId: summary.surveyId,
    day: summary.day,
    completesPostback: summary.here.postbackCompletes,
    completesRedirectOnly: summary.here.redirectOnlyCompletes,
    marketplaceCompletes: summary.marketplace.completes,
    validCompletes: summary.marketplace.validCompletes,
    pendingCompletes: summary.marketplace.pendingCompletes,
    invalidCompletes: summary.marketplace.invalidCompletes,
    owed: summary.marketplace.owed,
    pending: summary.marketplace.pending,
    discrepancies,
    moneyDiscrepancies: moneyCount(discrepancies),
    claims,
    awaiting: summary.awaiting ?? 0,
    matched: summary.verdicts.matched ?? 0,
    lastReconciledAt: checkedAt,
  };
}

/** Adds up rows exactly (counts as integers, amounts as decimals). */
export function addUp(rows: readonly Totals[]): Totals {
  const discrepancies = sumCounts(rows.map((row) => row.discrepancies));
  const claims = sumCounts(rows.map((row) => row.claims));
  const count = (
    key:
      | 'completesPostback'
      | 'completesRedirectOnly'
      | 'marketplaceCompletes'
      | 'validCompletes'
      | 'pendingCompletes'
      | 'invalidCompletes'
      | 'awaiting'
      | 'matched',
  ) => rows.reduce((sum, row) => sum + row[key], 0);
  return {
    completesPostback: count('completesPostback'),
    completesRedirectOnly: count('completesRedirectOnly'),
    marketplaceCompletes: count('marketplaceCompletes'),
    validCompletes: count('validCompletes'),
    pendingCompletes: count('pendingCompletes'),
    invalidCompletes: count('invalidCompletes'),
    owed: sumAmounts(rows.map((row) => row.owed)),
    pending: sumAmounts(rows.map((row) => row.pending)),
    discrepancies,
    moneyDiscrepancies: moneyCount(discrepancies),
    claims,
    awaiting: count('awaiting'),
    matched: count('matched'),
  };
}

function sumCounts(
  counts: readonly Readonly<Partial<Record<VerdictKind, number>>>[],
): Partial<Record<VerdictKind, number>> {
  const sum: Partial<Record<VerdictKind, number>> = {};
  for (const byKind of counts)
    for (const [kind, n] of Object.entries(byKind))
      sum[kind as VerdictKind] = (sum[kind as VerdictKind] ?? 0) + (n ?? 0);
  // In the kinds' own order, whatever order the rows were added up in: the same figures, the same answer.
  return Object.fromEntries(Object.entries(sum).sort(([a], [b]) => kindOrder(a) - kindOrder(b))) as Partial<
    Record<VerdictKind, number>
  >;
}

/** A kind's place in `VERDICT_KINDS` (one unknown to this release after them all). */
const kindOrder = (kind: string): number => {
  const at = VERDICT_KINDS.indexOf(kind as VerdictKind);
  return at < 0 ? VERDICT_KINDS.length : at;
};

const moneyCount = (byKind: Readonly<Partial<Record<VerdictKind, number>>>): number =>
  Object.entries(byKind).reduce(
    (sum, [kind, n]) => sum + (MONEY_KINDS.has(kind as VerdictKind) ? (n ?? 0) : 0),
    0,
  );

const firstText = (...values: unknown[]): string =>
  (values.find((v) => typeof v === 'string' && v !== '') as string | undefined) ?? '';

/**
 * When a verdict took the kind it has now: the first of the entries that end its history with that kind (a reversal
 * undone and made again dates from the second time, not the first).
 */
function currentSince(verdict: {
  verdict: string;
  at: string;
  history: readonly { verdict: string; at: string }[];
}) {
  let since: string | undefined;
  for (let i = verdict.history.length - 1; i >= 0; i--) {
    const entry = verdict.history[i];
    if (entry?.verdict !== verdict.verdict) break;
    since = entry.at;
  }
  return since ?? verdict.at;
}

/** A discrepancy as finance lists it, from the attempt carrying the verdict. */
export function discrepancyOf(attempt: Attempt): Discrepancy | undefined {
  const verdict = attempt.reconciliation;
  if (!verdict || verdict.verdict === 'matched') return undefined;
  const kind = verdict.verdict as VerdictKind;
  return {
    surveyId: attempt.surveyId,
    pid: attempt.pid,
    token: attempt.token,
    kind,
    day: verdict.day,
    money: MONEY_KINDS.has(kind),
    marketplaceStatus: verdict.marketplace?.status ?? 'missing',
    verifyToken: verdict.marketplace?.verifyToken ?? '',
    // The marketplace's own price (a reversal re-filed at 0 shows 0); what was reversed, claimed or expected is
    // `expectedCpi`, so the two columns never pass one for the other.
    cpi: verdict.marketplace?.cpi ?? '',
    expectedCpi: firstText(verdict.detail.expectedCpi, verdict.detail.claimedCpi, verdict.detail.reversedCpi),
    postback: attempt.postback?.outcome ?? 'none',
    redirect: attempt.redirect?.outcome ?? 'none',
    since: currentSince(verdict),
    searchedFrom: typeof verdict.detail.searchedFrom === 'string' ? verdict.detail.searchedFrom : '',
  };
}

/** A period's figures per survey and in all, without its survey-day rows. */
export type PeriodTotals = Omit<PeriodSummary, 'days'>;

/**
 * Adds survey-day rows up per survey as they are read, in any order, into a period's figures without the rows:
 * what `periodSummary` answers but `days`, so a month of thousands of surveys is never held row by row (counts add
 * as integers and amounts as exact decimals, so the order they come in changes nothing).
 */
export function periodFold() {
  const bySurvey = new Map<string, SurveyTotals>();
  return {
    add(row: SurveyDayRow): void {
      const { surveyId, day: _day, lastReconciledAt, ...figures } = row;
      const before = bySurvey.get(surveyId);
      bySurvey.set(
        surveyId,
        before
          ? {
              surveyId,
              days: before.days + 1,
              ...addUp([before, figures]),
              lastReconciledAt:
                lastReconciledAt > before.lastReconciledAt ? lastReconciledAt : before.lastReconciledAt,
            }
          : { surveyId, days: 1, ...addUp([figures]), lastReconciledAt },
      );
    },
    totals(): PeriodTotals {
      const surveys = [...bySurvey.values()].sort((a, b) => Number(a.surveyId) - Number(b.surveyId));
      return { totals: { surveys: surveys.length, ...addUp(surveys) }, surveys };
    },
  };
}

/**
 * A period's summary from its survey-day rows: the rows by day and survey, each survey's totals (its days
 * counted, its last reconciliation) by survey, and the period's totals.
 */
export function periodSummary(rows: readonly SurveyDayRow[]): PeriodSummary {
  const days = [...rows].sort(
    (a, b) => a.day.localeCompare(b.day) || Number(a.surveyId) - Number(b.surveyId),
  );
  const fold = periodFold();
  for (const row of days) fold.add(row);
  return { ...fold.totals(), days };
}

/** The whole report for a period, from its survey-day rows and its discrepant attempts. */
export function financeReport(
  from: string,
  to: string,
  rows: readonly SurveyDayRow[],
  discrepancies: readonly Attempt[],
  generatedAt: Date,
  failingSurveys: readonly FailingSpell[] = [],
  reconciliationFailing: readonly ReconciliationFailure[] = [],
): FinanceReport {
  const listed = discrepancies
    .map(discrepancyOf)
    .filter((d): d is Discrepancy => d !== undefined)
    .sort(
      (a, b) =>
        a.day.localeCompare(b.day) ||
        Number(a.surveyId) - Number(b.surveyId) ||
        a.kind.localeCompare(b.kind) ||
        a.token.localeCompare(b.token),
    );
  const priced = (kinds: VerdictKind | ((d: Discrepancy) => boolean), price: (d: Discrepancy) => string) => {
    const amounts = listed.filter(typeof kinds === 'string' ? (d) => d.kind === kinds : kinds).map(price);
    return {
      total: sumAmounts(amounts.filter((a) => parseAmount(a) !== undefined)),
      unpriced: amounts.filter((a) => parseAmount(a) === undefined).length,
    };
  };
  const reversed = priced('invalidated', (d) => d.expectedCpi);
  const notPaid = priced('complete_not_paid', (d) => d.expectedCpi);
  const notReceived = priced('complete_not_received', (d) => d.cpi);
  // A complete listed below the price in force at its click (the first of the prices it may carry): the difference,
  // whether its postback reached this side or not (a complete not received listed off the price names the price).
  // Listed above it, nothing is owed back.
  const offPrice = (d: Discrepancy) =>
    d.kind === 'cpi_mismatch' || (d.kind === 'complete_not_received' && d.expectedCpi !== '');
  const underpaid = priced(offPrice, (d) => {
    const [expected, listedAt] = [parseAmount(d.expectedCpi.split(' or ')[0]), parseAmount(d.cpi)];
    if (expected === undefined || listedAt === undefined) return '';
    const short = sumAmounts([expected, `-${listedAt}`]);
    return short.startsWith('-') ? '0.00' : short;
  });
  return {
    timeZone: PACIFIC_TIME_ZONE,
    from,
    to,
    generatedAt: generatedAt.toISOString(),
    ...periodSummary(rows),
    amounts: {
      reversed: reversed.total,
      notPaid: notPaid.total,
      notReceived: notReceived.total,
      underpaid: underpaid.total,
      unpriced: reversed.unpriced + notPaid.unpriced + notReceived.unpriced + underpaid.unpriced,
    },
    discrepancies: listed.filter((d) => !CLAIM_KINDS.has(d.kind)),
    claims: listed.filter((d) => CLAIM_KINDS.has(d.kind)),
    failingSurveys,
    reconciliationFailing,
  };
}
