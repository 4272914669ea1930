/**
 * Reconciling one survey's window: what this receiver recorded against what the marketplace's transaction list
 * says it pays for. Pure: the caller fetches both sides; this matches them and classifies every attempt.
 *
 * Windows are the marketplace's Pacific calendar days, and a transaction belongs to the day its respondent
 * clicked in. Our side only sees an attempt when it ends, possibly after midnight or hours later, so both sides
 * are fetched one day wider than the window on each side, matched as a whole, and only the attempts that belong
 * to the window's days get a verdict: the neighbouring days' runs own the rest.
 *
 * A verdict must not depend on the window: a respondent may finish, or a postback arrive, days after the click.
 * A transaction of the window whose attempt was first seen outside it is found by the attempt's key (the caller
 * reads the keys `attemptKeysToRead` names); an attempt of the window with no transaction in it is looked for
 * among the transactions of the days before (`lookbackRange`), and one found there belongs to that earlier day,
 * whose own run judges it.
 *
 * Over 300 lines on purpose: windows, matching, the verdict table and day summaries are one pure computation with
 * one set of invariants (a verdict independent of the window); its tests read it as one unit.
 */

import type { Transaction } from '../marketplace/marketplace-records';
import { earliestEntry, filedAt, outcomeOfStatus, reviewOf } from '../marketplace/marketplace-records';
import { pacificDay, pacificDayRange } from '../marketplace/pacific-time';
import type { Attempt } from '../receiving/attempt';
import type { Outcome } from '../receiving/outcome';
import { sameAmount, sumAmounts } from '../shared/money';
import { transactionsDigest } from './transactions-digest';
import { CLAIM_KINDS, isVerdictKind, type VerdictKind } from './verdict-kinds';

/**
 * The edition of the rules below. Raise it with any change that would judge a day already reconciled otherwise
 * (another kind, another amount, a price kept on a verdict): after the upgrade the scheduled runs judge each
 * survey's days again, its window's and then those of the review horizon a listing's worth a run (reconciler.ts,
 * recheck-policy.ts `rejudgeDue`), so finance's figures of earlier weeks are those these rules give, not those of
 * the release that first judged them. A survey's state keeps the edition its days were last judged by (absent: a
 * release before editions were kept).
 */
export const VERDICT_RULES_EDITION = 7;

/** What the marketplace's transaction list says about an attempt. */
export interface MarketplaceView {
  readonly status: string;
  readonly verifyToken?: string | undefined;
  readonly cpi: string;
  readonly clickedAt?: string | undefined;
  readonly completedAt?: string | undefined;
}

export interface Verdict {
  readonly kind: VerdictKind;
  /** The Pacific day the attempt belongs to. */
  readonly day: string;
  /** Why, in a few facts (what arrived here, what the marketplace says). */
  readonly detail: Readonly<Record<string, string | boolean>>;
  readonly matchedBy?: 'token' | 'pid';
  readonly marketplace?: MarketplaceView;
  /**
   * A `matched` verdict of a non-complete the attempt tells again whenever it is judged (`impliedMatch`): written
   * on no attempt that carries no verdict yet. Its day's figures count it all the same.
   */
  readonly implied?: true;
}

export interface AttemptVerdict {
  readonly surveyId: string;
  readonly pid: string;
  readonly token: string;
  readonly verdict: Verdict;
  /** The ledger's attempt, when this receiver has one. */
  readonly attempt?: Attempt;
}

export interface DaySummary {
  readonly surveyId: string;
  readonly day: string;
  readonly here: {
    readonly attempts: number;
    readonly postbackCompletes: number;
    /** Completes only a browser reported, unverified claims (which anyone can send) excepted. */
    readonly redirectOnlyCompletes: number;
    readonly nonCompletes: number;
  };
  readonly marketplace: {
    readonly transactions: number;
    readonly byStatus: Readonly<Record<string, number>>;
    readonly completes: number;
    readonly validCompletes: number;
    readonly pendingCompletes: number;
    readonly invalidCompletes: number;
    /** Sum of CPI of Valid completes: what the marketplace owes. */
    readonly owed: string;
    /** Sum of CPI of completes still Pending review. */
    readonly pending: string;
  };
  readonly verdicts: Readonly<Partial<Record<VerdictKind, number>>>;
  /**
   * Discrepancies too recent to judge when the day was reconciled (absent when none): not yet in `verdicts`, so a
   * day with any is reconciled again by the next scheduled run, settled or not.
   */
  readonly awaiting?: number;
  /** The marketplace's rows of the day as reconciled (`transactionsDigest`); absent on summaries from before. */
  readonly transactionsDigest?: string;
  /**
   * How many attempts judged on the day its own reading does not reach (ledger-schema.ts `outsidersKey`), absent
   * when none: a run judging the day reads them by key.
   */
  readonly outsiders?: number;
  /**
   * The tokens of the day's rows judged with an attempt under another key (its pid spelt otherwise, matched by
   * token; another token, matched by pid), sorted, the first `CROSS_KEYED_KEPT` of them, and how many there are
   * (absent when none): a later day that lists such a token too finds no attempt under the row's key, and takes the
   * row for a copy of this day's only when this says the token may be one (reconciler.ts `copiesOfEarlierDays`).
   */
  readonly crossKeyed?: { readonly tokens: readonly string[]; readonly count: number };
}

/** How many tokens a day summary's `crossKeyed` names at most (beyond it, only their count). */
export const CROSS_KEYED_KEPT = 64;

export interface SurveyWindow {
  readonly surveyId: string;
  /** The Pacific days this run owns, in order. */
  readonly days: readonly string[];
  /** Transactions clicked in from the day before the first day to the day after the last. */
  readonly transactions: readonly Transaction[];
  /**
   * Rows of the same range whose token an earlier day lists too (`distinctTransactions`): not judged or counted,
   * only part of what each day's listing shows (`transactionsDigest`).
   */
  readonly copies?: readonly Transaction[];
  /** Attempts first seen here within `attemptRange` of the days (the day after, and a margin of the day before). */
  readonly attempts: readonly Attempt[];
  /**
   * Transactions clicked in on the look-back days before the window (`lookbackRange`), searched by token for the
   * window's attempts that have none in it.
   */
  readonly earlier?: readonly Transaction[];
  /**
   * How many Pacific days before an attempt's own and the day before it the caller looked for its transaction
   * (0, the default: the window's margin only). Stated on each verdict without a transaction as `searchedFrom`.
   */
  readonly lookbackDays?: number;
  /** The survey's CPI as this product knows it, to check amounts against. */
  readonly expectedCpi?: string | undefined;
  /** Its prices over time (survey-registry.ts `cpiHistory`): a transaction is checked against its click's. */
  readonly cpiHistory?: readonly { readonly cpi: string; readonly since: string }[] | undefined;
  /**
   * A discrepancy involving anything that happened at or after this instant is not judged yet: the other side
   * may simply not have caught up (a postback still being retried, a transaction list that lags).
   */
  readonly settledBefore?: Date;
  /**
   * Mark the `matched` verdicts that need not be written on their attempts (`impliedMatch`): the `matchedVerdicts`
   * setting `implied`. Without it every verdict is written (`verdictUnchanged` still skips a matched complete's
   * acceptance alone).
   */
  readonly impliedMatches?: boolean;
  /**
   * Tokens an attempt that arrived here carries on a day outside the window (a postback days late, the pid spelt
   * otherwise), judged a complete not paid there: an item of the token whose row is listed no more is retired, as
   * when that attempt is in the window (`unheardReversals` says which tokens to look for).
   */
  readonly heardElsewhere?: ReadonlySet<string>;
  /**
   * The look-back for claims is left to the runs that list the whole window (`windowListHours`): an attempt only a
   * browser reported, with no transaction at hand and not searched for since it was last heard of, is not looked
   * back for and waits, awaiting, until such a run judges it. A forged success redirect with a made-up token (anyone
   * holding the URL can send one a minute) would otherwise make every run list the survey's days before the window.
   */
  readonly claimsWait?: boolean;
  /**
   * Attempts of a token under another pid, found in the ledger by the token beyond the look-back (the caller's
   * search for a signed complete no listing at hand has: `tokensSearched`): one judged with a transaction is the
   * respondent's, its day the one the late attempt belongs to (a postback re-sent days late under another spelling of
   * the pid), where a pointer leads that day's run to it.
   */
  readonly sameToken?: ReadonlyMap<string, readonly Attempt[]>;
  /** The tokens the caller searched so (`twinSearched` on their verdicts: not searched for again). */
  readonly tokensSearched?: ReadonlySet<string>;
}

