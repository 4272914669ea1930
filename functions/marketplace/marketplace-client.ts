/**
 * The marketplace's supplier API: the only module that speaks HTTP to it.
 *
 * Every call carries the access token and a timeout, runs under its client's concurrency limit (or one limit
 * handed to several clients to share), and is retried with jittered exponential backoff on network errors, timeouts, malformed
 * responses, 429 and 5xx (never on other 4xx); a 429's Retry-After holds every call of the client back until it
 * has passed (at most 30 s; a longer one, or a call refused 429 through every retry, fails the calls until then at
 * once, without asking). A response is a success only when `apiStatus` says so, in any
 * casing; anything else is a MarketplaceError carrying the HTTP status and the marketplace's `msg`.
 *
 * Over 300 lines on purpose: every endpoint's typed call shares one request path (token, timeout, limit, retries,
 * error mapping); splitting the calls from it would scatter what each call relies on.
 */
import pLimit, { type LimitFunction } from 'p-limit';
import pRetry from 'p-retry';
import { withoutSignatures } from '../shared/printable';
import { settleWithin } from '../shared/time-limit';
import {
  canonicalStatus,
  type Parsed,
  type Placement,
  parseQuota,
  parseRedirectSettings,
  parseSurvey,
  parseTransaction,
  type RedirectSettings,
  type Survey,
  type SurveyQuota,
  type Transaction,
} from './marketplace-records';

/** A message that says a survey is not live: the reference's answer to a lookup of one paused or closed. */
export const SAYS_NOT_LIVE = /paused|closed|not live|inactive|not active/i;
/** A message that says a survey has no redirects of its own (`No survey specific redirects found`). */
export const SAYS_NO_REDIRECTS = /\bno\b.*\bredirect|redirects? (?:were |was )?not found/i;
/** Words of a refusal of the caller or of the call's rate, never of a survey (whatever status they come with). */
export const ABOUT_THE_CALLER =
  /\b(?:(?:access |api |auth )?token|unauthori[sz]ed|authenticat\w*|authori[sz]ation|credentials?|permission|forbidden|rate[- ]limit\w*|too many|slow down|quota|throttl\w*)\b/i;
/**
 * A success that is a refusal of the call's rate (answered 200 during a rate limit): words of a limit reached, never
 * a rate merely mentioned ("Rate limit: 100 calls/min"). Asked again later, the call may pass.
 */
