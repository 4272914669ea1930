/**
 * What the marketplace's supplier API returns, read tolerantly and validated at run time: amounts as string
 * or number, missing optional fields, extra fields ignored, Pacific-time strings parsed to UTC with the raw
 * string kept. A row that cannot be read is reported with the reason; it is never turned into a zero.
 *
 * Over 300 lines on purpose: one schema per record the API returns (surveys, transactions, redirect settings), kept
 * together because they share the tolerant readers and the row-error reporting.
 */
import * as z from 'zod/mini';
import type { Outcome } from '../receiving/outcome';
import { parseAmount } from '../shared/money';
import { describeIssues } from '../shared/validation';
import { type PacificTime, pacificDay, parsePacificTime } from './pacific-time';

/** Transaction statuses as the transaction list spells them (with spaces). */
export const TRANSACTION_STATUSES = [
  'Completed',
  'Failed',
  'Over Quota',
  'Quality Termination',
  'Pre Survey Termination',
  'Pre Survey Over Quota',
  'Pre Survey Quality Termination',
  'Pre Survey DNC',
  'Start Survey DNC',
] as const;
export type TransactionStatus = (typeof TRANSACTION_STATUSES)[number];

/**
 * The outcome (and so the redirect) each status corresponds to. Terminations after the screener are `fail`;
 * pre-survey terminations `termination`; did-not-complete statuses `fail`.
 */
export const OUTCOME_OF_STATUS: Readonly<Record<TransactionStatus, Outcome>> = {
  Completed: 'success',
  Failed: 'fail',
  'Over Quota': 'overquota',
  'Pre Survey Over Quota': 'overquota',
  'Quality Termination': 'quality',
  'Pre Survey Quality Termination': 'quality',
  'Pre Survey Termination': 'termination',
  'Pre Survey DNC': 'fail',
  'Start Survey DNC': 'fail',
};

/** A status's letters alone, lower case: `Over Quota`, `OverQuota`, `over_quota ` and `OVER-QUOTA` are one key. */
const statusKey = (status: string) => status.toLowerCase().replace(/[^a-z]/g, '');
const CANONICAL_STATUS = new Map<string, TransactionStatus>(
  TRANSACTION_STATUSES.map((s) => [statusKey(s), s]),
);

/**
 * A status as this product spells it: a known one however the list cased or spaced it (the metadata endpoint
 * writes them without spaces), anything else as it was, trimmed. A complete spelled `completed` is still a
 * complete: read exactly, it would drop out of what is owed and turn into a false discrepancy.
 */
export function canonicalStatus(status: string): string {
  return CANONICAL_STATUS.get(statusKey(status)) ?? status.trim();
}

/** The outcome of a status as the marketplace spells it, or undefined for a status this product does not know. */
export function outcomeOfStatus(status: string): Outcome | undefined {
  return (OUTCOME_OF_STATUS as Record<string, Outcome>)[canonicalStatus(status)];
}

export type Parsed<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly problem: string; readonly placed?: Placement };

/** Where an unreadable transaction row belongs, when its token and a time still read: what it can hold back. */
export interface Placement {
  readonly token: string;
  readonly pid: string;
  /** UTC instant it is filed under (as `filedAt`). */
  readonly filedAt: string;
}

const amount = z.pipe(
  z.unknown(),
  z.transform((value, ctx) => {
    const parsed = parseAmount(value);
    if (parsed === undefined) {
      ctx.issues.push({
        code: 'custom',
        message: `is not an amount: ${JSON.stringify(value)?.slice(0, 40)}`,
        input: value,
      });
      return z.NEVER;
    }
    return parsed;
  }),
);

/**
 * Whether a time field says no time: absent, empty, or a stand-in that names no instant (`N/A`, `-`, `null`, a
 * zero date such as `00/00/0000, 12:00:00 am`): a date without a number other than 0 names no day. Read as none, the
 * row is filed by its next time (or the day a listing of it alone shows it) instead of failing its survey.
 */