export interface SurveyWindowResult {
  readonly verdicts: AttemptVerdict[];
  readonly summaries: DaySummary[];
  /** Transactions without a click time: they cannot be placed in a day and are not classified. */
  readonly undated: number;
  /** Discrepancies too recent to judge; the next run looks again. */
  readonly awaiting: number;
  /** Those of them by day, with their attempts (the day's figures count them). */
  readonly waiting: ReadonlyMap<string, readonly Awaiting[]>;
  /** Attempts whose transaction was clicked in before the window: the run of that day judges them. */
  readonly earlier: number;
  /** Attempts seen here that belong to a day outside the window (read by its range or lead), with that day. */
  readonly elsewhere: readonly { readonly day: string; readonly attempt: Attempt }[];
  /**
   * Items an earlier run created for a transaction (nothing arrived for them) whose transaction is now matched
   * with an attempt that did arrive, under another pid: they get no verdict, and the caller retires them.
   */
  readonly superseded: readonly Attempt[];
  /**
   * Items an earlier run created for a transaction the marketplace lists no more (nothing arrived for them, and
   * nothing is left on either side): no verdict, retired by the caller. Listed again, it is judged again.
   */
  readonly withdrawn: readonly Attempt[];
  /**
   * Attempts that arrived here and now add no verdict, the token being judged with another attempt of the same
   * respondent (under another spelling of the pid), which still carry a verdict an earlier run gave them: the
   * caller clears it, or an unverified claim judged before the postback came would stay in the discrepancy lists.
   */
  readonly collapsed: readonly Attempt[];
  /**
   * Attempts of the window whose transaction is of an earlier day under another pid (`earlier`): that day's run
   * reads attempts by the transaction's pid and would not find them, so the caller leaves a pointer on the
   * transaction's item (`arrivedAs`) and tells that day to look again.
   */
  readonly pointers: readonly { pid: string; token: string; arrivedAs: string; day: string }[];
}

/** The default look-back: a week, as far as a resumed survey or re-sent postbacks are expected to lag. */
export const DEFAULT_LOOKBACK_DAYS = 7;

const HOUR_MS = 3_600_000;
const daysByHour = new Map<number, string>();
/**
 * The Pacific day of an ISO-8601 instant, remembered per UTC hour: Pacific days begin on a whole UTC hour (the
 * offsets are whole hours), so every instant of an hour has one day, and the time-zone lookup (slow) runs once
 * per hour seen rather than once per row.
 */
function dayOf(iso: string): string {
  const ms = Date.parse(iso);
  const hour = Math.floor(ms / HOUR_MS);
  let day = daysByHour.get(hour);
  if (day === undefined) {
    day = pacificDay(new Date(hour * HOUR_MS));
    if (daysByHour.size > 100_000) daysByHour.clear();
    daysByHour.set(hour, day);
  }
  return day;
}

/** The Pacific days from `from` to `to`, inclusive. */
export function pacificDays(from: string, to: string): string[] {
  const days: string[] = [];
  for (let day = from; day <= to; ) {
    days.push(day);
    // Past 9999-12-31 a day no longer sorts after the one before it (`+010000-01`): the list ends there.
    const next = nextDay(day);
    if (next <= day) break;
    day = next;
  }
  return days;
}

export function nextDay(day: string, offset = 1): string {
  // Called per attempt with the same few days: remembered (a run touches a few dozen distinct pairs).
  const key = `${day}|${offset}`;
  let next = nextDays.get(key);
  if (next === undefined) {
    const date = new Date(`${day}T12:00:00Z`);
    date.setUTCDate(date.getUTCDate() + offset);
    next = date.toISOString().slice(0, 10);
    if (nextDays.size >= 10_000) nextDays.clear();
    nextDays.set(key, next);
  }
  return next;
}
const nextDays = new Map<string, string>();

/** What to fetch for a window: transaction days and the UTC range of first-seen times, one day wider each side. */
export function fetchRange(days: readonly string[]): {
  startDate: string;
  endDate: string;
  from: Date;
  to: Date;
} {
  const first = days[0];
  const last = days[days.length - 1];
  if (!first || !last) throw new RangeError('a window needs at least one day');
  const startDate = nextDay(first, -1);
  const endDate = nextDay(last, 1);
  return { startDate, endDate, from: pacificDayRange(startDate).start, to: pacificDayRange(endDate).end };
}

/**
 * How long before a window's first day an attempt first seen here can still belong to it: the marketplace's clock
 * and its "PST" strings (daylight saving in practice) may be an hour or so off ours. An attempt is first seen
 * after its respondent clicked in, so one seen earlier than that belongs to an earlier day.
 */
export const ATTEMPT_LEAD_MS = 2 * 3_600_000;

/**
 * The first-seen range of the attempts a window reads: from `ATTEMPT_LEAD_MS` before its first day to the end of
 * the day after its last (a respondent who finishes overnight, a postback re-sent the next day). Narrower than
 * the transactions' range on the early side: the day before holds that day's attempts, which its own run judges;
 * reading them for every window that follows it was most of the reconciliation's reads.
 */
export function attemptRange(days: readonly string[]): { from: Date; to: Date } {
  const first = days[0];
  const last = days[days.length - 1];
  if (!first || !last) throw new RangeError('a window needs at least one day');
  return {
    from: new Date(pacificDayRange(first).start.getTime() - ATTEMPT_LEAD_MS),
    to: pacificDayRange(nextDay(last, 1)).end,
  };
}

/**
 * The look-back call for a window: the `lookbackDays` Pacific days before the day the window already fetches
 * before its first. Undefined when there is none to make.
 */
export function lookbackRange(
  days: readonly string[],
  lookbackDays: number,
): { startDate: string; endDate: string } | undefined {
  const first = days[0];
  if (!first || lookbackDays < 1) return undefined;
  return { startDate: nextDay(first, -1 - lookbackDays), endDate: nextDay(first, -2) };
}

/**
 * The attempts to read by key (survey, pid, token) before matching: those of the window's own transactions for
 * which no attempt with that token was found among the attempts first seen in the window. A point read each,
 * however late the attempt was first seen.
 */
export function attemptKeysToRead(
  window: Pick<SurveyWindow, 'days' | 'transactions' | 'attempts'>,
): { pid: string; token: string }[] {
  const owned = new Set(window.days);
  const tokens = new Set(window.attempts.map((a) => a.token));
  const keys = new Map<string, { pid: string; token: string }>();
  for (const t of window.transactions) {
    const clicked = filedAt(t);
    if (!clicked || tokens.has(t.token) || !owned.has(dayOf(clicked))) continue;
    keys.set(JSON.stringify([t.pid, t.token]), { pid: t.pid, token: t.token });
  }
  return [...keys.values()];
}