const SUCCESS_REFUSES_THE_RATE =
  /\btoo many (?:requests|calls)\b|\bslow down\b|\bthrottl(?:ed|ing)\b|\b(?:rate|request|call|api)s?[- ]limit\w*\b[^.;]*?\b(?:exceed\w*|reached|hit)\b|\b(?:exceed\w*|reached)\b[^.;]*?\b(?:rate|request|call|api)s?[- ]limit|(?<!survey |survey's )\bquota\b[^.;]*?\b(?:exceed\w*|reached|used up)\b|\bexceed\w* (?:your |the |its )?(?:api |request |call |daily )?quota\b|\bmaximum number of (?:calls|requests)\b/i;
/**
 * A success that is a refusal of the caller's token or credentials (answered 200): the token said to be wrong, not
 * merely named ("No surveys available for this token", "your access token is valid").
 */
const SUCCESS_REFUSES_THE_TOKEN =
  /\b(?:access |api |auth )?token\b[^.;]*?\b(?:invalid|expired|inactive|revoked|missing|disabled|not valid|not active|not recogni[sz]ed|refused|rejected)\b|\b(?:invalid|expired|inactive|revoked|missing|disabled|unknown)\b[^.;]{0,20}?\b(?:access |api |auth )?token\b|\bunauthori[sz]ed\b|\bauthentication (?:failed|required)\b|\b(?:permission|access) denied\b|\binvalid credentials\b|\binvalid (?:api |access )?key\b|\bnot authori[sz]ed\b/i;
export type ApiVersion = 'v1' | 'v2';

export interface MarketplaceClientOptions {
  /** The supplier host, e.g. `https://supplier.example.com` (the `/api/v1` or `/api/v2` prefix is added). */
  readonly baseUrl: string;
  readonly apiVersion?: ApiVersion;
  /**
   * Resolves the access token; called per request so a rotated token is picked up. `fresh`: after a 401, read it
   * past any cache (a token rotated at the marketplace and in its secret, while a cached copy is still served).
   */
  readonly accessToken: (options?: { readonly fresh?: boolean }) => string | Promise<string>;
  /** Per attempt: how long the marketplace may take to answer (its status and headers). */
  readonly timeoutMs?: number;
  /**
   * Per attempt, once the answer has begun: how long reading its body may take (default 120 s). A survey's window
   * of tens of thousands of rows is tens of megabytes, which a timeout for the answer alone would cut off.
   */
  readonly bodyTimeoutMs?: number;
  /**
   * The largest answer read (default `MAX_ANSWER_BYTES`): past it the call fails, naming the size, instead of the
   * function running out of memory (which would end the whole run, and every retry of it, at the same survey).
   */
  readonly maxBodyBytes?: number;
  readonly retries?: number;
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /**
   * The longest a 429's Retry-After is waited for (default 30 s: four retries stay within a run). A longer one fails
   * the call at once, and no call of the client goes out before it has passed (an hour at most).
   */
  readonly maxRetryAfterMs?: number;
  /** Calls started per second at most, across this client's callers (each attempt counts; default: no limit). */
  readonly callsPerSecond?: number;
  /** Requests in flight at once for this client (default 4). */
  readonly concurrency?: number;
  /** A limit shared with other clients (see `marketplaceLimit`), instead of one of this client's own. */
  readonly limit?: MarketplaceLimit;
  /**
   * Epoch ms after which no attempt starts and no retry is made, each attempt's timeout cut to what is left (a
   * scheduled run's end, `run-deadline.ts`); undefined, none.
   */
  readonly stopAt?: () => number | undefined;
  readonly fetch?: typeof fetch;
}

export type MarketplaceErrorKind = 'network' | 'timeout' | 'malformed' | 'http' | 'failure';

export interface MarketplaceErrorOptions {
  readonly endpoint: string;
  readonly kind: MarketplaceErrorKind;
  /** What went wrong; the error's message is the endpoint followed by this. */
  readonly detail: string;
  readonly httpStatus?: number;
  /** The marketplace's own `msg`, when it sent one. */
  readonly marketplaceMessage?: string;
  /** Whether trying the call again may succeed (default false). */
  readonly retriable?: boolean;
  readonly tooLarge?: boolean;
  readonly tokenRefused?: boolean;
  readonly callerRefused?: boolean;
  readonly heldOffUntil?: number;
}

/** A call that did not succeed. Never carries the access token. */
export class MarketplaceError extends Error {
  override readonly name = 'MarketplaceError';
  readonly endpoint: string;
  readonly kind: MarketplaceErrorKind;
  readonly httpStatus?: number;
  /** The marketplace's own `msg`, when it sent one. */
  readonly marketplaceMessage?: string;
  readonly retriable: boolean;
  /** The answer was larger than the client reads (`maxBodyBytes`): a call for less (fewer days) may pass. */
  readonly tooLarge: boolean;
  /** A 401 to a call's first try: tried once more with the token read afresh. */
  readonly tokenRefused: boolean;
  /** A success that said the call or its token was refused (a refusal answered 200): as a 401 or a 429 would. */
  readonly callerRefused: boolean;
  /**
   * Epoch ms until which the marketplace asked for no calls (a 429's Retry-After longer than this client waits):
   * this call was refused so, or not made at all. Nothing to hold against the survey it was for: asked again
   * after then, it may pass.
   */
  readonly heldOffUntil?: number;

  constructor(options: MarketplaceErrorOptions) {
    super(`${options.endpoint}: ${options.detail}`);
    this.endpoint = options.endpoint;
    this.kind = options.kind;
    this.httpStatus = options.httpStatus;
    this.marketplaceMessage = options.marketplaceMessage;
    this.retriable = options.retriable ?? false;
    this.tooLarge = options.tooLarge ?? false;
    this.tokenRefused = options.tokenRefused ?? false;
    this.callerRefused = options.callerRefused ?? false;
    if (options.heldOffUntil !== undefined) this.heldOffUntil = options.heldOffUntil;
  }
}

/** A row the marketplace sent that could not be read: skipped, reported, never counted as zero. */
export interface MalformedRow {
  readonly endpoint: string;
  readonly index: number;
  readonly problem: string;
  /** The row's token or id, when it had a readable one, to find it again. */
  readonly reference?: string;
  /** A transaction row's token and filing time, when both read: the day and attempt it can hold back. */
  readonly placed?: Placement;
}

export interface Rows<T> {
  readonly rows: T[];
  readonly malformed: MalformedRow[];
}

export interface TransactionQuery {
  /** Both or neither: Pacific calendar days `YYYY-MM-DD`, end inclusive, filtered on creation (click) time. */
  readonly startDate?: string;
  readonly endDate?: string;
  /** Statuses as the marketplace names them (with spaces; any known spelling is sent so); none or empty, all. */
  readonly statuses?: readonly string[];
}

export type SurveyLookup =
  | { readonly live: true; readonly survey: Survey }
  | { readonly live: false; readonly message: string };

export interface PreSurveyCheck {
  readonly status: string;
  readonly disqualification: string[];
}

export interface MarketplaceClient {
  /** 1. Questions of the lookup library for a country and language. */
  getQuestionsByCategory(countryKey: string, language?: string): Promise<Record<string, unknown>[]>;
  /** 2. Answer options of a question. */
  getAnswersByQuestionKey(
    questionKey: string,
    options?: { country?: string; language?: string },
  ): Promise<Record<string, unknown>>;
  /** 3. Live surveys allocated to the supplier. */
  getAllocatedSurveys(options?: { countryCode?: string; languageCode?: string }): Promise<Rows<Survey>>;
  /** 4. One survey: live with its details, or the marketplace's Paused/Closed message. */
  getAllocatedSurveyById(surveyId: string): Promise<SurveyLookup>;
  /** 5. Live surveys created or updated after an instant. */
  getAllocatedSurveysByDate(since: Date): Promise<Rows<Survey>>;
  /** 6. Quotas of a survey. */
  getQuotaForSurvey(surveyId: string): Promise<Rows<SurveyQuota>>;
  /** 7. The survey's redirect settings (the supplier's global ones where it has none). */
  getSurveyRedirects(surveyId: string): Promise<RedirectSettings>;
  /** 8. Sets survey-level redirects. The marketplace merges: a field left out keeps its old value. */
  setRedirectionForSurvey(surveyId: string, settings: RedirectSettings): Promise<string | undefined>;
  /** 9. Removes survey-level redirects; the global ones apply again. */
  deleteSurveyRedirects(surveyId: string): Promise<string | undefined>;
  /** 10. Transactions of a survey; "No data found" is zero rows. */
  getSurveyTransactions(surveyId: string, query?: TransactionQuery): Promise<Rows<Transaction>>;
  /** 11. Surveys matched to a respondent. */
  getRespondentSurveys(
    pid: string,
    body: { ip: string; numSurveys: number; deviceType: string },
  ): Promise<unknown>;
  /** 12. Pre-survey validations for a respondent. */
  respondentPreSurveyCheck(body: {
    pid: string;
    ip: string;
    survNum: number;
    deviceType: string;
  }): Promise<PreSurveyCheck>;
  /** 13. Term reason categories by code. */
  getTermReasonCategories(
    code: string | number,
  ): Promise<{ name: string; code: number; desc?: string; infoUrl?: string }[]>;
  /** 14. Whether unique-IP and unique-PID checks allow sending this respondent. */
  allowUniquePidAndIp(body: {
    id: string;
    pid: string;
    survNum: number;
  }): Promise<{ IP: boolean; PID: boolean }>;
  /** 15. Mapping metadata: countries, languages, status codes ... */
  getMetadata(): Promise<Record<string, unknown>>;
}

/** A concurrency limit that several clients can be handed to share. */
export type MarketplaceLimit = LimitFunction;

/** A limit for `concurrency` requests in flight at once, to hand to the clients that should share it. */
export const marketplaceLimit = (concurrency: number): MarketplaceLimit => pLimit(concurrency);

const DEFAULT_CONCURRENCY = 4;

interface CallOptions {
  readonly method?: 'GET' | 'PUT' | 'POST' | 'DELETE';
  readonly query?: Record<string, string | undefined>;
  readonly body?: unknown;
  /** Answers that count as an empty success instead of an error (e.g. "No data found"). */
  readonly emptyWhen?: (status: number, message: string, json: Json | undefined) => boolean;
}

type Json = Record<string, unknown>;

/** Whether an answer carries no data: its result and its redirect settings absent, null, or empty. */
function carriesNothing(json: Json): boolean {
  // An empty list has no keys either.
  const empty = (value: unknown) =>
    value == null || (typeof value === 'object' && Object.keys(value).length === 0);
  return empty(json.result) && empty(json.redirectURL);
}

/** What a success's message refuses, when it refuses the call: its rate, or its token (`SUCCESS_REFUSES_THE_*`). */
function refusalIn(message: string): 'rate' | 'token' | undefined {
  if (SUCCESS_REFUSES_THE_RATE.test(message)) return 'rate';
  return SUCCESS_REFUSES_THE_TOKEN.test(message) ? 'token' : undefined;
}

/**
 * Why a list answer is only part of the list, or undefined. The reference documents no paging for these calls, but
 * a marketplace that starts paging would otherwise be read as complete: every transaction past the first page would
 * turn into a false discrepancy and leave what is owed short. So an answer that says there is more (a page count
 * above one, a next page or cursor, a total above the rows listed) fails the call, by name, rather than be judged.
 */
export function morePages(json: Json | undefined, listed: number): string | undefined {
  if (!json) return undefined;
  const said = pagingSaidBy(json, listed);
  if (said) return said;
  // Or in a paging object beside the list (`{"result": [...], "pagination": {"totalPages": 3}}`).
  for (const [key, value] of Object.entries(json))
    if (/pag|meta|links|cursor/i.test(key) && value && typeof value === 'object' && !Array.isArray(value)) {
      const nested = pagingSaidBy(value as Json, listed);
      if (nested) return nested.replace(/\(([^)]*)\)/, `(${key}.$1)`);
    }
  return undefined;
}