function saysNoTime(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value !== 'string') return false;
  // The date's numbers come first in either form the marketplace writes (MM/DD/YYYY, YYYY-MM-DD).
  return (value.match(/\d+/g) ?? []).slice(0, 3).every((n) => /^0+$/.test(n));
}

/** A Pacific-time field: none (`saysNoTime`) is undefined; anything else must parse. */
const pacificTime = z.pipe(
  z.optional(z.nullable(z.string())),
  z.transform((value: string | null | undefined, ctx): PacificTime | undefined => {
    if (value === null || value === undefined || saysNoTime(value)) return undefined;
    const parsed = parsePacificTime(value);
    if (!parsed) {
      ctx.issues.push({
        code: 'custom',
        message: `is not a marketplace time: ${JSON.stringify(value.slice(0, 40))}`,
        input: value,
      });
      return z.NEVER;
    }
    return parsed;
  }),
);

const integer = z.union([z.int(), z.pipe(z.string().check(z.regex(/^-?\d+$/)), z.transform(Number))]);
const numberAsText = z.pipe(z.number(), z.transform(String));
/**
 * An id as text: a string, or a number that is a whole one JSON reads exactly. Past 2^53 (or with a fraction or an
 * exponent) the parsed number is not the id written (the client quotes bare long integers before parsing), so the
 * row is unreadable rather than another respondent's.
 */
const text = z.union([
  z.string(),
  z.pipe(z.number().check(z.refine(Number.isSafeInteger, 'is not an exact id')), z.transform(String)),
]);
const optionalText = z.pipe(
  z.optional(z.union([z.string(), numberAsText, z.null()])),
  z.transform((v: string | null | undefined) => v ?? undefined),
);
const nonEmpty = z.string().check(z.minLength(1, 'is empty'));

/** A field nothing is counted or placed by: unreadable, it is left out rather than the whole row. */
const informational = <T extends z.ZodMiniType>(schema: T) => z.catch(z.optional(schema), undefined);

/**
 * A row's pid: empty (or null, or absent) when the panel's entry link carried none. The token still names the
 * attempt, so the row is read and matched by it; a blank pid is never paired by pid (verdict-rules.ts `match`).
 */
const pidText = z.pipe(
  z.optional(z.union([text, z.null()])),
  z.transform((v: string | null | undefined) => v ?? ''),
);

const transactionSchema = z.object({
  token: z.pipe(text, nonEmpty),
  PID: pidText,
  status: z.pipe(z.pipe(z.string(), z.transform(canonicalStatus)), nonEmpty),
  // Checked below: a price matters only on a complete.
  CPI: z.catch(z.optional(amount), undefined),
  verifyToken: optionalText,
  termReason: informational(optionalText),
  ip: informational(optionalText),
  trackId: informational(optionalText),
  surveyUrl: informational(optionalText),
  // Only a fallback for the click: unreadable, it fails the row only when the click is missing (below).
  st_date_time: z.catch(pacificTime, undefined),
  clkDateTime: pacificTime,
  completeDateTime: informational(pacificTime),
  verifiedTknDt: informational(pacificTime),
});

/** One row of getSurveyTransactions. */
export interface Transaction {
  readonly token: string;
  readonly pid: string;
  /** As the marketplace spells it; usually one of TRANSACTION_STATUSES. */
  readonly status: string;
  /** Decimal string, e.g. "1.25"; "0.00" when the attempt earns nothing. */
  readonly cpi: string;
  /** Pending, then Valid or Invalid once the buyer has reviewed the complete. */
  readonly verifyToken?: string | undefined;
  readonly termReason?: string | undefined;
  readonly ip?: string | undefined;
  readonly trackId?: string | undefined;
  readonly surveyUrl?: string | undefined;
  readonly startedAt?: PacificTime | undefined;
  /** When the respondent clicked in: the time the marketplace files the transaction under. */
  readonly clickedAt?: PacificTime | undefined;
  readonly completedAt?: PacificTime | undefined;
  readonly verifiedAt?: PacificTime | undefined;
  /**
   * For a row without a click or start time, an instant (UTC) on the day a listing of that day alone showed it:
   * the day the marketplace created it (`creation-days.ts`), which its completion may be days after.
   */
  readonly createdWithin?: string | undefined;
}