/**
 * The transactions of the days beside the window that the pid pass pairs with an attempt of the window (a panel id
 * back another day, the later attempt without a row of its own: withdrawn, or not listed yet). The transaction's
 * own attempt, first seen before the window reads, is then missing: paired by pid instead, the later attempt was
 * filed under the transaction's day, whose own run (which reads that attempt) leaves it to this one, and neither
 * judged it. The caller reads these by key and matches again; nothing to read in the usual window.
 */
export function pidPairedBesideWindow(window: SurveyWindow): { pid: string; token: string }[] {
  const owned = new Set(window.days);
  // The usual window has no row beside it without its attempt whose pid an attempt without a row shares: no match.
  const listedTokens = new Set(window.transactions.map((t) => t.token));
  const pidsWithoutRow = new Set(window.attempts.filter((a) => !listedTokens.has(a.token)).map((a) => a.pid));
  if (pidsWithoutRow.size === 0) return [];
  const tokensHere = new Set(window.attempts.map((a) => a.token));
  const besideWithoutAttempt = window.transactions.some((t) => {
    const clicked = filedAt(t);
    return clicked && !owned.has(dayOf(clicked)) && !tokensHere.has(t.token) && pidsWithoutRow.has(t.pid);
  });
  if (!besideWithoutAttempt) return [];
  const listed = listedEarlier(window);
  const keys: { pid: string; token: string }[] = [];
  for (const { transaction, matchedBy } of match(
    window.transactions,
    window.attempts,
    (a) => listed(a).length > 0,
  )) {
    const clicked = transaction && filedAt(transaction);
    if (matchedBy === 'pid' && transaction && clicked && !owned.has(dayOf(clicked)))
      keys.push({ pid: transaction.pid, token: transaction.token });
  }
  return keys;
}

/**
 * Whether some attempt of the window would be judged without a transaction, its transaction being neither in the
 * window nor among the `earlier` rows already at hand: then the look-back is worth its call.
 */
export function needsLookback(window: SurveyWindow): boolean {
  const owned = new Set(window.days);
  const listed = listedEarlier(window);
  const pairs = match(window.transactions, window.attempts, (a) => listed(a).length > 0);
  const answered = answeredTokens(pairs);
  const lookbackDays = window.lookbackDays ?? 0;
  // A search in vain is trusted while its attempt's day is still today (the day every run reads): once the day is
  // past, it is read only when due (daily), changed or flagged, and each such read searches again, so a row the
  // marketplace lists late (its list lagging, a re-file) is still found.
  const today = window.settledBefore && pacificDay(window.settledBefore);
  // An attempt paired by pid alone too: its own token may be listed on an earlier day, whose it then is.
  return pairs.some(({ transaction, attempt, matchedBy }) => {
    if ((transaction && matchedBy !== 'pid') || !attempt || !arrivedHere(attempt)) return false;
    if (answered.has(attempt.token)) return false;
    const day = attemptDay(attempt);
    if (!day || !owned.has(day)) return false;
    if (today && day >= today && searchedBefore(attempt, nextDay(day, -1 - lookbackDays))) return false;
    if (!transaction && waitsForLookback(window, attempt, day)) return false;
    return listed(attempt).length === 0;
  });
}

/**
 * A claim (only a browser reported it) without a transaction that a run not listing the whole window leaves
 * waiting for the look-back of one that does (`claimsWait`): never judged against a listed row, and not searched for
 * as far back since it was last heard of. Not when there is no look-back (`lookbackDays` 0) to wait for.
 */
function waitsForLookback(window: SurveyWindow, attempt: Attempt, day: string): boolean {
  const lookbackDays = window.lookbackDays ?? 0;
  return (
    window.claimsWait === true &&
    lookbackDays > 0 &&
    attempt.postback === undefined &&
    // Judged before against a listed row (a complete not received, say): its row gone is a change of money or
    // of what was listed, judged at once, not a new claim to look for.
    attempt.reconciliation?.marketplace === undefined &&
    !searchedBefore(attempt, nextDay(day, -1 - lookbackDays))
  );
}

/**
 * Whether an earlier run already looked back at least to `from` for this attempt, found nothing (its verdict says
 * how far it searched), and nothing was learnt of the attempt since: judged without the call, it gets the same
 * verdict. Without this, one attempt whose transaction is older than the look-back (or a forged claim, which has
 * none) made every run of its day, and every daily look after, list days more of the survey's rows.
 */
function searchedBefore(attempt: Attempt, from: string): boolean {
  const prior = attempt.reconciliation;
  const searched = prior?.detail.searchedFrom;
  if (!prior || typeof searched !== 'string' || searched > from) return false;
  const learned = lastLearnedAt(attempt);
  return learned !== undefined && learned <= prior.at;
}

/**
 * The rows listed before the window (`earlier`) that carry an attempt's own token, from the look-back of the
 * attempt's own day on: the same whatever the window, so its verdict does not depend on how wide the window is.
 */
const listedEarlier = (window: SurveyWindow) => {
  const lookbackDays = window.lookbackDays ?? 0;
  const earlierByToken = groupBy(window.earlier ?? [], (t) => t.token);
  return (attempt: Attempt): Transaction[] => {
    const day = attemptDay(attempt);
    if (!day) return [];
    const searchedFrom = nextDay(day, -1 - lookbackDays);
    return (earlierByToken.get(attempt.token) ?? []).filter((t) => {
      const at = filedAt(t);
      return at !== undefined && dayOf(at) >= searchedFrom;
    });
  };
};

/** Tokens whose transaction is matched with an attempt that arrived here. */
const answeredTokens = (pairs: readonly Pair[]) =>
  new Set(
    pairs
      .filter((p) => p.transaction && p.attempt && arrivedHere(p.attempt))
      .map((p) => p.transaction?.token),
  );

/**
 * For each token that more than one attempt without a transaction carries, one of them with a postback: that one
 * stands for it, the marketplace's server having named the respondent (a redirect under another spelling of the pid
 * is the same respondent). Redirects alone are each a claim of their own: many pids on one token is a forgery sign.
 */
function leadsWithoutTransaction(pairs: readonly Pair[]): Map<string, Attempt> {
  const byToken = groupBy(
    pairs.flatMap((p) => (!p.transaction && p.attempt && arrivedHere(p.attempt) ? [p.attempt] : [])),
    (a) => a.token,
  );
  const leads = new Map<string, Attempt>();
  for (const [token, attempts] of byToken) {
    const lead = attempts.length > 1 ? attempts.find((a) => a.postback !== undefined) : undefined;
    if (lead) leads.set(token, lead);
  }
  return leads;
}

/** Something reached this receiver for the attempt (not only an item reconciliation created). */
export const arrivedHere = (attempt: Attempt) =>
  attempt.redirect !== undefined || attempt.postback !== undefined;

/**
 * Whether a run has listed the attempt's row as a complete (owed or pending counted it) or judged it reversed. A
 * listing whose click cannot be the attempt's (another attempt's row, paired by pid under rules before
 * `clickCouldBeOf`) is not its row.
 */
function listedAsComplete(attempt: Attempt | undefined): boolean {
  const judged = attempt?.reconciliation;
  if (!attempt || !judged) return false;
  if (judged.verdict === 'invalidated') return true;
  return judged.marketplace?.status === 'Completed' && clickOwnedBy(attempt, judged.marketplace.clickedAt);
}

/**
 * When the attempt last told something new: the latest first sighting of an outcome on either channel, or the
 * last drain of a hit from the buffer (whose sighting keeps when the hit was made). A repeated hit moves neither.
 */