/** A field's name as the paging names below spell it: `total_pages`, `TotalPages` and `totalPages` are one. */
const fieldName = (key: string) => key.toLowerCase().replace(/[_-]/g, '');
const words = (text: string) => new Set(text.trim().split(/\s+/));
/** Fields that count pages: above one, the list is a page of several. */
const PAGE_COUNTS = words(
  'totalpages totalpage pagecount pagescount pagetotal totalpagecount lastpage numberofpages numpages pages',
);
/** Fields that point at what follows: set (a link, a cursor, true, a page number), the list goes on. */
const NEXT = words(`nextpage next nextcursor hasmore hasnext hasnextpage nextpageurl nexturl nextlink
  nextpagetoken nexttoken morepages moreresults continuation continuationtoken`);
/** Fields that say whether this is the last page: false, the list goes on. */
const LAST = words('islastpage islast lastpage last');
/** Fields that say the list is a page (a page's number, size or offset, as a number)... */
const PAGE_MARKS = words(
  'page pagenumber pageno pagenum pageindex currentpage pagesize perpage limit offset skip',
);
/** ...beside which a total above the rows listed says it is cut short. */
const TOTALS = words(`total totalcount totalrecords totalrows totalresults totalitems totalelements count
  recordstotal recordsfiltered recordcount`);
const saysNone = (value: unknown) =>
  value === undefined ||
  value === null ||
  value === false ||
  value === '' ||
  value === 0 ||
  (typeof value === 'string' && /^(false|0|null)$/i.test(value.trim()));

function pagingSaidBy(json: Json, listed: number): string | undefined {
  const number = (value: unknown) =>
    typeof value === 'number'
      ? value
      : typeof value === 'string' && /^\d+$/.test(value)
        ? Number(value)
        : undefined;
  const fields = Object.entries(json).map(([key, value]) => ({ key, name: fieldName(key), value }));
  for (const { key, name, value } of fields) {
    const pages = PAGE_COUNTS.has(name) ? number(value) : undefined;
    if (pages !== undefined && pages > 1)
      return `the list is one page of ${pages} (${key}); paging is not supported`;
  }
  for (const { key, name, value } of fields) {
    if (NEXT.has(name) && !saysNone(value))
      return `the list has more pages (${key}); paging is not supported`;
    if (
      LAST.has(name) &&
      (value === false || (typeof value === 'string' && value.trim().toLowerCase() === 'false'))
    )
      return `the list has more pages (${key} is false); paging is not supported`;
  }
  // A total says the list is cut short only beside a page: alone it may count something else (the survey's
  // transactions of every day, say).
  // A number, not an echo of what was asked (a `start` date, say).
  if (fields.some(({ name, value }) => PAGE_MARKS.has(name) && number(value) !== undefined))
    for (const { key, name, value } of fields) {
      const total = TOTALS.has(name) ? number(value) : undefined;
      if (total !== undefined && total > listed)
        return `the list holds ${listed} of ${total} rows (${key}); paging is not supported`;
    }
  // Or in words: "Page 1 of 2"; "3 of 5 transactions", the first the rows listed.
  const page = typeof json.msg === 'string' ? /\bpage (\d+) of (\d+)\b/i.exec(json.msg) : null;
  if (page && Number(page[2]) > 1)
    return `the list is page ${page[1]} of ${page[2]} (msg); paging is not supported`;
  const said = typeof json.msg === 'string' ? /\b(\d+) of (\d+)\b/.exec(json.msg) : null;
  if (said && Number(said[1]) === listed && Number(said[2]) > listed)
    return `the list holds ${listed} of ${said[2]} rows (msg); paging is not supported`;
  return undefined;
}

