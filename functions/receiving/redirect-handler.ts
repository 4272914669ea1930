/**
 * Redirect hits: a respondent's browser arriving at the end of a survey. The hit is recorded and the
 * respondent sent on to the panel's landing page at once, whatever happened. A hit whose URL does not check
 * out is kept apart as rejected: a browser's word is a claim, and a forged one is never an outcome.
 */

import { type LedgerStore, StoreUnavailable, storeAnswerWithin } from '../ledger/ledger-store';
import type { HitBuffer } from '../runtime/hit-buffer';
import {
  describe,
  hitRequestFrom,
  requestIdOf,
  respondentAnswer,
  respondentRoute,
} from '../runtime/http-route';
import { checkSignature, type KeyRingSource, KeyRingUnavailable } from '../runtime/key-ring-source';
import { count, logger } from '../runtime/observability';
import { type RefusalCode, Rejection, signatureRefusal } from '../shared/rejection';
import { pidAsSent, readClaim, readIdentity, refusedHit } from './hit-request';
import { type LandingTemplates, landingFor } from './landing-page';
import { type LedgerCircuit, ledgerCircuit } from './ledger-circuit';
import type { Outcome } from './outcome';
import { previewRequest } from './preview-requests';
import { type RefusalRecorderOptions, refusalRecorder } from './refusal-recorder';
import { senderOf } from './sender';
import { REDIRECTS_PER_SENDER_MINUTE, senderLimiter } from './sender-limit';
import { loggableKeyId } from './signing';

export interface RedirectDependencies {
  readonly store: Pick<LedgerStore, 'recordHit' | 'recordRejectedHit'>;
  readonly keyRing: KeyRingSource;
  /** Where a hit waits while the ledger is down; without one it is logged instead. */
  readonly buffer?: HitBuffer | undefined;
  /** The panel's landing page per outcome; unset outcomes get the built-in page. */
  readonly landing: LandingTemplates;
  /** How refused hits are counted in the ledger (refusal-recorder.ts). */
  readonly refusals?: RefusalRecorderOptions | undefined;
  /** How long the respondent waits for the ledger before the hit goes to the buffer (default REDIRECT_STORE_BUDGET_MS). */
  readonly storeBudgetMs?: number | undefined;
  /** Redirects recorded per sender and minute in a container (default REDIRECTS_PER_SENDER_MINUTE; sender-limit.ts). */
  readonly perSenderMinute?: number | undefined;
  /** The container's memory that the ledger just failed (default: a LEDGER_PAUSE_MS pause; ledger-circuit.ts). */
  readonly circuit?: LedgerCircuit | undefined;
}

/**
 * The respondent waits this long for the ledger, not for its client's timeouts and retries (three tries of a second
 * each when it hangs): then the hit goes to the buffer and the respondent on. A write that lands after all is
 * counted once with its buffered copy, both carrying the request's id.
 */
export const REDIRECT_STORE_BUDGET_MS = 1_500;

/** How a prefetch is refused: 425 Too Early, the request made before the respondent navigated. */
export const PREFETCH_REFUSED = 425;