const lastLearnedAt = (attempt: Attempt): string | undefined =>
  [
    ...(attempt.redirect?.sightings ?? []).map((s) => s.firstAt),
    ...(attempt.postback?.sightings ?? []).map((s) => s.firstAt),
    ...(attempt.drainedAt ? [attempt.drainedAt] : []),
  ]
    .sort()
    .pop();

/**
 * The click time of the transaction an earlier run matched an attempt with: its view of the transaction, or, once
 * a verdict without a transaction took that view's place (the row withdrawn, not listed by a run), the time that
 * verdict kept (`clickedAt` of its detail).
 */
const knownClick = (attempt: Attempt): string | undefined => {
  const kept = attempt.reconciliation?.detail?.clickedAt;
  const click =
    attempt.reconciliation?.marketplace?.clickedAt ?? (typeof kept === 'string' ? kept : undefined);
  return clickOwnedBy(attempt, click) ? click : undefined;
};

/**
 * Whether the click an earlier run judged an attempt by is its own. One more than ATTEMPT_LEAD_MS after the attempt
 * was first seen is not (a respondent's hits come after the click): it can only have come from another attempt's
 * transaction, paired by pid under rules before `clickCouldBeOf`; unless the run found it under the attempt's own
 * token (`listedLater`: its row re-filed onto a later day), which names the attempt whatever its time.
 */
const clickOwnedBy = (attempt: Attempt, click: string | undefined): boolean =>
  attempt.reconciliation?.detail?.listedLater === true || clickCouldBeOf(attempt, click);

/**
 * The day an attempt without a transaction belongs to: the click day of the transaction an earlier run matched
 * it with (so a run that cannot see that transaction leaves it to the run that can, and the day stays when the
 * transaction is listed no more), else the day first seen.
 */
const attemptDay = (attempt: Attempt): string | undefined => {
  const at = knownClick(attempt) ?? attempt.firstSeenAt;
  return at ? dayOf(at) : undefined;
};

/**
 * The items of the window that are (or are about to be) judged reversed because their complete's row is listed no
 * more, with no attempt of their token in the window: the caller looks for one elsewhere (`heardElsewhere`).
 * Approximate on the safe side (a row under the token in any listing at hand rules an item out): a look-up, not a
 * verdict.
 */
export function unheardReversals(window: SurveyWindow): Attempt[] {
  const items = window.attempts.filter((a) => !arrivedHere(a) && listedAsComplete(a));
  // Most runs have none: the window's rows and attempts are gone through only for those that are.
  if (items.length === 0) return [];
  const listedTokens = new Set([...window.transactions, ...(window.earlier ?? [])].map((t) => t.token));
  const heard = new Set(window.attempts.filter(arrivedHere).map((a) => a.token));
  return items.filter((a) => !listedTokens.has(a.token) && !heard.has(a.token));
}