/** The longest a 429's Retry-After holds the client's calls back (the retries' own backoff comes on top). */
const MAX_RETRY_AFTER_MS = 30_000;
/**
 * The longest a scheduled run's client waits out a Retry-After (`maxRetryAfterMs` of a run with a deadline): a
 * pause of a minute or two is waited for within the invocation, not turned into a run stopped until the next hour.
 */
export const RUN_MAX_RETRY_AFTER_MS = 120_000;
/**
 * Surveys in a row whose calls failed for the marketplace not answering (after the client's retries) before a run
 * (reconciliation, the redirect sync) takes up no more: a marketplace down for a week would otherwise cost every
 * survey its calls and retries every run.
 */
export const MARKETPLACE_DOWN_SURVEYS = 10;

/**
 * Whether a call's failure says the marketplace is down for every survey, not that it refused this one: it did not
 * answer (no connection, a timeout, a 5xx, a 429, a body cut off, or a success that is not JSON), or it refuses every
 * call (a 401 that stands with the token read afresh: rotated or revoked). Both scheduled runs count these towards
 * MARKETPLACE_DOWN_SURVEYS, and neither holds them against the survey.
 */
export const marketplaceDown = (error: unknown): boolean =>
  error instanceof MarketplaceError &&
  (error.retriable ||
    error.callerRefused ||
    error.kind === 'network' ||
    error.kind === 'timeout' ||
    error.httpStatus === 401 ||
    error.httpStatus === 429 ||
    (error.httpStatus ?? 0) >= 500);
/**
 * The longest a Retry-After past that is obeyed by making no call at all: an hour, so a date misread or misstated by
 * the marketplace cannot silence a warm container's client for days.
 */
export const MAX_REFUSAL_MS = 3_600_000;
/** The longest the access token's read may take (Secrets Manager or SSM answer in milliseconds when they answer). */
export const TOKEN_READ_MS = 5_000;

/** A Retry-After header (seconds, or an HTTP date) as milliseconds from `now`; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The marketplace answers an empty survey listing with an error ("No surveys available"), not an empty list; or,
 * as it answers an empty transaction list, "No data found"; or with a success that carries that message and no
 * result, as it answers a lookup of a paused survey. (A survey the full listing then leaves out is looked up by id
 * before it is recorded closed.) A success with a result is read as its result, whatever its message.
 */
const noSurveys = (status: number, message: string, json: Json | undefined) =>
  (status === 400 || status === 404 || (status >= 200 && status < 300 && json?.result == null)) &&
  /no surveys? (are )?available|^no data found/i.test(message.trim());