/** The redirect handler, from its dependencies. */
export function createRedirectHandler({
  store,
  keyRing,
  buffer,
  landing,
  refusals,
  storeBudgetMs = REDIRECT_STORE_BUDGET_MS,
  perSenderMinute,
  circuit = ledgerCircuit(),
}: RedirectDependencies) {
  const recordRefusal = refusalRecorder(store, refusals);
  const bySender = senderLimiter(perSenderMinute);
  return respondentRoute(async (event, context) => {
    // A prefetch is refused (a browser keeps no prefetch answered 400-599, and asks again if the respondent does
    // navigate); a preview bot gets the plain page. Neither is recorded: no respondent reached the outcome. A 4xx,
    // not a 503: a server error would count toward the server-error alarm, and 429 toward the throttling one.
    const preview = previewRequest(event.headers);
    if (preview === 'prefetch')
      return {
        statusCode: PREFETCH_REFUSED,
        headers: { 'cache-control': 'no-store', vary: 'Sec-Purpose, Purpose' },
        body: '',
      };
    if (preview === 'bot') return respondentAnswer(landingFor(landing, {}));
    const request = hitRequestFrom(event);
    const at = new Date();
    const requestId = requestIdOf(event, context);
    const sourceIp = event.requestContext.http.sourceIp;
    const claimed: { surveyId?: string; outcome?: Outcome; pid?: string; pidEncoded?: string } = {};
    let refusal: { code: RefusalCode; reason: string } | undefined;
    try {
      const { claim, query } = readClaim('redirect', request);
      claimed.surveyId = claim.target.surveyId;
      claimed.outcome = claim.target.outcome;
      const identity = readIdentity(request, query);
      claimed.pid = identity.pid;
      // Only a pid holding a kept escape can read otherwise than encodeURIComponent writes it.
      if (identity.pid.includes('%')) claimed.pidEncoded = pidAsSent(request.rawQueryString, identity.pid);
      let check: Awaited<ReturnType<typeof checkSignature>>;
      try {
        check = await checkSignature(keyRing, claim, at);
      } catch (error) {
        if (!(error instanceof KeyRingUnavailable)) throw error;
        // Neither genuine nor forged as far as can be told: the respondent goes on, the hit is in the log.
        logger.error('redirect hit not recorded: the signing key ring is unavailable', {
          ...hitFields({ ...claim.target, ...identity }),
          kid: loggableKeyId(claim.kid),
          at: at.toISOString(),
          error: describe(error),
        });
        count('RedirectNotRecorded');
        return respondentAnswer(landingFor(landing, claimed));
      }
      if (!check.valid) {
        refusal = { code: signatureRefusal(check.reason), reason: `signature ${check.reason}` };
      } else {
        const sender = bySender(sourceIp);
        if (sender === 'record') {
          // The ring the signature was just checked with (cached in the container).
          const secret = (await keyRing().catch(() => undefined))?.current.secret;
          await record({
            ...claim.target,
            ...identity,
            from: secret ? senderOf(sourceIp, secret) : undefined,
          });
        } else if (sender === 'first-over') {
          // A flood from one sender: answered as every redirect is, not recorded (once a minute in the log).
          logger.warn('redirects from one sender past its bound this minute: answered, not recorded', {
            surveyId: claim.target.surveyId,
            perMinute: perSenderMinute ?? REDIRECTS_PER_SENDER_MINUTE,
          });
          count('RedirectsOverSenderBound');
        }
      }
    } catch (error) {
      if (!(error instanceof Rejection)) throw error;
      refusal = { code: error.code, reason: error.message };
    }
    if (refusal) await reject(refusal);
    return respondentAnswer(landingFor(landing, claimed));

    /** Whether the hit is in the buffer now. */
    async function intoBuffer(hit: Parameters<typeof store.recordHit>[0], cause: Record<string, string>) {
      if (!buffer) return false;
      try {
        const buffered = await buffer.put(hit, at, requestId);
        logger.warn('redirect hit buffered: the ledger is unavailable', { id: buffered.id, error: cause });
        count('BufferedHits', { channel: 'redirect' });
        return true;
      } catch {
        return false;
      }
    }

    async function record(hit: Parameters<typeof store.recordHit>[0]) {
      // The ledger failed moments ago in this container: straight to the buffer, the ledger only if that fails (and
      // the buffer not again after it: the respondent waits for each once, as RELIABILITY.md bounds it).
      let bufferFailed = false;
      if (buffer && circuit.paused()) {
        if (await intoBuffer(hit, { name: 'LedgerPaused' })) return;
        bufferFailed = true;
      }
      try {
        const { attempt, effect, unflaggedDays } = await storeAnswerWithin(
          (signal) => store.recordHit(hit, at, requestId, signal),
          storeBudgetMs,
        );
        circuit.succeeded();
        // The hit stands; the days it changed wait for their daily re-check instead of the next run.
        if (unflaggedDays)
          logger.warn('late redirect: its earlier day not flagged', {
            ...hitFields(hit),
            days: unflaggedDays,
          });
        if (effect === 'conflict') {
          logger.warn('redirect conflicts with the standing outcome', {
            ...hitFields(hit),
            standing: attempt.redirect?.outcome,
          });
          count('ConflictingHit', { channel: 'redirect' });
        }
      } catch (error) {
        if (error instanceof StoreUnavailable) circuit.failed();
        // The respondent is not kept waiting for the store: the hit goes to the buffer, or at least the log.
        if (!bufferFailed && (await intoBuffer(hit, describe(error)))) return;
        logger.error('redirect hit not recorded', {
          ...hitFields(hit),
          at: at.toISOString(),
          error: describe(error),
        });
        count('RedirectNotRecorded');
      }
    }

    async function reject({ code, reason }: { code: RefusalCode; reason: string }) {
      const rejected = refusedHit('redirect', request, { code, reason }, { at, requestId, sourceIp });
      logger.warn('redirect hit rejected', {
        code,
        reason,
        surveyId: claimed.surveyId,
        outcome: claimed.outcome,
      });
      count('RejectedRedirect');
      await recordRefusal(rejected);
    }
  });
}

const hitFields = (hit: { surveyId: string; outcome: Outcome; pid: string; token: string }) => ({
  surveyId: hit.surveyId,
  outcome: hit.outcome,
  pid: hit.pid,
  token: hit.token,
});