/** Matches the two sides of a survey's window and classifies every attempt that belongs to its days. */
export function reconcileSurveyWindow(window: SurveyWindow): SurveyWindowResult {
  const owned = new Set(window.days);
  const listed = listedEarlier(window);
  const pairs = match(window.transactions, window.attempts, (a) => listed(a).length > 0);
  const lookbackDays = window.lookbackDays ?? 0;
  const verdicts: AttemptVerdict[] = [];
  let undated = 0;
  let awaiting = 0;
  const awaitingByDay = new Map<string, Awaiting[]>();
  /** A discrepancy left for a later run, counted on its day. */
  const leaveForLater = (day: string, entry: Awaiting) => {
    awaiting++;
    const ofDay = awaitingByDay.get(day);
    if (ofDay) ofDay.push(entry);
    else awaitingByDay.set(day, [entry]);
  };
  let earlier = 0;
  const elsewhere: { day: string; attempt: Attempt }[] = [];
  const settled = window.settledBefore?.toISOString();
  const superseded: Attempt[] = [];
  const withdrawn: Attempt[] = [];
  const collapsed: Attempt[] = [];
  const pointers: { pid: string; token: string; arrivedAs: string; day: string }[] = [];
  const arrivedTokens = answeredTokens(pairs);
  // Tokens an attempt that arrived here carries, with a transaction or without.
  const heardTokens = new Set(window.attempts.filter(arrivedHere).map((a) => a.token));
  const unansweredLead = leadsWithoutTransaction(pairs);
  /**
   * Whether the row an earlier run judged an attempt by is listed still, under another token: one its respondent's
   * other attempt has taken (paired by pid before, `match`), filed at the click it was judged by (kept in the
   * verdict's detail once the row went: a run after a reversal still tells). The attempt's own token is listed
   * nowhere here.
   */
  const stillListed = (attempt: Attempt) => {
    const click = knownClick(attempt);
    if (click === undefined) return false;
    const day = dayOf(click);
    // Filed at that click, or a complete on its day that no attempt here carries the token of (a row that gained a
    // click time since); not another entry of the same respondent that day, which leaves the reversal to show.
    return [...window.transactions, ...(window.earlier ?? [])].some((t) => {
      const at = t.pid === attempt.pid ? filedAt(t) : undefined;
      if (at === undefined) return false;
      if (at === click) return true;
      return dayOf(at) === day && t.status === 'Completed' && !heardTokens.has(t.token);
    });
  };
  // A survey listed at a price of 0 (revenue share, or a price not set yet) has no price to check against.
  const pricedAt = (at: string | undefined) =>
    withoutZero(at ? pricesAt(window.cpiHistory, window.expectedCpi, at) : window.expectedCpi);
  for (const { transaction, attempt, matchedBy } of pairs) {
    const clicked = transaction && filedAt(transaction);
    if (transaction && !clicked) {
      undated++;
      continue;
    }
    const day = clicked ? dayOf(clicked) : attempt && attemptDay(attempt);
    if (!day) continue;
    if (!owned.has(day)) {
      // An attempt, or an item made for a row nothing arrived for, whose row is filed under a day not judged here:
      // that day's (a row re-filed onto the day beside: that day is judged in the same run, or its complete not
      // received would count on no day).
      if (attempt) elsewhere.push({ day, attempt });
      continue;
    }
    // An item made for a row no longer listed is retired, unless the row was a complete: its reversal is judged
    // below and kept (classify), so the money owed or pending counted for it does not vanish unexplained. Not when
    // an attempt that arrived here carries its token (under another spelling of the pid): that one is judged for
    // the token (a signed complete not paid), and the item beside it would count the same complete twice.
    if (!transaction && attempt && !arrivedHere(attempt)) {
      if (arrivedTokens.has(attempt.token)) {
        superseded.push(attempt);
        continue;
      }
      if (
        !listedAsComplete(attempt) ||
        heardTokens.has(attempt.token) ||
        window.heardElsewhere?.has(attempt.token)
      ) {
        withdrawn.push(attempt);
        continue;
      }
    }
    // The same respondent seen here twice under two spellings of the pid (a redirect under one, the postback
    // under the other): its transaction is judged with the attempt that took it; this one adds no verdict (it
    // would read as an unverified claim, a false forgery signal).
    // Likewise without a transaction, when a postback named the respondent: the token is judged once, by it; a
    // redirect under another spelling would otherwise add an unverified claim beside the complete not paid.
    if (
      !transaction &&
      attempt &&
      (arrivedTokens.has(attempt.token) || (unansweredLead.get(attempt.token) ?? attempt) !== attempt)
    ) {
      if (attempt.reconciliation) collapsed.push(attempt);
      continue;
    }
    // Without a transaction, the look-back of the attempt's own day: the same whatever the window.
    const searchedFrom = nextDay(day, -1 - lookbackDays);
    if (!transaction && attempt && arrivedHere(attempt)) {
      const candidates = listed(attempt);
      if (candidates.length === 0 && waitsForLookback(window, attempt, day)) {
        leaveForLater(day, { attempt });
        continue;
      }
      // No row listed near it, but the ledger holds its token under another pid, judged with the row on a day before
      // the look-back: that attempt's day is this one's (a postback re-sent after the look-back, the pid spelt
      // otherwise). As a row of an earlier day: a pointer leads that day's run to this attempt, judged there once with
      // the row. (Within the look-back the listing has no row of the token: gone, it is this attempt's to chase.)
      const twin =
        candidates.length === 0
          ? window.sameToken
              ?.get(attempt.token)
              ?.find(
                (a) =>
                  a.pid !== attempt.pid &&
                  a.reconciliation?.marketplace !== undefined &&
                  a.reconciliation.day < searchedFrom &&
                  !owned.has(a.reconciliation.day),
              )
          : undefined;
      if (twin?.reconciliation) {
        earlier++;
        elsewhere.push({ day: twin.reconciliation.day, attempt });
        pointers.push({
          pid: twin.pid,
          token: attempt.token,
          arrivedAs: attempt.pid,
          day: twin.reconciliation.day,
        });
        continue;
      }
      if (candidates.length > 0) {
        // Clicked in before the window: that day's run matches it by this attempt's key and judges it.
        earlier++;
        // Listed on two days, the token is the earliest's (`distinctTransactions`).
        const first = candidates
          .map((t) => ({ t, at: filedAt(t) as string }))
          .sort((a, b) => a.at.localeCompare(b.at))[0] as { t: Transaction; at: string };
        const clickDay = dayOf(first.at);
        elsewhere.push({ day: clickDay, attempt });
        if (!candidates.some((t) => t.pid === attempt.pid))
          pointers.push({ pid: first.t.pid, token: attempt.token, arrivedAs: attempt.pid, day: clickDay });
        continue;
      }
    }
    // The price it earned: the one in force at its click (listed, else as an earlier run saw it, its own), unless it
    // was seen here (or its item made) before that click by more than a clock's lead: then its row was re-filed onto
    // a later click, and it earned the price of when it was seen (or made), which no genuine click comes after. A
    // complete re-filed onto a day after a price change still earned the price before it. The prices at the other
    // times it is known by (another attempt's click an earlier run paired it with by pid among them) only widen what
    // a row may carry without being a mismatch. With none of them, the survey's price now.
    const ownClick = clicked ?? (attempt ? knownClick(attempt) : undefined);
    const seenOrMade = attempt && (arrivedHere(attempt) ? attempt.firstSeenAt : attempt.placedAt);
    const refiledLater =
      ownClick !== undefined &&
      seenOrMade !== undefined &&
      Date.parse(seenOrMade) < Date.parse(ownClick) - ATTEMPT_LEAD_MS;
    const earned = refiledLater ? seenOrMade : (ownClick ?? attempt?.firstSeenAt);
    const storedClick = attempt?.reconciliation?.detail?.clickedAt;
    const prices = widenedBy(
      pricedAt(earned),
      [
        clicked,
        attempt?.reconciliation?.marketplace?.clickedAt,
        typeof storedClick === 'string' ? storedClick : undefined,
        attempt?.placedAt,
        attempt && arrivedHere(attempt) ? attempt.firstSeenAt : undefined,
      ]
        .filter((at): at is string => at !== undefined && at !== earned)
        .map(pricedAt),
    );
    const classified = classify(transaction, attempt, prices, {
      listingGone: !transaction && attempt !== undefined && arrivedHere(attempt) && !stillListed(attempt),
    });
    const { kind } = classified;
    // Without a transaction, say how far back one was looked for: an older one is beyond the look-back.
    // And the click time it was judged by, if a transaction once gave one: the next run judges it on the same day.
    const clickedAt = !transaction && attempt ? knownClick(attempt) : undefined;
    // A row of the attempt's own token filed after it was first seen (re-filed onto a later day): the attempt's all
    // the same, and the next run that cannot list that day must know it (`knownClick`), or it judges the attempt
    // on its first-seen day without the row, and the run after moves it back: a verdict flipping every run.
    const listedLater =
      transaction !== undefined &&
      attempt !== undefined &&
      matchedBy === 'token' &&
      !clickCouldBeOf(attempt, clicked);
    const detail = transaction
      ? { ...classified.detail, ...(listedLater ? { listedLater: true } : {}) }
      : {
          ...classified.detail,
          searchedFrom,
          ...(clickedAt ? { clickedAt } : {}),
          ...(clickedAt && attempt?.reconciliation?.detail?.listedLater === true
            ? { listedLater: true }
            : {}),
          // Its token looked for in the ledger under another pid, and found nowhere (`sameToken`): not again.
          ...(kind === 'complete_not_paid' &&
          attempt !== undefined &&
          (window.tokensSearched?.has(attempt.token) || attempt.reconciliation?.detail?.twinSearched === true)
            ? { twinSearched: true }
            : {}),
        };
    if (kind !== 'matched' && settled !== undefined) {
      // The attempt's last new sighting, not its last hit: a respondent refreshing the end page (anyone holding the
      // URL, every few minutes) would otherwise keep its discrepancy from ever being judged. (A drained hit is new
      // when it is drained, not when it was made.)
      const latest = [transaction?.completedAt?.utc, clicked, attempt && lastLearnedAt(attempt)]
        .filter((t): t is string => !!t)
        .sort()
        .pop();
      if (latest !== undefined && latest >= settled) {
        leaveForLater(day, attempt ? { attempt } : {});
        continue;
      }
    }
    verdicts.push({
      surveyId: window.surveyId,
      pid: transaction?.pid ?? (attempt?.pid as string),
      token: transaction?.token ?? (attempt?.token as string),
      verdict: {
        kind,
        day,
        detail,
        ...(matchedBy ? { matchedBy } : {}),
        ...(transaction ? { marketplace: viewOf(transaction) } : {}),
        ...(window.impliedMatches && kind === 'matched' && impliedMatch(transaction, attempt, day)
          ? { implied: true as const }
          : {}),
      },
      ...(attempt ? { attempt } : {}),
    });
  }
  return {
    verdicts,
    summaries: window.days.map((day) =>
      summarize(
        window.surveyId,
        day,
        verdicts,
        window.transactions,
        awaitingByDay.get(day) ?? [],
        window.copies,
      ),
    ),
    undated,
    awaiting,
    waiting: awaitingByDay,
    earlier,
    elsewhere,
    superseded,
    withdrawn,
    collapsed,
    pointers,
  };
}

/**
 * Whether a `matched` verdict holds nothing a later run could not tell again without it, so that an attempt may go
 * without it (`SurveyWindow.impliedMatches`). A stored verdict is what a run remembers of an earlier one: the day of
 * the click (where the attempt stays should its row be withdrawn, and which day a late hit flags) and, of a
 * complete, that the row was listed as an earning one and at what price (what a reversal takes: `classify`'s
 * `earnedBefore`; the survey's price history is trimmed, and a reversed row may show another price). So only a
 * non-complete is implied, and only where the day it was first seen here is its click's Pacific day (the day a run
 * falls back on without a verdict) and no conflict makes it one to look at again.
 */
export function impliedMatch(
  transaction: Transaction | undefined,
  attempt: Attempt | undefined,
  day: string,
): boolean {
  if (!transaction || transaction.status === 'Completed') return false;
  if (!attempt?.firstSeenAt || attempt.conflict || !arrivedHere(attempt)) return false;
  return dayOf(attempt.firstSeenAt) === day;
}

