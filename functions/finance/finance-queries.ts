/**
 * Finance's three questions over the stored reconciliation: the summary of a period, the discrepancy list
 * (filtered and paginated), and one attempt's whole story. Every read goes through an index, day by day.
 */

import { type FailingSpell, failingSpells } from '../health/health-transition';
import type { FeedAwareLookups } from '../ledger/attempt-lookup';
import type {
  HealthStore,
  LedgerStore,
  ReconciliationStore,
  StoredDaySummary,
  SurveyRegistry,
} from '../ledger/ledger-store';
import { dayProblem, isCalendarDay, pacificDayRange } from '../marketplace/pacific-time';
import type { Attempt } from '../receiving/attempt';
import { identifierProblem } from '../receiving/identifiers';
import { checkedAtReader, REVIEW_HORIZON_DAYS, SCHEDULED_RUN } from '../reconciliation/recheck-policy';
import { CLAIM_KINDS, DISCREPANCY_KINDS, isVerdictKind } from '../reconciliation/verdict-kinds';
import { nextDay, pacificDays } from '../reconciliation/verdict-rules';
import { runBounded, throwIfFailed } from '../shared/bounded-work';
import { badRequest, Rejection } from '../shared/rejection';
import {
  type Discrepancy,
  dayRow,
  discrepancyOf,
  type FinanceReport,
  financeReport,
  type PeriodTotals,
  periodFold,
  type ReconciliationFailure,
  type SurveyDayRow,
} from './finance-report';

/** The longest period one request may cover. */
export const MAX_PERIOD_DAYS = 92;

/** How many days the period of days [from, to] covers (0 or less when `from` is after `to`). */
export const periodDays = (from: string, to: string): number =>
  (Date.parse(to) - Date.parse(from)) / 86_400_000 + 1;

/**
 * The surveys a period's failing spells or failed reconciliations can concern: live ones, and those ended since
 * `days` before it began (a survey's health is closed within a week of its end; its days are reconciled for the
 * review horizon after it, and failed ones again by every run).
 */
const endedSinceFor = (period: { from: string }, days: number) =>
  new Date(pacificDayRange(period.from).start.getTime() - days * 86_400_000).toISOString();
const HEALTH_CLOSED_WITHIN_DAYS = 8;
const RECONCILED_WITHIN_DAYS = REVIEW_HORIZON_DAYS + 33;
/** Up to this many surveys named, a period's summaries are read by key rather than picked out of every survey's. */
export const SURVEYS_READ_BY_KEY = 50;
/**
 * How many days' summaries of every survey are read at once for a period: each day's batch reads go four at a time
 * (document-client.ts), so 32 requests in flight, and at ten thousand surveys eight days' items held at once.
 */
const DAYS_READ_AT_ONCE = 8;
export const MAX_PAGE = 1000;
/** Lambda's answer limit (6 MB) less room for API Gateway's envelope. */
export const MAX_ANSWER_BYTES = 5_800_000;
/**
 * The fewest bytes a survey-day row takes in an answer (a CSV line of a one-digit survey with every figure 0 and no
 * reconciliation time; a JSON row is larger): a period of more rows than the answer's bytes over this cannot be
 * answered by day in either format, and is refused before the rest of its days are read and held.
 */
export const SMALLEST_DAY_ROW_BYTES = 55;
export const DAY_ROWS_AT_MOST = Math.floor(MAX_ANSWER_BYTES / SMALLEST_DAY_ROW_BYTES);

export interface Period {
  readonly from: string;
  readonly to: string;
}

/** Checks a period from user input: two dates, in order, not too long. Throws a 400 naming the problem. */
export function readPeriod(
  from: string | undefined,
  to: string | undefined,
  [fromName, toName]: readonly [string, string] = ['from', 'to'],
): Period {
  for (const [name, value] of [
    [fromName, from],
    [toName, to],
  ] as const) {
    if (!value) throw badRequest(`${name} is missing (a Pacific day, YYYY-MM-DD)`);
    const problem = dayProblem(value);
    if (problem) throw badRequest(`${name} ${problem}`);
  }
  // Counted before any list of days is made: a period of thousands of years is refused, not enumerated.
  const span = periodDays(from as string, to as string);
  if (span < 1) throw badRequest(`${fromName} must not be after ${toName}`);
  if (span > MAX_PERIOD_DAYS) throw badRequest(`a period may cover at most ${MAX_PERIOD_DAYS} days`);
  return { from: from as string, to: to as string };
}

