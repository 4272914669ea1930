/**
 * What the local marketplace knows: surveys, the supplier's global and per-survey redirect settings, and the
 * transaction list. Pure state and rules; the HTTP server and the respondent simulator sit on top.
 */
import {
  REDIRECT_SETTING_FIELDS,
  type RedirectSettings,
} from '../../../functions/marketplace/marketplace-records';
import { formatPacificTime, pacificDayRange } from '../../../functions/marketplace/pacific-time';
import type { Random } from './random';

export interface SimSurvey {
  surveyId: number;
  surveyName: string;
  live: boolean;
  /** Decimal string with two decimals. */
  cpi: string;
  loi: number;
  ir: number;
  sampleSize: number;
  country: string;
  countryCode: string;
  language: string;
  languageCode: string;
  createdAt: Date;
  modifiedAt: Date;
}

export type VerifyState = 'Pending' | 'Valid' | 'Invalid';

/** A fault the local marketplace injected into an attempt, so tests can check reconciliation finds each one. */
export type Injection =
  | 'phantom'
  | 'false-complete'
  | 'dropped-redirect'
  | 'dropped-postback'
  | 'repeated-postback'
  | 'cpi-drift'
  | 'invalidated'
  | 'status-changed';

export interface SimTransaction {
  surveyId: number;
  token: string;
  pid: string;
  status: string;
  ip: string;
  trackId: string;
  termReason: string;
  clickedAt: Date;
  completedAt?: Date;
  verifyToken: VerifyState;
  verifiedAt?: Date;
  /** Whether the supplier was ever told (redirect or postback sent). False for phantom transactions. */
  notified: boolean;
  /** Set when the complete was filed at another price than the survey's. */
  cpi?: string;
}

/** A postback that went to the stand-in other host a tampered survey points at, instead of the supplier. */
export interface MisdirectedPostback {
  readonly surveyId: number;
  readonly method: string;
  /** The path it was sent to under the other host. */
  readonly path: string;
  readonly at: Date;
}

/** Misdirected postbacks remembered; older ones are forgotten, so a long `npm start` stays small. */
export const MISDIRECTED_KEPT = 1000;

export class MarketplaceState {
  readonly surveys = new Map<number, SimSurvey>();
  readonly globalRedirects: RedirectSettings = Object.fromEntries(
    REDIRECT_SETTING_FIELDS.map((field) => [field, field.endsWith('Method') ? 'GET' : '']),
  );
  readonly surveyRedirects = new Map<number, RedirectSettings>();
  readonly transactions: SimTransaction[] = [];
  /** What was injected into each attempt, by token. */
  readonly injections = new Map<string, Injection[]>();
  /** Postbacks that reached the stand-in other host after a tamper, latest last (at most MISDIRECTED_KEPT). */
  readonly misdirected: MisdirectedPostback[] = [];

  constructor(readonly random: Random) {}

  inject(transaction: SimTransaction, injection: Injection): void {
    this.injections.set(transaction.token, [...(this.injections.get(transaction.token) ?? []), injection]);
  }

  addSurvey(survey: Partial<SimSurvey> & { surveyId: number }, now = new Date()): SimSurvey {
    const full: SimSurvey = {
      surveyName: `Survey ${survey.surveyId}`,
      live: true,
      cpi: '1.50',
      loi: 10,
      ir: 50,
      sampleSize: 500,
      country: 'United States',
      countryCode: 'US',
      language: 'ENGLISH',
      languageCode: 'en',
      createdAt: now,
      modifiedAt: now,
      ...survey,
    };
    this.surveys.set(full.surveyId, full);
    return full;
  }

  setLive(surveyId: number, live: boolean, now = new Date()): void {
    const survey = this.surveys.get(surveyId);
    if (!survey) throw new Error(`no survey ${surveyId}`);
    survey.live = live;
    survey.modifiedAt = now;
  }

  /** Merge semantics of setRedirectionForSurvey: request value, else the survey's, else the global one. */
  setRedirects(surveyId: number, request: RedirectSettings): void {
    const existing = this.surveyRedirects.get(surveyId) ?? {};
    const merged: RedirectSettings = {};
    for (const field of REDIRECT_SETTING_FIELDS) {
      merged[field] = request[field] ?? existing[field] ?? this.globalRedirects[field];
    }
    this.surveyRedirects.set(surveyId, merged);
  }

  deleteRedirects(surveyId: number): void {
    this.surveyRedirects.delete(surveyId);
  }

  /**
   * Someone at the marketplace re-points a survey's success and fail postbacks at another host (`origin`, which
   * replaces each URL's scheme and host; the path and query stay), behind the supplier's back: its redirects still
   * reach the supplier, its postbacks do not, and the survey's settings read back differently from what the
   * supplier applied. The supplier's next setRedirectionForSurvey puts them back. Returns the new settings.
   */
  tamperPostbacks(surveyId: number, origin: string): RedirectSettings {
    if (!this.surveys.has(surveyId)) throw new Error(`no survey ${surveyId}`);
    const current = this.effectiveRedirects(surveyId);
    const base = origin.replace(/\/+$/, '');
    const moved = (template: string | undefined, path: string) => {
      const rest = template ? /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*(.*)$/i.exec(template)?.[1] : undefined;
      return `${base}${rest ?? `${path}?pid=[%%pid%%]&token=[%%token%%]`}`;
    };
    const tampered: RedirectSettings = {
      ...current,
      pstbck: moved(current.pstbck, '/pb/success'),
      pstbck_fail: moved(current.pstbck_fail, '/pb/fail'),
    };
    this.surveyRedirects.set(surveyId, tampered);
    return { ...tampered };
  }