/**
 * The instant the marketplace files a transaction under, in UTC: its click, else its start where that tells the
 * day (`entryTime`), else an instant of the day it was listed under, else its start, else its completion (a row
 * missing them all is still placed, on the day its respondent was there, rather than dropped).
 */
export const filedAt = (t: Transaction): string | undefined =>
  entryTime(t) ?? t.createdWithin ?? t.startedAt?.utc ?? t.completedAt?.utc;

/**
 * How long after the click a start may come: the marketplace's router (its pre-screening) sits between them. A
 * start within this of a Pacific midnight does not tell which day the click, the time the row is filed by, was on.
 */
export const START_AFTER_CLICK_MS = 3_600_000;

/**
 * When a row says its respondent came in, in UTC: its click, else its start when that tells the click's Pacific
 * day (not within `START_AFTER_CLICK_MS` after a midnight); undefined otherwise. A row without one is placed by the
 * listing of a day alone (creation-days.ts).
 */
export const entryTime = (t: Transaction): string | undefined => {
  if (t.clickedAt) return t.clickedAt.utc;
  const started = t.startedAt?.utc;
  return started !== undefined && startTellsDay(started) ? started : undefined;
};

/** Whether a start (UTC) tells its click's Pacific day: not within `START_AFTER_CLICK_MS` after a midnight. */
function startTellsDay(started: string): boolean {
  const at = Date.parse(started);
  return pacificDay(new Date(at)) === pacificDay(new Date(at - START_AFTER_CLICK_MS));
}

/**
 * What the buyer's review of a complete says: the marketplace writes `Pending`, `Valid` or `Invalid` (read in any
 * case); none yet is pending. Anything else (`Rejected`, `Approved`, a new word) is `unknown`: whether it is paid
 * cannot be told, so it is counted in no owed or pending figure and shown (verdict-rules.ts `classify`).
 */
export type Review = 'pending' | 'valid' | 'invalid' | 'unknown';
export function reviewOf(t: Pick<Transaction, 'verifyToken'>): Review {
  const review = t.verifyToken?.trim().toLowerCase();
  if (!review || review === 'pending') return 'pending';
  return review === 'valid' || review === 'invalid' ? review : 'unknown';
}

/**
 * When its respondent came in (`entryTime`), else, for a start that does not tell the click's day, the earliest the
 * click can have been (`START_AFTER_CLICK_MS` before it); undefined when it says neither. What pairing by pid holds
 * an attempt against: a row placed on its day by a listing is paired as one that carries its click.
 */
export const earliestEntry = (t: Transaction): string | undefined =>
  entryTime(t) ??
  (t.startedAt ? new Date(Date.parse(t.startedAt.utc) - START_AFTER_CLICK_MS).toISOString() : undefined);

/** Whether a row says when its respondent came in (a click, or a start that tells its day): what it is filed under. */
export const hasEntryTime = (t: Transaction): boolean => entryTime(t) !== undefined;

/**
 * One row per token (the marketplace's transaction id): a row listed twice (pages that overlap, a list that
 * repeats itself) is counted once. Copies that differ keep the one verified last. Copies verified at the same time,
 * or neither verified, give no sign of which the marketplace holds now (a row changed between two pages of one
 * listing): whatever order they are listed in, the one that earns less is kept (a non-complete or a rejected
 * complete before a complete, the lower price before the higher), so owed counts no complete the marketplace may
 * have taken back; the next listing without the stale copy settles it.
 *
 * A token filed under two Pacific days (the marketplace listing one transaction on each) is the earliest day's:
 * the rule a run that lists one of the days alone can follow too (reconciler.ts asks the earlier day's listing). The
 * later days' copies come back apart, one per day, as `copies`: judged and counted nowhere, part only of what their
 * day's listing shows (its digest).
 */