/**
 * The day an attempt without a verdict was counted on, had a run left its agreement unwritten (`impliedMatch`): the
 * Pacific day first seen. A run that finds its row on another day judges that one again (or flags it), as it does
 * the day a stored verdict names.
 */
export function impliedDay(attempt: Attempt | undefined): string | undefined {
  if (!attempt || attempt.reconciliation || !attempt.firstSeenAt || !arrivedHere(attempt)) return undefined;
  return dayOf(attempt.firstSeenAt);
}

interface Pair {
  transaction?: Transaction;
  attempt?: Attempt;
  matchedBy?: 'token' | 'pid';
}

/**
 * Whether a click could be the attempt's own as far as time tells: not after the attempt was first seen here (by
 * more than the clocks and the "PST" strings may be apart, `ATTEMPT_LEAD_MS`; the repeated hour of the autumn change
 * reads as the later one). A respondent's redirect and postback come after the click: a panel that sends the same
 * respondent again days later shares the pid with attempts heard of before the new click, which are not its.
 */
function clickCouldBeOf(attempt: Attempt, clickedAt: string | undefined): boolean {
  if (clickedAt === undefined || attempt.firstSeenAt === undefined) return true;
  return Date.parse(attempt.firstSeenAt) >= Date.parse(clickedAt) - ATTEMPT_LEAD_MS;
}

/**
 * By token first; then by pid where exactly one unmatched attempt and one unmatched transaction share it, among the
 * attempts that arrived here (an item kept for a transaction nothing arrived for is no evidence of another) and
 * were not first seen before the transaction's click or start (`clickCouldBeOf`). Never by pid an attempt whose own
 * token is listed elsewhere (`listedElsewhere`: a postback re-sent days after its click arrives beside a newer
 * transaction of the same respondent, which must not take it).
 */
function match(
  transactions: readonly Transaction[],
  attempts: readonly Attempt[],
  listedElsewhere: (attempt: Attempt) => boolean,
): Pair[] {
  const byToken = new Map<string, Attempt[]>();
  for (const attempt of attempts) {
    const ofToken = byToken.get(attempt.token);
    if (ofToken) ofToken.push(attempt);
    else byToken.set(attempt.token, [attempt]);
  }
  const used = new Set<Attempt>();
  const pairs: Pair[] = [];
  const unmatched: Transaction[] = [];
  for (const transaction of transactions) {
    const candidates = (byToken.get(transaction.token) ?? []).filter((a) => !used.has(a));
    // What arrived here first, the marketplace's own postback before a browser's redirect, the same pid before
    // another: an item an earlier run created for this transaction (its pid, nothing arrived) must not take the
    // place of the attempt whose postback carried another spelling of the pid.
    const samePid = (a: Attempt) => a.pid === transaction.pid;
    const attempt =
      candidates.find((a) => a.postback !== undefined && samePid(a)) ??
      candidates.find((a) => a.postback !== undefined) ??
      candidates.find((a) => arrivedHere(a) && samePid(a)) ??
      candidates.find(arrivedHere) ??
      candidates.find(samePid) ??
      candidates[0];
    if (attempt) {
      used.add(attempt);
      pairs.push({ transaction, attempt, matchedBy: 'token' });
    } else {
      unmatched.push(transaction);
    }
  }
  const leftByPid = groupBy(
    attempts.filter((a) => !used.has(a) && arrivedHere(a) && !listedElsewhere(a)),
    (a) => a.pid,
  );
  const unmatchedByPid = groupBy(unmatched, (t) => t.pid);
  for (const transaction of unmatched) {
    // A row without a pid (the panel's entry link carried none) names no respondent to pair by.
    if (transaction.pid === '') {
      pairs.push({ transaction });
      continue;
    }
    const entered = earliestEntry(transaction);
    const attemptsOfPid = (leftByPid.get(transaction.pid) ?? []).filter((a) => clickCouldBeOf(a, entered));
    const attempt = attemptsOfPid[0];
    if (attempt && attemptsOfPid.length === 1 && unmatchedByPid.get(transaction.pid)?.length === 1) {
      used.add(attempt);
      pairs.push({ transaction, attempt, matchedBy: 'pid' });
    } else {
      pairs.push({ transaction });
    }
  }
  for (const attempt of attempts) if (!used.has(attempt)) pairs.push({ attempt });
  return pairs;
}

/**
 * How far from a click a price change may fall and either price still count: the redirect sync sees a change up
 * to its period (and its retries) late, and a respondent who clicked in just before a change may be paid either.
 */
export const PRICE_CHANGE_MARGIN_MS = 3_600_000;

/**
 * The prices a transaction clicked in at `clicked` may carry: those in force within `PRICE_CHANGE_MARGIN_MS` of
 * it, the one in force at the click first. Without a history, the survey's price as known; undefined (not
 * checked) for a click before any price known.
 */
export function pricesAt(
  history: SurveyWindow['cpiHistory'],
  expectedCpi: string | undefined,
  clicked: string,
): readonly string[] | undefined {
  if (!history || history.length === 0) return expectedCpi === undefined ? undefined : [expectedCpi];
  const at = Date.parse(clicked);
  const start = (since: string | undefined) =>
    since === undefined
      ? Number.POSITIVE_INFINITY
      : since === ''
        ? Number.NEGATIVE_INFINITY
        : Date.parse(since);
  const near = history.filter(
    (entry, i) =>
      start(entry.since) <= at + PRICE_CHANGE_MARGIN_MS &&
      start(history[i + 1]?.since) > at - PRICE_CHANGE_MARGIN_MS,
  );
  // The price in force at the click itself first: what an unpaid or reversed complete was worth. The others within
  // the margin only widen what a row may carry without being a mismatch.
  const inForce = near.findLast((entry) => start(entry.since) <= at);
  const prices = [...(inForce ? [inForce] : []), ...near].map((entry) => entry.cpi);
  return prices.length > 0 ? [...new Set(prices)] : undefined;
}

/** No price when the one in force (the first) is 0; else the prices but 0. */
function withoutZero(prices: string | readonly string[] | undefined): string | readonly string[] | undefined {
  const all = typeof prices === 'string' ? [prices] : (prices ?? []);
  if (all.length === 0 || sameAmount(all[0] as string, '0')) return undefined;
  return all.filter((p) => !sameAmount(p, '0'));
}

/** `prices` (the one in force first), and after them any of `others` not among them; undefined stays unchecked. */
function widenedBy(
  prices: string | readonly string[] | undefined,
  others: readonly (string | readonly string[] | undefined)[],
): string | readonly string[] | undefined {
  const list = (p: string | readonly string[] | undefined) => (typeof p === 'string' ? [p] : (p ?? []));
  const more = others.flatMap(list).filter((price) => !list(prices).includes(price));
  return prices === undefined || more.length === 0 ? prices : [...new Set([...list(prices), ...more])];
}