export function createMarketplaceClient(options: MarketplaceClientOptions): MarketplaceClient {
  const version = options.apiVersion ?? 'v1';
  const base = `${options.baseUrl.replace(/\/+$/, '')}/api/${version}`;
  const origin = URL.canParse(base) ? new URL(base).origin : 'the marketplace';
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const bodyTimeoutMs = options.bodyTimeoutMs ?? 120_000;
  const maxBodyBytes = Math.min(options.maxBodyBytes ?? MAX_ANSWER_BYTES, LARGEST_READABLE_BYTES);
  if (options.limit && options.concurrency)
    throw new RangeError('give the client a concurrency or a shared limit, not both');
  // Each client its own limit unless one is shared explicitly: a client made later never changes this one's.
  const limit = options.limit ?? pLimit(options.concurrency || DEFAULT_CONCURRENCY);
  const maxPauseMs = options.maxRetryAfterMs ?? MAX_RETRY_AFTER_MS;
  /** The last few access tokens this client sent (a rotation between calls): what a message must never show. */
  const sent: string[] = [];
  const noteSent = (token: string) => {
    if (token === '' || sent.includes(token)) return;
    sent.push(token);
    if (sent.length > 4) sent.shift();
  };
  const redactSent = (message: string) => redact(message, sent);
  /**
   * Until when the marketplace asked us to hold off (a 429's Retry-After): every call of this client waits, not
   * only the one refused, so a rate limit is not answered by the other calls in flight.
   */
  let pausedUntil = 0;
  /**
   * Until when no call is made at all: a Retry-After longer than this client waits, or a call refused 429 through
   * every retry (then for the longest pause). Calls before it fail at once, as refused, instead of asking again.
   */
  let refusedUntil = 0;
  const notTried = new WeakSet<MarketplaceError>();
  /** When the next attempt may start under `callsPerSecond`. */
  let nextSlot = 0;
  /** When the last call under `callsPerSecond` went out. */
  let lastStart = Number.NEGATIVE_INFINITY;
  const spacingMs = options.callsPerSecond ? 1000 / options.callsPerSecond : 0;

  /**
   * The access token, read within `ms`: a token store that hangs or fails (Secrets Manager down) fails the call as a
   * marketplace out of reach does, retried and counted toward the run's stop, never the function's whole time nor an
   * error of another kind each survey meets again.
   */
  async function readToken(endpoint: string, fresh: boolean, ms: number): Promise<string> {
    try {
      return await settleWithin(
        Promise.resolve().then(() => options.accessToken(fresh ? { fresh: true } : undefined)),
        ms,
        (): never => {
          throw new Error(`no answer within ${ms} ms`);
        },
      );
    } catch (error) {
      throw new MarketplaceError({
        endpoint,
        kind: 'network',
        detail: `the access token could not be read: ${redactSent(error instanceof Error ? error.message : String(error)).slice(0, 200)}`,
        retriable: true,
      });
    }
  }

  async function call(path: string, callOptions: CallOptions = {}): Promise<Json | undefined> {
    const endpoint = `${callOptions.method ?? 'GET'} ${path}`;
    const url = new URL(`${base}${path}`);
    for (const [name, value] of Object.entries(callOptions.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, value);
    }
    /** What is left before the run's end: no attempt starts without it. */
    const timeLeft = () => {
      const left = (options.stopAt?.() ?? Number.POSITIVE_INFINITY) - Date.now();
      if (left <= 0)
        throw new MarketplaceError({ endpoint, kind: 'timeout', detail: "not tried: the run's time is up" });
      return left;
    };
    // Retriable (a later run's call may pass), but not retried while the refusal lasts (`shouldRetry`).
    const refused = () => {
      const error = new MarketplaceError({
        endpoint,
        kind: 'http',
        httpStatus: 429,
        detail: `HTTP 429: not tried: the marketplace is refusing calls, none is made until ${new Date(refusedUntil).toISOString()}`,
        retriable: true,
        heldOffUntil: refusedUntil,
      });
      notTried.add(error);
      return error;
    };
    /** Set by a 401: the next attempt reads the token past its cache, once. */
    let tokenRefused = false;
    const attempt = async (): Promise<Json | undefined> => {
      if (refusedUntil > Date.now()) throw refused();
      const until = async (t: number) => {
        if (t > Date.now())
          await new Promise((resolve) => setTimeout(resolve, Math.min(t - Date.now(), timeLeft())));
      };
      // The token first: nothing awaited between a slot and the call it is for.
      const token = await readToken(endpoint, tokenRefused, Math.min(TOKEN_READ_MS, timeLeft()));
      noteSent(token);
      // A Retry-After's pause, then a slot under `callsPerSecond`; a pause set while waiting for the slot (another
      // call refused meanwhile) is waited out too, and a slot taken again after it.
      for (;;) {
        await until(pausedUntil);
        if (spacingMs === 0) break;
        // Never sooner than a spacing after the call before actually went out (its timer may have fired late).
        const slot = Math.max(Date.now(), nextSlot, pausedUntil, lastStart + spacingMs);
        nextSlot = slot + spacingMs;
        await until(slot);
        if (pausedUntil <= Date.now() && Date.now() >= lastStart + spacingMs) break;
      }
      if (refusedUntil > Date.now()) throw refused();
      lastStart = Date.now();
      const attemptTimeoutMs = Math.min(timeoutMs, timeLeft());
      // One signal for the request and its body: aborted when the answer is late, then when its body is.
      const abort = new AbortController();
      let timer = setTimeout(() => abort.abort(), attemptTimeoutMs);
      let response: Response;
      try {
        response = await doFetch(url, {
          method: callOptions.method ?? 'GET',
          headers: {
            'x-access-token': token,
            'content-type': 'application/json',
            accept: 'application/json',
          },
          body: callOptions.body === undefined ? undefined : JSON.stringify(callOptions.body),
          signal: abort.signal,
          // Not followed: the token goes to the marketplace's own address alone (a redirect elsewhere would carry
          // it there, fetch drops only `Authorization`). A redirect is answered as the HTTP error it is here.
          redirect: 'manual',
        });
      } catch (error) {
        clearTimeout(timer);
        const timedOut =
          abort.signal.aborted ||
          (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'));
        throw new MarketplaceError({
          endpoint,
          kind: timedOut ? 'timeout' : 'network',
          // Where it was going: a marketplace that does not answer at all is most often a wrong address or port.
          detail: timedOut
            ? `no answer from ${origin} within ${attemptTimeoutMs} ms`
            : `network error reaching ${origin} (${causeOf(error)})`,
          retriable: true,
        });
      }
      clearTimeout(timer);
      const readTimeoutMs = Math.max(
        1,
        Math.min(bodyTimeoutMs, (options.stopAt?.() ?? Number.POSITIVE_INFINITY) - Date.now()),
      );
      timer = setTimeout(() => abort.abort(), readTimeoutMs);
      let text: string;
      try {
        text = await readCapped(response, maxBodyBytes);
      } catch (error) {
        clearTimeout(timer);
        if (error instanceof AnswerTooLarge) {
          abort.abort();
          throw new MarketplaceError({
            endpoint,
            kind: 'malformed',
            detail: `HTTP ${response.status}: the answer is over ${Math.round(maxBodyBytes / 1_048_576)} MB, not read (a listing of fewer days is smaller)`,
            httpStatus: response.status,
            tooLarge: true,
          });
        }
        // A body cut off is not a malformed answer: it is retried, and said for what it is.
        throw new MarketplaceError({
          endpoint,
          kind: abort.signal.aborted ? 'timeout' : 'network',
          detail: abort.signal.aborted
            ? `HTTP ${response.status}: the answer's body was not read in full within ${readTimeoutMs} ms`
            : `HTTP ${response.status}: the answer's body was cut off (${causeOf(error)})`,
          httpStatus: response.status,
          retriable: true,
        });
      } finally {
        clearTimeout(timer);
      }
      let body: unknown;
      try {
        body = text === '' ? undefined : JSON.parse(idsAsWritten(text));
      } catch {
        body = undefined;
      }
      const json =
        body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Json) : undefined;
      const said = typeof json?.msg === 'string' ? json.msg : '';
      // Never a token this client sent: the one just sent, nor one before it (a 401's retry sends a fresh one).
      const message = redactSent(said);
      const status = response.status;
      if (status === 429) {
        // A date is on the marketplace's clock: read against its own `Date` header where it sends one, so that a
        // clock minutes apart from ours does not stretch a pause of seconds into a refusal (RFC 9110).
        const theirNow = Date.parse(response.headers.get('date') ?? '');
        const wait = retryAfterMs(
          response.headers.get('retry-after'),
          Number.isNaN(theirNow) ? Date.now() : theirNow,
        );
        if (wait !== undefined && wait > maxPauseMs) {
          // Longer than this client waits: nothing is asked again before it (asking sooner is refused again).
          refusedUntil = Math.max(refusedUntil, Date.now() + Math.min(wait, MAX_REFUSAL_MS));
          throw new MarketplaceError({
            endpoint,
            kind: 'http',
            detail: `HTTP 429: the marketplace asked for no calls for ${Math.ceil(wait / 1000)} s; none is made until ${new Date(refusedUntil).toISOString()}${message ? ` (${message})` : ''}`,
            httpStatus: status,
            marketplaceMessage: message || undefined,
            retriable: true,
            heldOffUntil: refusedUntil,
          });
        }
        if (wait !== undefined) pausedUntil = Math.max(pausedUntil, Date.now() + Math.min(wait, maxPauseMs));
      }
      // The token refused: once a call, tried again with the token read afresh (rotated meanwhile); refused again,
      // the refusal stands (the token itself is wrong, or revoked).
      if (status === 401 && !tokenRefused) {
        tokenRefused = true;
        throw new MarketplaceError({
          endpoint,
          kind: 'http',
          detail: `HTTP 401${message ? `: ${message}` : ''}`,
          httpStatus: status,
          marketplaceMessage: message || undefined,
          tokenRefused: true,
        });
      }
      if (status === 429 || status >= 500) {
        throw new MarketplaceError({
          endpoint,
          kind: 'http',
          detail: `HTTP ${status}${message ? `: ${message}` : ''}`,
          httpStatus: status,
          marketplaceMessage: message || undefined,
          retriable: true,
        });
      }
      if (status >= 300 && status < 400) {
        const location = response.headers.get('location');
        let elsewhere = '';
        try {
          elsewhere = location ? ` to ${new URL(location, url).origin}` : '';
        } catch {
          // a location that is no URL: named by nothing
        }
        throw new MarketplaceError({
          endpoint,
          kind: 'http',
          detail: `HTTP ${status}: the marketplace answered with a redirect${elsewhere}, not followed (the access token goes to ${origin} alone): check the marketplace's base URL`,
          httpStatus: status,
        });
      }
      // A success that carries nothing and says the call or its token was refused (a rate limit, a token refused,
      // answered 200 with an empty list): a refusal, not an answer. Read as one, a transaction list of no rows judged
      // every complete of its days not paid, a lookup "access paused" closed a live survey, a read-back reported drift,
      // and an empty listing moved the sync's checkpoint past surveys it never saw. A success with data stands, and
      // one whose words only name a rate or a token (a survey closed "for this token") is read as ever. A rate refused
      // is retried and counts as the marketplace out of reach; a token refused is read afresh once, as after a 401,
      // and then counts so too (one revoked token is every survey's failure, not each survey's own).
      const refusal =
        (callOptions.method ?? 'GET') === 'GET' &&
        status >= 200 &&
        status < 300 &&
        json &&
        carriesNothing(json)
          ? refusalIn(said)
          : undefined;
      if (refusal) {
        const firstRefusal = refusal === 'token' && !tokenRefused;
        if (firstRefusal) tokenRefused = true;
        throw new MarketplaceError({
          endpoint,
          kind: 'failure',
          detail: `HTTP ${status}: a success without data that says: ${message.slice(0, 200)}`,
          httpStatus: status,
          marketplaceMessage: message || undefined,
          retriable: refusal === 'rate',
          tokenRefused: firstRefusal,
          callerRefused: true,
        });
      }
      // Told on the message as sent (a token's characters concealed inside its words would hide "No data found").
      if (callOptions.emptyWhen?.(status, said, json)) return undefined;
      if (!json) {
        throw new MarketplaceError({
          endpoint,
          kind: 'malformed',
          detail: `HTTP ${status} with a body that is not a JSON object`,
          httpStatus: status,
          retriable: status < 400,
        });
      }
      if (status < 200 || status >= 300) {
        throw new MarketplaceError({
          endpoint,
          kind: 'http',
          detail: `HTTP ${status}${message ? `: ${message}` : ''}`,
          httpStatus: status,
          marketplaceMessage: message || undefined,
        });
      }
      if (typeof json.apiStatus !== 'string' || json.apiStatus.toLowerCase() !== 'success') {
        throw new MarketplaceError({
          endpoint,
          kind: 'failure',
          // Redacted as a message is: an `apiStatus` that is not `success` is the marketplace's words too.
          detail: `apiStatus ${redactSent(JSON.stringify(json.apiStatus) ?? 'missing')}${message ? `: ${message}` : ''}`,
          httpStatus: status,
          marketplaceMessage: message || undefined,
        });
      }
      return json;
    };
    try {
      return await pRetry(() => limit(attempt), {
        retries: options.retries ?? 4,
        factor: 2,
        minTimeout: options.minBackoffMs ?? 250,
        maxTimeout: options.maxBackoffMs ?? 8_000,
        randomize: true,
        shouldRetry: ({ error }) =>
          error instanceof MarketplaceError &&
          error.retriable &&
          refusedUntil <= Date.now() &&
          Date.now() < (options.stopAt?.() ?? Number.POSITIVE_INFINITY),
      });
    } catch (error) {
      // The token refused: one more try, the token read afresh (not one of the retries: a client set to none reads
      // it afresh too).
      if (error instanceof MarketplaceError && error.tokenRefused) return await limit(attempt);
      // Refused 429 through every retry: the other calls stop asking for the longest pause, not each in its turn.
      // (A call not made, refused by this client itself, extends nothing.)
      if (error instanceof MarketplaceError && error.httpStatus === 429 && !notTried.has(error))
        refusedUntil = Math.max(refusedUntil, Date.now() + Math.min(maxPauseMs, MAX_RETRY_AFTER_MS));
      throw error;
    }
  }

  const result = (json: Json | undefined) => json?.result;
  /** A list's rows, all of them: a list that says it is one page of more is refused (see `morePages`). */
  const rows = <T>(endpoint: string, json: Json | undefined, parse: (row: unknown) => Parsed<T>): Rows<T> => {
    // No answer at all is the empty list the call's own "nothing found" stands for (`emptyWhen`); an answer without
    // its list is not one, or a success with its rows under another name would read as no transactions.
    const list = json === undefined ? [] : result(json);
    if (!Array.isArray(list)) {
      throw new MarketplaceError({
        endpoint,
        kind: 'malformed',
        detail: list === undefined ? 'the answer has no result list' : 'result is not a list',
      });
    }
    const more = morePages(json, list.length);
    if (more) throw new MarketplaceError({ endpoint, kind: 'malformed', detail: more });
    const parsed: Rows<T> = { rows: [], malformed: [] };
    list.forEach((row, index) => {
      const outcome = parse(row);
      if (outcome.ok) parsed.rows.push(outcome.value);
      else
        parsed.malformed.push({
          endpoint,
          index,
          problem: outcome.problem,
          reference: referenceOf(row),
          ...(outcome.placed ? { placed: outcome.placed } : {}),
        });
    });
    return parsed;
  };
  const segment = encodeURIComponent;

  return {
    async getQuestionsByCategory(countryKey, language) {
      const path = `/supply/getQuestionsByCategory/${segment(countryKey)}${language ? `/${segment(language)}` : ''}`;
      return listOf(path, result(await call(path)));
    },
    async getAnswersByQuestionKey(questionKey, query = {}) {
      const path = `/supply/getAnswersByQuesKey/${segment(questionKey)}`;
      return objectOf(
        path,
        result(await call(path, { query: { country: query.country, language: query.language } })),
      );
    },
    async getAllocatedSurveys(query = {}) {
      const path = '/supply/getAllocatedSurveys';
      const json = await call(path, {
        query: { countryCode: query.countryCode, languageCode: query.languageCode },
        emptyWhen: noSurveys,
      });
      return rows(path, json, parseSurvey);
    },
    async getAllocatedSurveyById(surveyId) {
      const path = `/supply/getAllocatedSurveysBySurveyId/${segment(surveyId)}`;
      const json = await call(path);
      // Paused or closed: a success without a result. A result given as the survey itself rather than a list of
      // one is still the survey (read as not live, a live survey would be recorded closed).
      const list = result(json);
      const survey = Array.isArray(list)
        ? list[0]
        : list !== null && typeof list === 'object' && Object.keys(list).length > 0
          ? list
          : undefined;
      if (survey === undefined) {
        // Shown and stored as every message of the marketplace is: never a token this client sent.
        const message = typeof json?.msg === 'string' ? redactSent(json.msg) : '';
        // Only a message that says so is a survey paused or closed (the reference's answer): a success without the
        // survey that says anything else (a rate limit or an outage answered 200) tells nothing of it, and read as
        // closed it took a live survey out of the sync and its health.
        if (!SAYS_NOT_LIVE.test(message))
          throw new MarketplaceError({
            endpoint: path,
            kind: 'malformed',
            detail: `a success without the survey that does not say it is paused or closed${message ? `: ${message.slice(0, 200)}` : ''}`,
          });
        return { live: false, message };
      }
      const parsed = parseSurvey(survey);
      if (!parsed.ok)
        throw new MarketplaceError({
          endpoint: path,
          kind: 'malformed',
          detail: `survey cannot be read: ${parsed.problem}`,
        });
      return { live: true, survey: parsed.value };
    },
    async getAllocatedSurveysByDate(since) {
      const path = `/supply/getAllocatedSurveysByDate/${segment(since.toISOString())}`;
      return rows(path, await call(path, { emptyWhen: noSurveys }), parseSurvey);
    },
    async getQuotaForSurvey(surveyId) {
      const path = `/supply/getQuotaForSurvey/${segment(surveyId)}`;
      return rows(path, await call(path), parseQuota);
    },
    async getSurveyRedirects(surveyId) {
      const path = `/supply/surveySpecificRedirects/${segment(surveyId)}`;
      const json = await call(path);
      // A JSON answer whose settings object is null, or left out by one that says there are none: no survey-level
      // redirects to show, which the read-back compares as such (the postbacks missing). One left out by an answer
      // that says anything else (a rate limit answered 200) is no read-back: taken for one, it reported drift and
      // set the redirects again. Anything else that does not read is malformed.
      if (json !== undefined && json.redirectURL === null) return {};
      if (json !== undefined && json.redirectURL === undefined) {
        const message = typeof json.msg === 'string' ? json.msg : '';
        if (SAYS_NO_REDIRECTS.test(message)) return {};
        throw new MarketplaceError({
          endpoint: path,
          kind: 'malformed',
          detail: `a success without redirectURL that does not say the survey has none${message ? `: ${redactSent(message).slice(0, 200)}` : ''}`,
        });
      }
      const parsed = parseRedirectSettings(json?.redirectURL);
      if (!parsed.ok)
        throw new MarketplaceError({ endpoint: path, kind: 'malformed', detail: parsed.problem });
      return parsed.value;
    },
    async setRedirectionForSurvey(surveyId, settings) {
      const path = `/supply/setRedirectionForSurvey/${segment(surveyId)}`;
      return messageOf(await call(path, { method: 'PUT', body: settings }));
    },
    async deleteSurveyRedirects(surveyId) {
      const path = `/supply/surveySpecificRedirects/${segment(surveyId)}`;
      return messageOf(await call(path, { method: 'DELETE' }));
    },
    async getSurveyTransactions(surveyId, query = {}) {
      if ((query.startDate === undefined) !== (query.endDate === undefined)) {
        throw new RangeError('startDate and endDate go together');
      }
      for (const day of [query.startDate, query.endDate]) {
        if (day !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(day))
          throw new RangeError(`not a date YYYY-MM-DD: ${day}`);
      }
      // The marketplace answers 400 to an empty item or a name it does not know: none sent when none is asked for,
      // each known one as it spells it.
      const statuses = (query.statuses ?? []).map(canonicalStatus).filter((status) => status !== '');
      const path = `/supply/getSurveyTransactions/${segment(surveyId)}`;
      const json = await call(path, {
        query: {
          startDate: query.startDate,
          endDate: query.endDate,
          status: statuses.length > 0 ? statuses.join(',') : undefined,
        },
        emptyWhen: (status, message) => (status === 400 || status === 404) && /no data found/i.test(message),
      });
      return rows(path, json, parseTransaction);
    },
    async getRespondentSurveys(pid, body) {
      const path = `/supply/respondent/${segment(pid)}/surveys`;
      return result(await call(path, { method: 'POST', body }));
    },
    async respondentPreSurveyCheck(body) {
      const path = '/supply/respondentPreSurveyCheck';
      const value = objectOf(path, result(await call(path, { method: 'POST', body })));
      return {
        status: String(value.status ?? ''),
        disqualification: Array.isArray(value.disqualification) ? value.disqualification.map(String) : [],
      };
    },
    async getTermReasonCategories(code) {
      const path = `/resources/termReasonCategories/${segment(String(code))}`;
      return listOf(path, result(await call(path))).map((c) => ({
        name: String(c.name ?? ''),
        code: Number(c.code),
        ...(typeof c.desc === 'string' ? { desc: c.desc } : {}),
        ...(typeof c.infoUrl === 'string' ? { infoUrl: c.infoUrl } : {}),
      }));
    },
    async allowUniquePidAndIp(body) {
      const path = '/supply/allowUniquePIDAndIP';
      const json = (await call(path, { method: 'POST', body })) ?? {};
      const source = (typeof json.result === 'object' && json.result !== null ? json.result : json) as Json;
      return { IP: source.IP === true, PID: source.PID === true };
    },
    async getMetadata() {
      const path = '/mapping/metadata/';
      return objectOf(path, result(await call(path)));
    },
  };
}