export function distinctTransactions(rows: readonly Transaction[]): {
  rows: Transaction[];
  duplicates: number;
  copies: Transaction[];
} {
  const firstOf = new Map<string, Transaction>();
  const repeated = new Map<string, Transaction[]>();
  for (const row of rows) {
    const first = firstOf.get(row.token);
    if (!first) firstOf.set(row.token, row);
    else repeated.set(row.token, [...(repeated.get(row.token) ?? [first]), row]);
  }
  // Most listings repeat nothing: their rows as listed.
  if (repeated.size === 0) return { rows: [...firstOf.values()], duplicates: 0, copies: [] };
  const kept: Transaction[] = [];
  const copies: Transaction[] = [];
  for (const [token, first] of firstOf) {
    const all = repeated.get(token);
    if (!all) {
      kept.push(first);
      continue;
    }
    const byDay = new Map<string, Transaction>();
    for (const row of all) {
      const day = filedDay(row) ?? '';
      const other = byDay.get(day);
      if (!other || supersedes(row, other)) byDay.set(day, row);
    }
    // Days in order; a row filed under no day yet (not placed) after them all.
    const [earliest, ...later] = [...byDay.entries()].sort(([a], [b]) =>
      a === '' ? 1 : b === '' ? -1 : a.localeCompare(b),
    );
    if (earliest) kept.push(earliest[1]);
    copies.push(...later.map(([, row]) => row));
  }
  return { rows: kept, duplicates: rows.length - kept.length - copies.length, copies };
}

/** The Pacific day a row is filed under (`filedAt`); undefined when it says none yet. */
export const filedDay = (t: Transaction): string | undefined => {
  const at = filedAt(t);
  return at === undefined ? undefined : pacificDay(new Date(at));
};

/** Whether `row` is kept over `kept`, another copy of its token (`distinctTransactions`). */
function supersedes(row: Transaction, kept: Transaction): boolean {
  const [verified, keptVerified] = [row.verifiedAt?.utc ?? '', kept.verifiedAt?.utc ?? ''];
  if (verified !== keptVerified && !orderUnknown(row.verifiedAt, kept.verifiedAt))
    return verified > keptVerified;
  const [earned, keptEarned] = [earning(row), earning(kept)];
  if (earned !== keptEarned) {
    if (earned === undefined || keptEarned === undefined) return earned === undefined;
    return earned < keptEarned;
  }
  return copyKey(row) < copyKey(kept);
}

/**
 * Whether two verification times do not tell which came first: one of them in the repeated autumn hour (it may be
 * an hour earlier than read, `PacificTime.ambiguous`) and the two within that hour of each other.
 */
function orderUnknown(a: PacificTime | undefined, b: PacificTime | undefined): boolean {
  if (!a || !b || (!a.ambiguous && !b.ambiguous)) return false;
  return Math.abs(Date.parse(a.utc) - Date.parse(b.utc)) <= REPEATED_HOUR_MS;
}
const REPEATED_HOUR_MS = 3_600_000;

/**
 * What a copy earns in millionths, undefined when nothing (not a complete, one the buyer rejected, or one under a
 * review this product does not know).
 */
function earning(t: Transaction): bigint | undefined {
  // A review this product does not know is counted in no owed figure (`reviewOf`): it earns nothing here either.
  if (t.status !== 'Completed' || ['invalid', 'unknown'].includes(reviewOf(t))) return undefined;
  const [whole = '0', fraction = ''] = (parseAmount(t.cpi) ?? '0').split('.');
  return BigInt(whole + fraction.padEnd(6, '0').slice(0, 6));
}

/**
 * A row's facts as text: two readings of one row give the same; the last tie-break between copies, so the
 * listing's order never decides.
 */
