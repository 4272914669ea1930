/**
 * Simulated respondents: each attempt gets a token and a pid and an outcome drawn from the mix; then the
 * marketplace does what a real one does: sends the browser to the survey's redirect URL for the outcome,
 * calls the success or fail postback with the configured method, and files the transaction.
 */
import { outcomeOfStatus } from '../../../functions/marketplace/marketplace-records';
import { REDIRECT_FIELD } from '../../../functions/receiving/outcome';
import { sumAmounts } from '../../../functions/shared/money';
import { LOCAL_RESPONDENT_ADDRESS } from '../api-gateway';
import type { MarketplaceState, SimTransaction } from './state';

/** Weights of the statuses a respondent ends in. */
export type OutcomeMix = Readonly<Record<string, number>>;

export const DEFAULT_MIX: OutcomeMix = {
  Completed: 45,
  Failed: 10,
  'Over Quota': 10,
  'Quality Termination': 10,
  'Pre Survey Termination': 10,
  'Pre Survey Over Quota': 5,
  'Start Survey DNC': 5,
  'Pre Survey DNC': 5,
};

/** Knobs of what goes wrong on the way to the supplier. Shares are probabilities in [0, 1]. */
export interface DeliveryFaults {
  /** Postbacks never sent. */
  dropPostback: number;
  /**
   * Surveys whose postbacks are never sent while listed (their redirects still are): a survey's postbacks
   * stopping, as when the marketplace's postback workers fail for it. Set the list again to resume.
   */
  dropPostbacksFor: readonly number[];
  /** Postbacks sent twice. */
  repeatPostback: number;
  /** Redirects the respondent never completes (closed the tab). */
  dropRedirect: number;
  /** Delay before a postback is sent, in ms: [min, max]. */
  postbackDelayMs: [number, number];
  /** Transactions filed without the supplier ever being told. */
  phantom: number;
  /** Non-completes for which the success redirect and postback are sent anyway (an extra complete here). */
  falseComplete: number;
  /** Completes filed at a CPI other than the survey's (0.10 more). */
  cpiDrift: number;
}

export const NO_DELIVERY_FAULTS: DeliveryFaults = {
  dropPostback: 0,
  dropPostbacksFor: [],
  repeatPostback: 0,
  dropRedirect: 0,
  postbackDelayMs: [0, 0],
  phantom: 0,
  falseComplete: 0,
  cpiDrift: 0,
};

/** How a POST postback carries its values: in the query only, or also in a JSON or form body. */
export type PostbackBody = 'query' | 'json' | 'form';

export interface Attempt {
  readonly transaction: SimTransaction;
  readonly redirect?: { url: string; status: number };
  readonly postbacks: { url: string; method: string; status: number }[];
  readonly dropped: { redirect: boolean; postback: boolean };
}

export interface RespondentOptions {
  readonly surveyId: number;
  /** Forces the status instead of drawing it from the mix. */
  readonly status?: string;
  /** Any text a panel issues (percent-encoded into the URLs, as the real marketplace does). */
  readonly pid?: string;
  /** Forces the transaction token (the marketplace's own are UUIDs). */
  readonly token?: string;
  /** When the respondent clicked in (defaults to now minus the LOI for completes). */
  readonly clickedAt?: Date;
  readonly completedAt?: Date;
}

export class RespondentSimulator {
  mix: OutcomeMix = DEFAULT_MIX;
  faults: DeliveryFaults = { ...NO_DELIVERY_FAULTS };
  postbackBodies: readonly PostbackBody[] = ['query', 'json', 'form'];
  private pending = new Set<Promise<unknown>>();

  constructor(
    private readonly state: MarketplaceState,
    private readonly send: typeof fetch = fetch,
  ) {}