function listOf(endpoint: string, value: unknown): Json[] {
  if (value === undefined) return [];
  if (!Array.isArray(value))
    throw new MarketplaceError({ endpoint, kind: 'malformed', detail: 'result is not a list' });
  return value.filter((row): row is Json => row !== null && typeof row === 'object');
}

function objectOf(endpoint: string, value: unknown): Json {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new MarketplaceError({ endpoint, kind: 'malformed', detail: 'result is not an object' });
  }
  return value as Json;
}

const messageOf = (json: Json | undefined) => (typeof json?.msg === 'string' ? json.msg : undefined);

function referenceOf(row: unknown): string | undefined {
  if (row === null || typeof row !== 'object') return undefined;
  const { token, surveyId, id } = row as Json;
  const value = token ?? surveyId ?? id;
  return typeof value === 'string' || typeof value === 'number' ? String(value).slice(0, 100) : undefined;
}

function causeOf(error: unknown): string {
  const cause = error instanceof Error ? (error.cause as { code?: string } | undefined) : undefined;
  return cause?.code ?? (error instanceof Error ? error.name : 'unknown');
}

/**
 * The marketplace's messages are shown to operators, stored (a survey's last error) and sent in health notices:
 * never the token, nor a postback URL's signature a message quotes back (`Invalid pstbck URL: ...&sig=...`).
 */