export const copyKey = (t: Transaction): string =>
  JSON.stringify([
    t.status,
    t.cpi,
    t.verifyToken ?? '',
    t.clickedAt?.utc ?? '',
    t.startedAt?.utc ?? '',
    t.completedAt?.utc ?? '',
    t.createdWithin ?? '',
    t.pid,
  ]);

/** Any id as text, exact or not: enough to hold a row's token and pid back while the row cannot be read. */
const anyId = z.union([z.string(), numberAsText]);
const placementSchema = z.object({
  token: z.pipe(anyId, nonEmpty),
  PID: z.pipe(
    z.optional(z.union([anyId, z.null()])),
    z.transform((v: string | null | undefined) => v ?? ''),
  ),
});
/** The times a row is filed by, in the order `filedAt` takes them. */
const FILING_FIELDS = ['clkDateTime', 'st_date_time', 'completeDateTime'] as const;

/**
 * The token, pid and filing time of a row that cannot be read whole, when all three read. The time is the one the
 * marketplace files the row by: the first of click, start and completion the row carries at all; if that one does
 * not read, the row has no placement (a later one could put it on another day than its own).
 */
function placementOf(raw: unknown): Placement | undefined {
  const ids = placementSchema.safeParse(raw);
  if (!ids.success) return undefined;
  const row = raw as Record<string, unknown>;
  const field = FILING_FIELDS.find((name) => !saysNoTime(row[name]));
  if (!field) return undefined;
  const filed = pacificTime.safeParse(row[field]);
  if (!filed.success || !filed.data) return undefined;
  // A start without a click that does not tell the click's day (`entryTime`): no day to hold it on.
  if (field === 'st_date_time' && !startTellsDay(filed.data.utc)) return undefined;
  return { token: ids.data.token, pid: ids.data.PID, filedAt: filed.data.utc };
}

/** Field names that would name the currency of a row's amounts (any case, `_` or not). */
const CURRENCY_FIELDS = new Set(['currency', 'currencycode', 'cpicurrency']);

/**
 * A row that names the currency of its amounts (the reference names none: `currency`, `currencyCode`, `cpiCurrency`)
 * as another than US dollars, what this product counts: by an ISO 4217 code (`EUR`) or number (`978`) other than
 * the dollar's (`USD`, `840`). Read as dollars, a price in euros or rupees would be added to the others as if it
 * were one; so the row does not read, and says why. Anything else (`US Dollar`, `$`, `N/A`) is left as it is.
 */
function foreignCurrency(raw: unknown): string | undefined {
  if (raw === null || typeof raw !== 'object') return undefined;
  for (const [field, value] of Object.entries(raw)) {
    if (!CURRENCY_FIELDS.has(field.toLowerCase().replaceAll('_', ''))) continue;
    const code =
      typeof value === 'string' ? value.trim().toUpperCase() : typeof value === 'number' ? String(value) : '';
    const foreign =
      (/^[A-Z]{3}$/.test(code) && code !== 'USD') || (/^\d{1,3}$/.test(code) && Number(code) !== 840);
    if (foreign) return `${field} is ${JSON.stringify(value)}: amounts are counted in US dollars`;
  }
  return undefined;
}