/** The verdict for one attempt, from what each side says; `expectedCpi`, the price or prices it may carry. */
export function classify(
  transaction: Transaction | undefined,
  ledgerAttempt: Attempt | undefined,
  expectedCpi?: string | readonly string[],
  {
    listingGone = false,
  }: {
    /**
     * Without a transaction: the row an earlier run judged an attempt that arrived here by is listed no more (not
     * another attempt's row it was paired with by pid, listed still).
     */
    listingGone?: boolean;
  } = {},
): { kind: VerdictKind; detail: Record<string, string | boolean> } {
  // An item reconciliation created for a transaction this receiver never heard of is not an attempt seen here.
  const attempt =
    ledgerAttempt && (ledgerAttempt.redirect || ledgerAttempt.postback) ? ledgerAttempt : undefined;
  const postback = attempt?.postback?.outcome;
  const redirect = attempt?.redirect?.outcome;
  const evidence =
    postback === 'success' ? 'postback' : !postback && redirect === 'success' ? 'redirect' : undefined;
  /** Whether the marketplace's server reported `outcome` at all: its first postback, or a later one. */
  const postbackSaid = (outcome: Outcome) =>
    attempt?.postback?.sightings.some((sighting) => sighting.outcome === outcome) ?? false;
  const here: Record<string, string | boolean> = {
    postback: postback ?? 'none',
    redirect: redirect ?? 'none',
    ...(attempt?.conflict ? { conflict: true } : {}),
  };
  /**
   * A later postback of another outcome is the marketplace correcting its own (a status flipped after the fact):
   * where the transaction list agrees with the correction, the verdict follows them both and says so.
   */
  const corrected = (outcome: Outcome): Record<string, string> =>
    postback !== undefined && postback !== outcome && postbackSaid(outcome)
      ? { postbackCorrectedTo: outcome }
      : {};
  // The marketplace's server reported a fail, then a success: its latest word a signed complete (the panel may have
  // credited it). Where the transaction list does not show it paid, one to chase, as a success first would be.
  const laterSuccess = postback === 'fail' && postbackSaid('success');
  // A success redirect the fail postback contradicts: only a browser claims a complete, and neither the
  // marketplace's server nor (below) its transaction list agrees. Visible, never money.
  const contradicted = redirect === 'success' && postback === 'fail';
  // The survey's price at the click: what a complete that goes unpaid or is reversed was worth.
  const price = typeof expectedCpi === 'string' ? expectedCpi : expectedCpi?.[0];
  const worth: Record<string, string> = price ? { claimedCpi: price } : {};
  // What a reversal took, so finance can add up what was reversed, and the same on every run after: the price it
  // was reversed at before; else the price an earlier run saw on the row while it was a complete earning it (what
  // owed or pending counted); else the complete's own price while it still shows one (a reversed row usually shows
  // 0, a re-filed one another status's); else the survey's price at the click.
  // (Worked out only for a reversal: most attempts agree, and a run judges every attempt of its window.)
  const priced = (cpi: string | undefined) => (cpi === undefined || sameAmount(cpi, '0') ? undefined : cpi);
  const judgedBefore = ledgerAttempt?.reconciliation;
  const listedBefore = judgedBefore?.marketplace;
  const reversed = (): Record<string, string> => {
    const reversedBefore =
      judgedBefore?.verdict === 'invalidated' ? judgedBefore.detail.reversedCpi : undefined;
    const earnedBefore =
      listedBefore?.status === 'Completed' && listedBefore.verifyToken?.toLowerCase() !== 'invalid'
        ? priced(listedBefore.cpi)
        : undefined;
    const reversedPrice =
      (typeof reversedBefore === 'string' ? reversedBefore : undefined) ??
      earnedBefore ??
      (transaction?.status === 'Completed' ? priced(transaction.cpi) : undefined) ??
      price;
    return reversedPrice ? { reversedCpi: reversedPrice } : {};
  };
  // A later run that finds a row listed as a complete under another status, or finds it no more, found a reversal.
  const listedComplete = () => listedAsComplete(ledgerAttempt);
  if (!transaction) {
    // A signed complete the marketplace does not list (or lists no more): one to chase.
    if (evidence === 'postback' || laterSuccess)
      return {
        kind: 'complete_not_paid',
        detail: {
          ...here,
          ...corrected('success'),
          evidence: 'postback',
          marketplaceStatus: 'missing',
          ...worth,
        },
      };
    // A complete the marketplace listed and lists no more, nothing here to chase it by (no signed complete: the item
    // a run made for its row, or a browser's redirect): the money owed or pending counted for it is gone, so finance
    // sees it reversed rather than the figure shrinking unexplained. Not an attempt whose earlier listing was another
    // attempt's row, paired by pid while its own was not listed, and listed still (`listingGone`).
    if ((!attempt || listingGone) && listedComplete())
      return {
        kind: 'invalidated',
        detail: { ...here, marketplaceStatus: 'missing', receivedHere: evidence ?? 'nothing', ...reversed() },
      };
    // A browser's success claim with nothing behind it: anyone holding the static success URL can send one.
    if (evidence === 'redirect')
      return { kind: 'unverified_claim', detail: { ...here, evidence, marketplaceStatus: 'missing' } };
    if (contradicted)
      return { kind: 'contradicted_claim', detail: { ...here, marketplaceStatus: 'missing' } };
    return { kind: 'not_in_marketplace', detail: here };
  }
  const status = transaction.status;
  const marketplace = { marketplaceStatus: status, verifyToken: transaction.verifyToken ?? 'none' };
  if (status === 'Completed') {
    if (transaction.verifyToken?.toLowerCase() === 'invalid') {
      return {
        kind: 'invalidated',
        detail: { ...here, ...marketplace, receivedHere: evidence ?? 'nothing', ...reversed() },
      };
    }
    // A review this product does not know (`Rejected`, `Approved`): whether the complete is paid cannot be told, so
    // it is counted in no owed or pending figure and listed as money for finance to look at, as an unknown status.
    if (reviewOf(transaction) === 'unknown')
      return {
        kind: 'unknown_status',
        detail: { ...here, ...marketplace, cpi: transaction.cpi, ...(evidence ? { evidence } : {}) },
      };
    const expected = typeof expectedCpi === 'string' ? [expectedCpi] : (expectedCpi ?? []);
    const offPrice = expected.length > 0 && !expected.some((cpi) => sameAmount(transaction.cpi, cpi));
    if (postback !== 'success' && !postbackSaid('success')) {
      return {
        kind: 'complete_not_received',
        detail: {
          ...here,
          ...marketplace,
          successRedirect: redirect === 'success',
          attemptHere: attempt !== undefined,
          // Listed at another price than the survey's at the click: a complete paid short is short whether or not
          // its postback reached this side (finance adds it to what was underpaid).
          ...(offPrice ? { expectedCpi: expected.join(' or ') } : {}),
        },
      };
    }
    const correction = corrected('success');
    if (offPrice) {
      return {
        kind: 'cpi_mismatch',
        detail: {
          ...here,
          ...correction,
          ...marketplace,
          expectedCpi: expected.join(' or '),
          cpi: transaction.cpi,
        },
      };
    }
    return { kind: 'matched', detail: { ...here, ...correction, ...marketplace } };
  }
  // A status this product does not know (a new one, an "adjusted" code): whether it is paid cannot be told, so it
  // is counted in no owed figure and listed as money for finance to look at, whatever arrived here.
  if (!outcomeOfStatus(status))
    return {
      kind: 'unknown_status',
      detail: { ...here, ...marketplace, cpi: transaction.cpi, ...(evidence ? { evidence } : {}) },
    };
  // A complete the buyer rejected and the marketplace then re-filed under another status ("adjusted to
  // terminate"): a reversal, as when the row stays Completed (`reversedCpi` as there). Whatever arrived here, once
  // this product has listed the row as a complete (the owed figure counted it) or judged it reversed before.
  if (
    (evidence || laterSuccess || listedComplete()) &&
    transaction.verifyToken?.toLowerCase() === 'invalid'
  ) {
    return {
      kind: 'invalidated',
      detail: { ...here, ...marketplace, receivedHere: evidence ?? 'nothing', ...reversed() },
    };
  }
  // The marketplace's server reported a success, then corrected it to a fail the transaction list agrees with: a
  // complete reversed (the panel may have credited it), not one to chase.
  if (evidence === 'postback' && postbackSaid('fail'))
    return {
      kind: 'invalidated',
      detail: { ...here, ...corrected('fail'), ...marketplace, receivedHere: 'postback', ...reversed() },
    };
  // A row this product listed as a complete, now under another status without the buyer's Invalid (statuses
  // change after the fact: "adjusted to terminate"): a reversal, whatever arrived here. Only when the listing
  // was this row's (its click the same): an attempt paired by pid with another attempt's row while its own was not
  // listed yet kept that row's listing.
  const listedClick = listedBefore?.clickedAt ?? judgedBefore?.detail.clickedAt;
  if (listedComplete() && listedClick !== undefined && listedClick === filedAt(transaction))
    return {
      kind: 'invalidated',
      detail: { ...here, ...marketplace, receivedHere: evidence ?? 'nothing', ...reversed() },
    };
  if (evidence === 'postback' || laterSuccess)
    return {
      kind: 'complete_not_paid',
      detail: { ...here, ...corrected('success'), ...marketplace, evidence: 'postback', ...worth },
    };
  // A browser's success claim the marketplace files under another status: anyone holding the static success URL
  // (the respondent who was just terminated, a link-preview bot) can send one. A claim, never money.
  if (evidence === 'redirect' || contradicted)
    return {
      kind: 'contradicted_claim',
      detail: { ...here, ...marketplace, ...(evidence ? { evidence } : {}) },
    };
  if (!attempt) return { kind: 'not_received', detail: { ...here, ...marketplace } };
  const outcome = outcomeOfStatus(status);
  if (outcome && redirect && redirect !== outcome) {
    return { kind: 'status_mismatch', detail: { ...here, ...marketplace, expectedRedirect: outcome } };
  }
  return { kind: 'matched', detail: { ...here, ...marketplace } };
}