function redact(message: string, tokens: readonly string[]): string {
  // Every token out first (as sent and as a URL carries it), then cut once: cut first, a token across the cut kept
  // its start.
  let text = withoutSignatures(message);
  for (const form of new Set(
    tokens.filter((token) => token !== '').flatMap((t) => [t, encodeURIComponent(t)]),
  ))
    text = text.split(form).join('[redacted]');
  return text.slice(0, 300);
}

/**
 * The answer's text with every id written as a bare integer of 16 digits or more (`"PID": 12345678901234567890`)
 * quoted: parsed as a number it would be rounded past 2^53, another respondent's id. Only the ids' keys, only where
 * the value is a bare integer.
 */
export function idsAsWritten(text: string): string {
  return text.replace(/("(?:PID|pid|token)"\s*:\s*)(-?\d{16,})(?=\s*[,}\]])/g, '$1"$2"');
}

/**
 * The largest answer the client reads unless told otherwise (the deployed functions are told an eighth of their
 * memory: `marketplace-access.ts`): 64 MB of JSON is about 160,000 transaction rows.
 */
export const MAX_ANSWER_BYTES = 64 * 1_048_576;
/**
 * Whatever the memory: the largest answer one string holds with room to parse it (V8's strings end near 512 M
 * characters; an answer past that would fail as a network error, every retry of it, instead of as too large for a
 * listing of fewer days).
 */
export const LARGEST_READABLE_BYTES = 256 * 1_048_576;

class AnswerTooLarge extends Error {}

/**
 * The answer's body as UTF-8 text (a byte-order mark dropped, as `Response.text()` does), read no further than
 * `maxBytes`. Only a success is refused for its size: an error's body past the bound is left unread (''), so the
 * answer is judged by its status (a 503 is retried).
 */
async function readCapped(response: Response, maxBytes: number): Promise<string> {
  const tooLarge = async (reader?: ReadableStreamDefaultReader<Uint8Array>) => {
    await reader?.cancel().catch(() => undefined);
    if (response.ok) throw new AnswerTooLarge();
    return '';
  };
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (declared > maxBytes) return tooLarge();
  if (!response.body) return '';
  const decoder = new TextDecoder();
  let text = '';
  let size = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) return tooLarge(reader);
    text += decoder.decode(value, { stream: true });
  }
  return text + decoder.decode();
}