export function parseTransaction(raw: unknown): Parsed<Transaction> {
  const unreadable = (problem: string): Parsed<Transaction> => {
    const placed = placementOf(raw);
    return { ok: false, problem, ...(placed ? { placed } : {}) };
  };
  const parsed = transactionSchema.safeParse(raw);
  if (!parsed.success) return unreadable(describeIssues(parsed.error, { limit: 3, whole: '(row)' }));
  const t = parsed.data;
  // A complete without a readable price (or one in another currency) cannot be counted, nor can a status this
  // product does not know (an "adjusted to complete" is money for finance to look at, and its amount with it); a
  // known status that earns nothing earns nothing whatever its price says.
  const priced = t.status === 'Completed' || !(TRANSACTION_STATUSES as readonly string[]).includes(t.status);
  if (priced && t.CPI === undefined)
    return unreadable(
      `CPI is not an amount: ${JSON.stringify((raw as { CPI?: unknown }).CPI)?.slice(0, 40)}`,
    );
  const foreign = priced ? foreignCurrency(raw) : undefined;
  if (foreign) return unreadable(foreign);
  const started = (raw as { st_date_time?: unknown }).st_date_time;
  if (!t.clkDateTime && !t.st_date_time && typeof started === 'string' && !saysNoTime(started))
    return {
      ok: false,
      problem: `st_date_time is not a marketplace time: ${JSON.stringify(started.slice(0, 40))}`,
    };
  // Every row must be placed in a day: by its click, its start, or at least its completion.
  if (!t.clkDateTime && !t.st_date_time && !t.completeDateTime)
    return {
      ok: false,
      problem: 'has no clkDateTime, st_date_time or completeDateTime to place it in a day',
    };
  return {
    ok: true,
    value: {
      token: t.token,
      pid: t.PID,
      status: t.status,
      cpi: t.CPI ?? '0.00',
      // Trimmed as the status is: `Valid ` read as it came would be neither valid nor invalid (pending for ever).
      verifyToken: t.verifyToken?.trim() || undefined,
      termReason: t.termReason || undefined,
      ip: t.ip,
      trackId: t.trackId,
      surveyUrl: t.surveyUrl,
      startedAt: t.st_date_time,
      clickedAt: t.clkDateTime,
      completedAt: t.completeDateTime,
      verifiedAt: t.verifiedTknDt,
    },
  };
}

const targetingSchema = z.looseObject({
  QuestionId: z.optional(integer),
  QuestionKey: z.optional(z.string()),
  QuestionText: z.optional(z.string()),
  QuestionType: z.optional(z.string()),
  QuestionCategory: z.optional(z.string()),
  Options: z.optional(z.array(z.record(z.string(), z.unknown()))),
});

/**
 * A survey as listed. What this product acts on is its id and price (and, when they read, its created and modified
 * times, which date a price change): every other field is informational, left out when it does not read (a flag
 * sent as 0/1 or "true", a null list, a decimal LOI), rather than making the survey unreadable and its price unseen.
 */
const surveySchema = z.object({
  surveyId: integer,
  surveyName: informational(optionalText),
  N: informational(integer),
  remainingN: informational(integer),
  supCmps: informational(integer),
  isRevShr: informational(z.boolean()),
  LOI: informational(integer),
  IR: informational(integer),
  Country: informational(optionalText),
  CountryCode: informational(optionalText),
  Language: informational(optionalText),
  LanguageCode: informational(optionalText),
  groupType: informational(optionalText),
  deviceType: informational(optionalText),
  createdDate: informational(pacificTime),
  modifiedDate: informational(pacificTime),
  reContact: informational(z.boolean()),
  entryLink: informational(optionalText),
  testEntryLink: informational(optionalText),
  targeting: informational(z.array(targetingSchema)),
  CPI: amount,
  isQuota: informational(z.boolean()),
  jobCategory: informational(optionalText),
  isPIIRequired: informational(z.boolean()),
  JobId: informational(integer),
  BuyerId: informational(integer),
  expected_end_date: informational(optionalText),
  duplicateSurveyIds: informational(z.array(integer)),
  duplicateCheckLevel: informational(optionalText),
  statuses: informational(z.array(z.string())),
  numberOfCompletes: informational(integer),
  numberOfStarts: informational(integer),
  globalBuyerConversion: informational(optionalText),
  globalMedianLOI: informational(optionalText),
});