  /** One respondent's attempt, end to end. Resolves once the redirect and the postbacks have been answered. */
  async respondent(options: RespondentOptions): Promise<Attempt> {
    const { state } = this;
    const random = state.random;
    const survey = state.surveys.get(options.surveyId);
    if (!survey) throw new Error(`no survey ${options.surveyId}`);
    const status = options.status ?? random.pick(this.mix);
    const now = new Date();
    const completedAt = status === 'Completed' ? (options.completedAt ?? now) : undefined;
    const transaction: SimTransaction = {
      surveyId: survey.surveyId,
      token: options.token ?? random.uuid(),
      pid: options.pid ?? `sim-${random.between(100000, 999999)}`,
      status,
      ip: `198.51.100.${random.between(1, 254)}`,
      trackId: random.uuid(),
      termReason: status.startsWith('Pre Survey') ? 'ClientQuotaFull' : '',
      clickedAt: options.clickedAt ?? new Date(now.getTime() - (completedAt ? survey.loi * 60_000 : 60_000)),
      ...(completedAt ? { completedAt } : {}),
      verifyToken: 'Pending',
      notified: false,
    };
    state.transactions.push(transaction);
    const dropped = { redirect: false, postback: false };
    if (completedAt && random.chance(this.faults.cpiDrift)) {
      transaction.cpi = sumAmounts([survey.cpi, '0.10']);
      state.inject(transaction, 'cpi-drift');
    }
    if (random.chance(this.faults.phantom)) {
      state.inject(transaction, 'phantom');
      return { transaction, postbacks: [], dropped: { redirect: true, postback: true } };
    }
    // The marketplace tells the supplier "success" for an attempt it files as something else.
    const reported = !completedAt && random.chance(this.faults.falseComplete) ? 'Completed' : status;
    if (reported !== status) state.inject(transaction, 'false-complete');

    const settings = state.effectiveRedirects(survey.surveyId);
    const fill = (url: string) =>
      url
        .replaceAll('[%%pid%%]', encodeURIComponent(transaction.pid))
        .replaceAll('[%%token%%]', encodeURIComponent(transaction.token));

    let redirect: Attempt['redirect'];
    const redirectField = REDIRECT_FIELD[outcomeOfStatus(reported) ?? 'fail'];
    const redirectTemplate = settings[redirectField];
    if (random.chance(this.faults.dropRedirect)) {
      dropped.redirect = true;
      state.inject(transaction, 'dropped-redirect');
    } else if (redirectTemplate) {
      const url = fill(redirectTemplate);
      // The respondent's browser, from its own address (the local API Gateway reads it from this header).
      const response = await this.send(url, {
        redirect: 'manual',
        signal: AbortSignal.timeout(10_000),
        headers: { [LOCAL_RESPONDENT_ADDRESS]: transaction.ip },
      });
      await response.arrayBuffer();
      redirect = { url, status: response.status };
      transaction.notified = true;
    }

    const postbacks: Attempt['postbacks'] = [];
    const success = reported === 'Completed';
    const postbackTemplate = success ? settings.pstbck : settings.pstbck_fail;
    const method = (
      (success ? settings.pstBckSuccessMethod : settings.pstBckFailMethod) ?? 'GET'
    ).toUpperCase();
    // The share is drawn first, so listing a survey never changes the draws other surveys' traffic gets.
    const droppedByShare = random.chance(this.faults.dropPostback);
    if (droppedByShare || this.faults.dropPostbacksFor.includes(survey.surveyId)) {
      dropped.postback = true;
      state.inject(transaction, 'dropped-postback');
    } else if (postbackTemplate) {
      const times = random.chance(this.faults.repeatPostback) ? 2 : 1;
      if (times > 1) state.inject(transaction, 'repeated-postback');
      const [minDelay, maxDelay] = this.faults.postbackDelayMs;
      const delay = random.between(minDelay, maxDelay);
      if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
      for (let i = 0; i < times; i++) {
        const url = fill(postbackTemplate);
        const response = await this.send(url, {
          method,
          ...this.postbackBody(method, transaction),
          signal: AbortSignal.timeout(10_000),
        });
        await response.arrayBuffer();
        postbacks.push({ url, method, status: response.status });
        transaction.notified = true;
      }
    }
    return { transaction, ...(redirect ? { redirect } : {}), postbacks, dropped };
  }

  /** Starts an attempt in the background; `settle()` waits for all of them. */
  start(options: RespondentOptions): Promise<Attempt> {
    const attempt = this.respondent(options);
    const tracked = attempt.catch(() => undefined).finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
    return attempt;
  }

  async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  private postbackBody(method: string, transaction: SimTransaction): RequestInit {
    if (method !== 'POST') return {};
    const kind = this.postbackBodies[this.state.random.between(0, this.postbackBodies.length - 1)] ?? 'query';
    const values = { pid: transaction.pid, token: transaction.token };
    if (kind === 'json')
      return { headers: { 'content-type': 'application/json' }, body: JSON.stringify(values) };
    if (kind === 'form')
      return {
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(values).toString(),
      };
    return {};
  }
}