  /** Remembers a postback the stand-in other host received. */
  misdirect(postback: MisdirectedPostback): void {
    this.misdirected.push(postback);
    if (this.misdirected.length > MISDIRECTED_KEPT) this.misdirected.shift();
  }

  /** What applies to a survey: its own settings, or the supplier's global ones. */
  effectiveRedirects(surveyId: number): RedirectSettings {
    return this.surveyRedirects.get(surveyId) ?? { ...this.globalRedirects };
  }

  /** Transactions of a survey created (clicked in) within Pacific days [startDate, endDate], optionally by status. */
  transactionsOf(
    surveyId: number,
    filter: { startDate?: string; endDate?: string; statuses?: string[] } = {},
  ): SimTransaction[] {
    const start = filter.startDate ? pacificDayRange(filter.startDate).start : undefined;
    const end = filter.endDate ? pacificDayRange(filter.endDate).end : undefined;
    return this.transactions.filter(
      (t) =>
        t.surveyId === surveyId &&
        (!start || t.clickedAt >= start) &&
        (!end || t.clickedAt < end) &&
        (!filter.statuses || filter.statuses.includes(t.status)),
    );
  }

  /**
   * The buyer's review: pending completes become Valid, or Invalid with probability `invalidShare`; with
   * probability `statusChangeShare` a complete is adjusted to another status after the fact.
   */
  review(options: { invalidShare?: number; statusChangeShare?: number; now?: Date } = {}): {
    valid: number;
    invalid: number;
    changed: number;
  } {
    const now = options.now ?? new Date();
    const counts = { valid: 0, invalid: 0, changed: 0 };
    for (const t of this.transactions) {
      if (t.status !== 'Completed' || t.verifyToken !== 'Pending') continue;
      if (this.random.chance(options.statusChangeShare ?? 0)) {
        t.status = 'Quality Termination';
        t.verifyToken = 'Invalid';
        this.inject(t, 'status-changed');
        counts.changed++;
      } else if (this.random.chance(options.invalidShare ?? 0)) {
        t.verifyToken = 'Invalid';
        this.inject(t, 'invalidated');
        counts.invalid++;
      } else {
        t.verifyToken = 'Valid';
        counts.valid++;
      }
      t.verifiedAt = now;
    }
    return counts;
  }
}

/** How long after the click the local marketplace's respondents start the survey itself. */
const SURVEY_START_AFTER_CLICK_MS = 25_000;

/** A survey as the supplier API shows it (v2 adds codes and statistics). */
export function surveyView(state: MarketplaceState, survey: SimSurvey, version: 'v1' | 'v2') {
  const completes = state.transactions.filter(
    (t) => t.surveyId === survey.surveyId && t.status === 'Completed',
  ).length;
  const starts = state.transactions.filter((t) => t.surveyId === survey.surveyId).length;
  return {
    surveyId: survey.surveyId,
    surveyName: survey.surveyName,
    N: survey.sampleSize,
    isRevShr: false,
    supCmps: completes,
    remainingN: Math.max(0, survey.sampleSize - completes),
    LOI: survey.loi,
    IR: survey.ir,
    Country: survey.country,
    Language: survey.language,
    groupType: 'Consumer',
    deviceType: 'All',
    createdDate: formatPacificTime(survey.createdAt),
    modifiedDate: formatPacificTime(survey.modifiedAt),
    reContact: false,
    entryLink: `https://marketplace.local/entry/${survey.surveyId}?pid=[%%pid%%]`,
    testEntryLink: '',
    targeting: [
      {
        QuestionId: 42,
        QuestionKey: 'AGE',
        QuestionText: 'What is your age?',
        QuestionType: 'Numeric Open Ended',
        QuestionCategory: 'Demographic',
        Options: [{ OptionId: 1, ageStart: 18, ageEnd: 65 }],
      },
    ],
    CPI: survey.cpi,
    isQuota: true,
    jobCategory: 'Other',
    isPIIRequired: false,
    JobId: 9000 + survey.surveyId,
    BuyerId: 77,
    expected_end_date: '12/31/2026',
    duplicateSurveyIds: [],
    duplicateCheckLevel: 'Survey Level',
    statuses: ['Completed', 'Failed'],
    ...(version === 'v2'
      ? {
          CountryCode: survey.countryCode,
          LanguageCode: survey.languageCode,
          numberOfCompletes: completes,
          numberOfStarts: starts,
          globalBuyerConversion: '0.35',
          globalMedianLOI: String(survey.loi),
        }
      : {}),
  };
}

/**
 * A transaction as getSurveyTransactions shows it: CPI "1.25" for completes, the number 0 for whatever earns nothing
 * (another status, or a complete the buyer's review made Invalid). The survey starts a little after the click (the
 * pre-survey checks): the day is the click's.
 */
export function transactionView(t: SimTransaction, survey: SimSurvey | undefined) {
  const earns = t.status === 'Completed' && t.verifyToken?.toLowerCase() !== 'invalid';
  return {
    ip: t.ip,
    verifyToken: t.verifyToken,
    termReason: t.termReason,
    CPI: earns ? (t.cpi ?? survey?.cpi ?? '0.00') : 0,
    PID: t.pid,
    token: t.token,
    st_date_time: formatPacificTime(new Date(t.clickedAt.getTime() + SURVEY_START_AFTER_CLICK_MS)),
    clkDateTime: formatPacificTime(t.clickedAt),
    completeDateTime: t.completedAt ? formatPacificTime(t.completedAt) : '',
    status: t.status,
    trackId: t.trackId,
    surveyUrl: `https://marketplace.local/entry/${t.surveyId}?pid=${encodeURIComponent(t.pid)}`,
    ...(t.verifiedAt ? { verifiedTknDt: formatPacificTime(t.verifiedAt) } : {}),
  };
}