/** A survey allocated to the supplier (v2 adds the country and language codes and the statistics). */
export interface Survey {
  readonly surveyId: string;
  readonly surveyName?: string | undefined;
  readonly cpi: string;
  readonly sampleSize?: number | undefined;
  readonly remaining?: number | undefined;
  readonly supplierCompletes?: number | undefined;
  readonly loiMinutes?: number | undefined;
  readonly incidencePercent?: number | undefined;
  readonly country?: string | undefined;
  readonly countryCode?: string | undefined;
  readonly language?: string | undefined;
  readonly languageCode?: string | undefined;
  readonly createdAt?: PacificTime | undefined;
  readonly modifiedAt?: PacificTime | undefined;
  readonly entryLink?: string | undefined;
  readonly testEntryLink?: string | undefined;
  readonly jobId?: number | undefined;
  readonly buyerId?: number | undefined;
  readonly deviceType?: string | undefined;
  readonly groupType?: string | undefined;
  readonly isQuota?: boolean | undefined;
  readonly targeting: readonly z.infer<typeof targetingSchema>[];
  readonly numberOfCompletes?: number | undefined;
  readonly numberOfStarts?: number | undefined;
}

export function parseSurvey(raw: unknown): Parsed<Survey> {
  const parsed = surveySchema.safeParse(raw);
  if (!parsed.success)
    return { ok: false, problem: describeIssues(parsed.error, { limit: 3, whole: '(row)' }) };
  const foreign = foreignCurrency(raw);
  if (foreign) return { ok: false, problem: foreign };
  const s = parsed.data;
  return {
    ok: true,
    value: {
      surveyId: String(s.surveyId),
      surveyName: s.surveyName,
      cpi: s.CPI,
      sampleSize: s.N,
      remaining: s.remainingN,
      supplierCompletes: s.supCmps,
      loiMinutes: s.LOI,
      incidencePercent: s.IR,
      country: s.Country,
      countryCode: s.CountryCode,
      language: s.Language,
      languageCode: s.LanguageCode,
      createdAt: s.createdDate,
      modifiedAt: s.modifiedDate,
      entryLink: s.entryLink,
      testEntryLink: s.testEntryLink || undefined,
      jobId: s.JobId,
      buyerId: s.BuyerId,
      deviceType: s.deviceType,
      groupType: s.groupType,
      isQuota: s.isQuota,
      targeting: s.targeting ?? [],
      numberOfCompletes: s.numberOfCompletes,
      numberOfStarts: s.numberOfStarts,
    },
  };
}

/** The redirect fields of a survey (or the supplier's global ones when the survey has none). */
export const REDIRECT_SETTING_FIELDS = [
  'sUrl',
  'fUrl',
  'oUrl',
  'qTUrl',
  'tUrl',
  'pstbck',
  'pstbck_fail',
  'pstBckSuccessMethod',
  'pstBckFailMethod',
] as const;
export type RedirectSettings = Partial<Record<(typeof REDIRECT_SETTING_FIELDS)[number], string>>;

export function parseRedirectSettings(raw: unknown): Parsed<RedirectSettings> {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    return { ok: false, problem: 'redirectURL is not an object' };
  const settings: RedirectSettings = {};
  for (const field of REDIRECT_SETTING_FIELDS) {
    const value = (raw as Record<string, unknown>)[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') return { ok: false, problem: `${field} is not a string` };
    settings[field] = value;
  }
  return { ok: true, value: settings };
}

const quotaSchema = z.looseObject({
  id: integer,
  quotaN: z.optional(integer),
  title: optionalText,
  quotaName: optionalText,
  quotaStatus: optionalText,
  RemainingN: z.optional(integer),
  cmp: z.optional(integer),
  clk: z.optional(integer),
  targeting: z.optional(z.record(z.string(), z.unknown())),
});
export type SurveyQuota = z.infer<typeof quotaSchema>;

export function parseQuota(raw: unknown): Parsed<SurveyQuota> {
  const parsed = quotaSchema.safeParse(raw);
  return parsed.success
    ? { ok: true, value: parsed.data }
    : { ok: false, problem: describeIssues(parsed.error, { limit: 3, whole: '(row)' }) };
}