export function readKind(kind: string | undefined): string | undefined {
  if (kind === undefined) return undefined;
  // Given empty (a script's unset variable), it names no kind: refused rather than read as every kind.
  if (kind === '')
    throw badRequest(
      `kind is empty: leave it out for every kind, or name one of ${DISCREPANCY_KINDS.join(', ')}`,
    );
  if (!isVerdictKind(kind) || kind === 'matched') {
    throw badRequest(`kind must be one of ${DISCREPANCY_KINDS.join(', ')}`);
  }
  return kind;
}

interface Cursor {
  /** The day the next page starts in. */
  readonly d: string;
  /** Where in it: after this survey's row of this token (as keyed) and partition key. */
  readonly s?: string;
  readonly t?: string;
  readonly p?: string;
  /** The period, survey and kind it was returned for (`filterOf`). */
  readonly f?: string;
}

/**
 * What a page was asked for, as its cursor carries it: a cursor continues only the list it came from (one of a
 * kind sent with another would start that list where the first had got to, leaving out what comes before).
 */
const filterOf = (
  period: Period,
  surveyId: string | undefined,
  kind: string | undefined,
  found: Period | undefined,
): string =>
  `${period.from}/${period.to}|${surveyId ?? ''}|${kind ?? ''}${found ? `|${found.from}/${found.to}` : ''}`;

/** Whether a discrepancy was found (`since`: its verdict took the kind it has now) within these Pacific days. */
export function foundWithin(found: Period): (discrepancy: Discrepancy) => boolean {
  const [from, to] = [
    pacificDayRange(found.from).start.toISOString(),
    pacificDayRange(found.to).end.toISOString(),
  ];
  return (discrepancy) => discrepancy.since >= from && discrepancy.since < to;
}

/** The store pages one request reads at most while a `found` filter leaves rows out: the cursor goes on from there. */
const FILTERED_PAGES_PER_REQUEST = 40;

/** DynamoDB's bounds on a key's value, in bytes of UTF-8: a sort key's 1,024, a partition key's 2,048. */
const within = (value: unknown, bytes: number): value is string =>
  typeof value === 'string' && value.length > 0 && Buffer.byteLength(value, 'utf8') <= bytes;

const encodeCursor = (cursor: Cursor) => Buffer.from(JSON.stringify(cursor)).toString('base64url');
/**
 * Reads a cursor back: a day of the period and, within it, a position of the list asked for (a survey id as this
 * product keys one, the one asked for if any; a token and a partition key within DynamoDB's bounds). Anything
 * else, a cursor of another filter or of the release before among them, is refused as a 400 (the list starts
 * again), never passed on to fail as a 500.
 */
function decodeCursor(value: string, period: Period, surveyId: string | undefined, filter: string): Cursor {
  try {
    const cursor = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as Cursor & { k?: unknown };
    const positioned = cursor?.s !== undefined || cursor?.t !== undefined || cursor?.p !== undefined;
    if (
      cursor &&
      typeof cursor === 'object' &&
      cursor.f === filter &&
      cursor.k === undefined &&
      typeof cursor.d === 'string' &&
      isCalendarDay(cursor.d) &&
      cursor.d >= period.from &&
      cursor.d <= period.to &&
      (!positioned ||
        (typeof cursor.s === 'string' &&
          identifierProblem('surveyId', cursor.s) === undefined &&
          (surveyId === undefined || cursor.s === surveyId) &&
          within(cursor.t, 1024) &&
          within(cursor.p, 2048)))
    )
      return {
        d: cursor.d,
        ...(positioned ? { s: cursor.s, t: cursor.t, p: cursor.p } : {}),
        f: filter,
      };
  } catch {
    // fall through
  }
  throw badRequest('cursor is not one this API returned for this period, survey and kind');
}