function viewOf(t: Transaction): MarketplaceView {
  return {
    status: t.status,
    ...(t.verifyToken ? { verifyToken: t.verifyToken } : {}),
    cpi: t.cpi,
    // The time the transaction is filed under (its click, else its start or completion): what places its item.
    ...(filedAt(t) ? { clickedAt: filedAt(t) } : {}),
    ...(t.completedAt ? { completedAt: t.completedAt.utc } : {}),
  };
}

/**
 * A discrepancy of the day left for a later run (too recent to judge, or a hit overtook the run's write), with the
 * attempt it concerns when there is one here.
 */
export interface Awaiting {
  readonly attempt?: Attempt;
}

/**
 * A day's figures from the verdicts of the day's attempts and the window's transactions. An attempt awaiting its
 * judgement is counted here all the same (it arrived: a signed complete is a complete here), under the verdict it
 * carries from the run before if any (the one finance lists meanwhile), so the day's figures and its discrepancy
 * list never contradict each other; a success redirect alone awaiting is not a complete here (a claim until judged).
 */
export function summarize(
  surveyId: string,
  day: string,
  verdicts: readonly AttemptVerdict[],
  transactions: readonly Transaction[],
  waiting: readonly Awaiting[],
  copies: readonly Transaction[] = [],
): DaySummary {
  const judged: { kind?: VerdictKind; attempt?: Attempt; corrected?: string | boolean }[] = [];
  for (const v of verdicts)
    if (v.verdict.day === day)
      judged.push({
        kind: v.verdict.kind,
        attempt: v.attempt,
        corrected: v.verdict.detail.postbackCorrectedTo,
      });
  // Awaiting: the verdict it carries for this day from the run before, if any (none for one never judged).
  const held = waiting.map(({ attempt }) => {
    const stored = attempt?.reconciliation;
    const ofThisDay = stored && stored.day === day;
    const kind = ofThisDay && isVerdictKind(stored.verdict) ? stored.verdict : undefined;
    return { kind, attempt, corrected: ofThisDay ? stored.detail.postbackCorrectedTo : undefined };
  });
  const ofDay = [...judged, ...held];
  const dayTransactions = transactions.filter(filedOn(day));
  const byStatus: Record<string, number> = {};
  let completes = 0;
  const valid: Transaction[] = [];
  const invalid: Transaction[] = [];
  const pending: Transaction[] = [];
  for (const t of dayTransactions) {
    byStatus[t.status] = (byStatus[t.status] ?? 0) + 1;
    if (t.status !== 'Completed') continue;
    completes++;
    // A review this product does not know is in none of them (its `unknown_status` verdict shows it).
    const review = reviewOf(t);
    if (review !== 'unknown') (review === 'valid' ? valid : review === 'invalid' ? invalid : pending).push(t);
  }
  const counts: Partial<Record<VerdictKind, number>> = {};
  for (const { kind } of ofDay) if (kind) counts[kind] = (counts[kind] ?? 0) + 1;
  const arrived = ofDay.filter((v) => v.attempt?.redirect !== undefined || v.attempt?.postback !== undefined);
  const attempts = arrived.map((v) => v.attempt as Attempt);
  // A success postback that came after a fail one, where the list says Completed, is a complete received here
  // (verdict-rules' `postbackCorrectedTo`), whatever the standing outcome says.
  const postbackComplete = (v: (typeof arrived)[number]) =>
    v.attempt?.complete === 'postback-confirmed' || v.corrected === 'success';
  // A browser's success claim nothing backs is not a complete here: it is counted among the claims (and one not
  // judged yet is not counted as a complete until it is).
  const backed = ofDay
    .filter((v) => v.kind !== undefined && !CLAIM_KINDS.has(v.kind))
    .map((v) => v.attempt)
    .filter((a): a is Attempt => a !== undefined);
  const crossKeyed = [
    ...new Set(
      verdicts
        .filter(
          ({ verdict, attempt, pid, token }) =>
            verdict.day === day &&
            verdict.marketplace !== undefined &&
            attempt !== undefined &&
            (attempt.pid !== pid || attempt.token !== token),
        )
        .map((v) => v.token),
    ),
  ].sort();
  return {
    surveyId,
    day,
    here: {
      attempts: attempts.length,
      postbackCompletes: arrived.filter(postbackComplete).length,
      redirectOnlyCompletes: backed.filter((a) => a.complete === 'redirect-only').length,
      nonCompletes: arrived.filter((v) => v.attempt?.complete === 'none' && !postbackComplete(v)).length,
    },
    marketplace: {
      transactions: dayTransactions.length,
      byStatus,
      completes,
      validCompletes: valid.length,
      pendingCompletes: pending.length,
      invalidCompletes: invalid.length,
      owed: sumAmounts(valid.map((t) => t.cpi)),
      pending: sumAmounts(pending.map((t) => t.cpi)),
    },
    verdicts: counts,
    ...(waiting.length > 0 ? { awaiting: waiting.length } : {}),
    transactionsDigest: transactionsDigest(
      copies.length > 0 ? [...transactions, ...copies] : transactions,
      day,
    ),
    ...(crossKeyed.length > 0
      ? { crossKeyed: { tokens: crossKeyed.slice(0, CROSS_KEYED_KEPT), count: crossKeyed.length } }
      : {}),
  };
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const group = groups.get(key(item));
    if (group) group.push(item);
    else groups.set(key(item), [item]);
  }
  return groups;
}

/** Whether a row is filed under a Pacific day (its click, else its start or creation: `filedAt`); undated rows are not. */
export function filedOn(day: string): (t: Transaction) => boolean {
  const { start, end } = pacificDayRange(day);
  const [from, to] = [start.toISOString(), end.toISOString()];
  return (t) => {
    const filed = filedAt(t);
    return filed !== undefined && filed >= from && filed < to;
  };
}