export function finance(deps: {
  /** With the attempt feed, its look-ups made whole (attempt-lookup.ts), saying when its consumer is behind. */
  readonly attempts: LedgerStore & Partial<Pick<FeedAwareLookups, 'feedBehindSince'>>;
  readonly results: ReconciliationStore;
  /** The survey health history; without it no report names failing surveys. */
  readonly health?: {
    readonly registry: Pick<SurveyRegistry, 'surveyIds' | 'many'>;
    readonly store: Pick<HealthStore, 'getMany'>;
  };
  readonly now?: () => Date;
}) {
  const now = deps.now ?? (() => new Date());

  /**
   * The surveys failing at any time in the period, from each survey's one health item (its history and current
   * state): the registered survey ids from the keys-only index, then one BatchGet per 100 surveys.
   */
  async function failingSurveys(period: Period, surveyIds?: readonly string[]): Promise<FailingSpell[]> {
    if (!deps.health) return [];
    const ids =
      surveyIds && surveyIds.length > 0
        ? surveyIds
        : await deps.health.registry.surveyIds({
            endedSince: endedSinceFor(period, HEALTH_CLOSED_WITHIN_DAYS),
          });
    const records = await deps.health.store.getMany(ids);
    const start = pacificDayRange(period.from).start;
    const end = pacificDayRange(period.to).end;
    return [...records.values()]
      .flatMap((record) => failingSpells(record, start, end))
      .sort((a, b) => Number(a.surveyId) - Number(b.surveyId) || (a.from ?? '').localeCompare(b.from ?? ''));
  }

  /**
   * Surveys whose last reconciliation of days in the period failed (the marketplace down or refusing, a row that
   * cannot be read): those days' figures are as an earlier run left them, or missing, until a run succeeds.
   */
  async function failingReconciliations(
    period: Period,
    surveyIds?: readonly string[],
  ): Promise<ReconciliationFailure[]> {
    const ids =
      surveyIds && surveyIds.length > 0
        ? surveyIds
        : ((await deps.health?.registry.surveyIds({
            endedSince: endedSinceFor(period, RECONCILED_WITHIN_DAYS),
          })) ?? []);
    const states = await deps.results.surveyStates(ids);
    return states
      .map((state) => {
        // Days whose listing answered no rows where it had listed some, held until a later listing confirms it
        // (past the window, in a run that otherwise went through): their figures are as before the answer.
        const held = Object.entries(state.emptyDays ?? {});
        const heldAt = held.map(([, at]) => at).sort();
        return {
          surveyId: state.surveyId,
          days: [...new Set([...state.failedDays, ...held.map(([day]) => day)])]
            .filter((day) => day >= period.from && day <= period.to)
            .sort(),
          error:
            state.lastError ??
            (held.length > 0
              ? 'the marketplace listed no transactions for days it had listed rows for: held until a later listing says so too'
              : ''),
          failingSince: state.failingSince ?? state.lastErrorAt ?? heldAt[0] ?? '',
          lastFailedAt: state.lastErrorAt ?? heldAt.at(-1) ?? '',
        };
      })
      .filter((failure) => failure.days.length > 0)
      .sort((a, b) => Number(a.surveyId) - Number(b.surveyId));
  }

  /**
   * Hands the period's survey-day rows to `take`, a day (or a named survey) at a time, a few at once: what is held
   * at any moment is the days being read, not the period. A few surveys named are read by key (their days'
   * summaries), not picked out of every survey's: a supplier of thousands of surveys would read them all to show one.
   */
  async function eachSummaryRow(
    period: Period,
    surveyIds: readonly string[] | undefined,
    take: (row: SurveyDayRow) => void,
  ): Promise<void> {
    const wanted = surveyIds && surveyIds.length > 0 ? new Set(surveyIds) : undefined;
    const days = pacificDays(period.from, period.to);
    const byKey = wanted !== undefined && wanted.size <= SURVEYS_READ_BY_KEY;
    const reads: (() => Promise<StoredDaySummary[]>)[] = byKey
      ? [...wanted].map((surveyId) => () => deps.results.summariesOf(surveyId, days))
      : days.map((day) => () => deps.results.daySummaries(day));
    // Read beside the summaries, not before them; each read waits for it only to shape its rows.
    const lastRun = deps.results.finishedRun(SCHEDULED_RUN).then(checkedAtReader);
    lastRun.catch(() => undefined);
    // Once one read fails (or `take` refuses), none more starts: the answer is an error whatever they find.
    let failed = false;
    const report = await runBounded(
      reads.map((read) => async () => {
        const [summaries, checkedAt] = await Promise.all([read(), lastRun]);
        for (const summary of summaries)
          if (!wanted || wanted.has(summary.surveyId)) take(dayRow(summary, checkedAt(summary)));
      }),
      {
        // A few surveys named are read all at once (a few thousand summaries at most); every survey's, a few days at once.
        concurrency: byKey ? reads.length : DAYS_READ_AT_ONCE,
        stopWhen: () => failed,
        onSettled: (result) => {
          if (result.status === 'failed') failed = true;
        },
      },
    );
    throwIfFailed(report);
    await lastRun;
  }

  /**
   * The period's survey-day rows, by day and survey. With `atMost`, a period of more rows than that is refused
   * (a 400 naming what to ask for instead) as soon as the days read show it, before the rest are read.
   */
  async function summaryRows(
    period: Period,
    surveyIds?: readonly string[],
    options: { atMost?: number } = {},
  ): Promise<SurveyDayRow[]> {
    const rows: SurveyDayRow[] = [];
    await eachSummaryRow(period, surveyIds, (row) => {
      rows.push(row);
      if (options.atMost !== undefined && rows.length > options.atMost)
        throw badRequest(
          `the summary by day of this period has more than ${options.atMost} survey-day rows, more than an answer can carry: ask for fewer days or surveys, or for detail=surveys or detail=totals`,
        );
    });
    return rows.sort((a, b) => a.day.localeCompare(b.day) || Number(a.surveyId) - Number(b.surveyId));
  }

  /**
   * The period's figures per survey and in all, added up as the days are read (`periodFold`): at ten thousand
   * surveys a month is 300,000 rows, about 400 MB held at once against the finance function's 512.
   */
  async function periodTotals(period: Period, surveyIds?: readonly string[]): Promise<PeriodTotals> {
    const fold = periodFold();
    await eachSummaryRow(period, surveyIds, (row) => fold.add(row));
    return fold.totals();
  }

  async function allDiscrepancies(period: Period, surveyIds?: readonly string[]): Promise<Attempt[]> {
    const days = pacificDays(period.from, period.to);
    const lists = await Promise.all(
      days.flatMap((day) =>
        surveyIds && surveyIds.length > 0
          ? surveyIds.map((surveyId) => deps.results.discrepancies(day, surveyId))
          : [deps.results.discrepancies(day)],
      ),
    );
    return lists.flat();
  }

  /** Which of the surveys named have no registration here (a mistyped id answers zeros, not an error). */
  async function unregistered(surveyIds: readonly string[]): Promise<string[]> {
    if (!deps.health || surveyIds.length === 0) return [];
    const known = new Set(
      (await deps.health.registry.many(surveyIds)).filter((r) => !r.neverApplied).map((r) => r.surveyId),
    );
    return [...new Set(surveyIds)].filter((surveyId) => !known.has(surveyId));
  }

  return {
    summaryRows,
    periodTotals,
    failingSurveys,
    failingReconciliations,
    unregistered,

    /** The whole report of a period (all discrepancies): what the CLI renders as JSON, CSV or HTML. */
    async report(period: Period, asked?: readonly string[]): Promise<FinanceReport> {
      // A survey named twice is one survey: its discrepancies counted once.
      const surveyIds = asked && [...new Set(asked)];
      const [rows, discrepancies, failing, unreconciled] = await Promise.all([
        summaryRows(period, surveyIds),
        allDiscrepancies(period, surveyIds),
        failingSurveys(period, surveyIds),
        failingReconciliations(period, surveyIds),
      ]);
      return financeReport(period.from, period.to, rows, discrepancies, now(), failing, unreconciled);
    },

    /**
     * One page of discrepancies, oldest day first; `nextCursor` continues it. Unverified success claims are left
     * out unless asked for by kind: anyone can send them, and they must not bury what finance has to chase.
     */
    async discrepancyPage(
      period: Period,
      options: {
        surveyId?: string;
        kind?: string;
        limit: number;
        cursor?: string;
        /** Only those whose verdict took its kind within these Pacific days (`since`): what was found then. */
        found?: Period;
      },
    ): Promise<{ items: Discrepancy[]; nextCursor?: string }> {
      const limit = Math.min(Math.max(1, options.limit), MAX_PAGE);
      const filter = filterOf(period, options.surveyId, options.kind, options.found);
      const foundIn = options.found ? foundWithin(options.found) : undefined;
      let pagesRead = 0;
      const tagged = { f: filter };
      let cursor: Cursor | undefined =
        options.cursor !== undefined
          ? decodeCursor(options.cursor, period, options.surveyId, filter)
          : { d: period.from, ...tagged };
      const items: Discrepancy[] = [];
      while (cursor && items.length < limit && (!foundIn || pagesRead++ < FILTERED_PAGES_PER_REQUEST)) {
        const page = await deps.results.discrepancyPage(cursor.d, {
          ...(options.surveyId ? { surveyId: options.surveyId } : {}),
          ...(options.kind ? { kind: options.kind } : { excludeKinds: [...CLAIM_KINDS] }),
          limit: limit - items.length,
          ...(cursor.s && cursor.t && cursor.p
            ? { after: { surveyId: cursor.s, token: cursor.t, pk: cursor.p } }
            : {}),
        });
        items.push(
          ...page.attempts
            .map(discrepancyOf)
            .filter((d): d is Discrepancy => d !== undefined && (!foundIn || foundIn(d))),
        );
        if (page.next)
          cursor = { d: cursor.d, s: page.next.surveyId, t: page.next.token, p: page.next.pk, ...tagged };
        else cursor = cursor.d < period.to ? { d: nextDay(cursor.d), ...tagged } : undefined;
      }
      return { items, ...(cursor ? { nextCursor: encodeCursor(cursor) } : {}) };
    },

    /**
     * One respondent's attempts at a survey by pid (those first seen in the period, when one is given), or the
     * attempt with a token (looked for among attempts first seen in the period, default the last 31 days).
     */
    async attempts(
      surveyId: string,
      by: { pid?: string; token?: string },
      period?: Period,
    ): Promise<Attempt[]> {
      if (by.pid !== undefined) {
        const found = await deps.attempts.attemptsOf(surveyId, by.pid);
        return found.filter((a) => (!by.token || a.token === by.token) && (!period || seenIn(a, period)));
      }
      if (!by.token) throw badRequest('give pid or token');
      // Attempts first seen since the attempt feed fell behind are in neither the index nor the feed: none found is
      // said so, not "no such attempt" (by pid they are found).
      const behind = await deps.attempts.feedBehindSince?.();
      const to = period ? pacificDayRange(period.to).end : new Date(now().getTime() + 86_400_000);
      const from = period
        ? pacificDayRange(nextDay(period.from, -1)).start
        : new Date(now().getTime() - 31 * 86_400_000);
      // Every attempt of the token: one under another pid (the same respondent spelt otherwise, or a pid that
      // claims a token not its own) shows beside the one reconciliation judged.
      const found = await deps.attempts.attemptsByToken(surveyId, by.token, from, to);
      if (found.length === 0 && behind !== undefined)
        throw new Rejection(
          404,
          'not_found',
          `no attempt found by this token; the attempt feed is behind (its consumer has noted nothing since ${behind}), so one first seen since is not found by token until it catches up: look it up by pid`,
        );
      return found;
    },
  };
}

export type Finance = ReturnType<typeof finance>;

/**
 * Whether an attempt belongs to a period of Pacific days: first seen in it, or, an item made for a transaction
 * never seen here, clicked in it; or judged on one of its days (its click's day: a postback after midnight, or days
 * late, is listed among that day's discrepancies, and found by the same period).
 */
function seenIn(attempt: Attempt, period: Period): boolean {
  const day = attempt.reconciliation?.day;
  if (day !== undefined && day >= period.from && day <= period.to) return true;
  const at = attempt.firstSeenAt ?? attempt.reconciliation?.marketplace?.clickedAt;
  return (
    at !== undefined &&
    at >= pacificDayRange(period.from).start.toISOString() &&
    at < pacificDayRange(period.to).end.toISOString()
  );
}
