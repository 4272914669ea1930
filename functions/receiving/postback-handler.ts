/**
 * Postbacks: the marketplace's server reporting an attempt's success or fail, over GET or POST.
 * Answers 200 only once the outcome is durable: in the ledger, or, while the ledger is unavailable, in the
 * buffer the drainer empties into it. 403 for a bad signature or a source outside the allow-list, 400 for bad
 * input: each refusal is counted in the ledger per source, code, claimed survey and UTC minute (one write, no
 * read: the refusal path, never the hit path), so the survey health check sees a survey's postbacks being refused.
 */

import { type LedgerStore, StoreUnavailable, storeAnswerWithin } from '../ledger/ledger-store';
import type { HitBuffer } from '../runtime/hit-buffer';
import { describe, hitRequestFrom, json, jsonRoute, requestIdOf } from '../runtime/http-route';
import { checkSignature, type KeyRingSource } from '../runtime/key-ring-source';
import { count, logger } from '../runtime/observability';
import { type RefusalCode, Rejection, signatureRefusal } from '../shared/rejection';
import { missingSignatureMessage, readClaim, readIdentity, refusedHit } from './hit-request';
import { type LedgerCircuit, ledgerCircuit } from './ledger-circuit';
import { type RefusalRecorderOptions, refusalRecorder } from './refusal-recorder';
import { loggableKeyId } from './signing';

export interface PostbackDependencies {
  readonly store: Pick<LedgerStore, 'recordHit' | 'recordRejectedHit'>;
  readonly keyRing: KeyRingSource;
  /** Where a hit waits while the ledger is down; without one the postback answers 503 and is retried. */
  readonly buffer?: HitBuffer | undefined;
  /** The source addresses a postback may come from; unset, any. */
  readonly postbackSources?: ((ip: string) => boolean) | undefined;
  /** How refused postbacks are counted in the ledger (refusal-recorder.ts). */
  readonly refusals?: RefusalRecorderOptions | undefined;
  /** How long the sender waits for the ledger before the hit goes to the buffer (default POSTBACK_STORE_BUDGET_MS). */
  readonly storeBudgetMs?: number | undefined;
  /** The container's memory that the ledger just failed (default: a LEDGER_PAUSE_MS pause; ledger-circuit.ts). */
  readonly circuit?: LedgerCircuit | undefined;
}

/**
 * The sender waits this long for the ledger, then the buffer's two tries of a second: answered within about 4 s,
 * inside the 5 s a server-to-server callback is given by the strictest marketplaces, even while the ledger hangs.
 */
export const POSTBACK_STORE_BUDGET_MS = 2_000;

/**
 * How long a postback may take from the handler's start to its answer, the buffer's tries included. What went
 * before the ledger (a cold container's key ring fetch, up to KEY_RING_FETCH_TIMEOUT_MS) comes off the ledger's
 * budget, so a slow key ring and a hanging ledger together still answer inside the 5 s.
 */
export const POSTBACK_ANSWER_BUDGET_MS = 4_000;
/** What the buffer's two tries of a second can take (runtime/hit-buffer.ts). */
const BUFFER_TRIES_MS = 2_000;
/** The least the ledger is given, however late the hit reaches it: a healthy write takes a few milliseconds. */
const LEAST_STORE_BUDGET_MS = 300;

/** The ledger's budget for a hit `elapsedMs` into its handling. */
export const storeBudgetAfter = (elapsedMs: number, budgetMs: number): number =>
  Math.max(
    Math.min(LEAST_STORE_BUDGET_MS, budgetMs),
    Math.min(budgetMs, POSTBACK_ANSWER_BUDGET_MS - BUFFER_TRIES_MS - elapsedMs),
  );

/** The postback handler, from its dependencies. */
export function createPostbackHandler({
  store,
  keyRing,
  buffer,
  postbackSources,
  refusals,
  storeBudgetMs = POSTBACK_STORE_BUDGET_MS,
  circuit = ledgerCircuit(),
}: PostbackDependencies) {
  const recordRefusal = refusalRecorder(store, refusals);
  return jsonRoute(async (event, context) => {
    const started = Date.now();
    const request = hitRequestFrom(event);
    const sourceIp = event.requestContext.http.sourceIp;
    const requestId = requestIdOf(event, context);
    // The refusal stands whether or not it could be counted.
    const refuse = async (code: RefusalCode, reason: string) => {
      await recordRefusal(
        refusedHit('postback', request, { code, reason }, { at: new Date(), requestId, sourceIp }),
      );
    };
    /** Whether the postback's signature held: its refusal, if any, is then one only a genuine URL's holder causes. */
    let signed = false;
    try {
      const { claim, query } = readClaim('postback', request);
      if (postbackSources && !postbackSources(sourceIp)) {
        // Signed or not, it is refused; signed, it is the marketplace's from an address it did not use before.
        signed = (await checkSignature(keyRing, claim, new Date()).catch(() => undefined))?.valid === true;
        logger.warn('postback refused: source', { ...claim.target, sourceIp, signed });
        count('RejectedSource');
        await refuse(
          signed ? 'signed_forbidden' : 'forbidden',
          signed ? 'source address not allowed; its signature holds' : 'source address not allowed',
        );
        throw new Rejection(403, 'forbidden', 'source address not allowed');
      }
      const check = await checkSignature(keyRing, claim, new Date());
      if (!check.valid) {
        logger.warn('postback refused: signature', {
          reason: check.reason,
          ...claim.target,
          kid: loggableKeyId(claim.kid),
          sourceIp,
        });
        count('RejectedPostback', { reason: 'signature' });
        await refuse(signatureRefusal(check.reason), `signature ${check.reason}`);
        throw new Rejection(
          403,
          'forbidden',
          check.reason === 'missing' ? missingSignatureMessage(request, claim) : 'signature is not valid',
        );
      }
      signed = true;
      const identity = readIdentity(request, query);
      const hit = { ...claim.target, ...identity };
      const at = new Date();
      // The ledger is down: the hit is acknowledged once it is in the buffer, and only then.
      const buffered = async (cause: Record<string, string>) => {
        if (!buffer) return undefined;
        try {
          const { id } = await buffer.put(hit, at, requestId);
          logger.warn('postback buffered: the ledger is unavailable', { id, error: cause });
          count('BufferedHits', { channel: 'postback' });
          return json(200, { ok: true, effect: 'buffered' });
        } catch (bufferError) {
          logger.error('postback not buffered', { error: describe(bufferError) });
          return undefined;
        }
      };
      // The ledger failed moments ago in this container: straight to the buffer, the ledger only if that fails.
      if (buffer && circuit.paused()) {
        const answer = await buffered({ name: 'LedgerPaused', message: 'the ledger failed moments ago' });
        if (answer) return answer;
      }
      let recorded: Awaited<ReturnType<typeof store.recordHit>>;
      try {
        recorded = await storeAnswerWithin(
          (signal) => store.recordHit(hit, at, requestId, signal),
          storeBudgetAfter(Date.now() - started, storeBudgetMs),
        );
        circuit.succeeded();
      } catch (error) {
        if (!(error instanceof StoreUnavailable)) throw error;
        circuit.failed();
        const answer = await buffered(describe(error));
        if (answer) return answer;
        logger.error('postback neither recorded nor buffered', { error: describe(error) });
        throw error;
      }
      const { attempt, effect } = recorded;
      if (recorded.unflaggedDays) {
        // The hit stands; the days it changed wait for their daily re-check instead of the next run.
        logger.warn('late postback: its earlier day not flagged', {
          ...claim.target,
          token: identity.token,
          days: recorded.unflaggedDays,
        });
      }
      if (effect === 'conflict') {
        logger.warn('postback conflicts with the standing outcome', {
          ...claim.target,
          pid: identity.pid,
          token: identity.token,
          standing: attempt.postback?.outcome,
        });
        count('ConflictingHit', { channel: 'postback' });
      } else {
        logger.debug('postback recorded', {
          ...claim.target,
          pid: identity.pid,
          token: identity.token,
          effect,
        });
      }
      return json(200, { ok: true, effect, outcome: attempt.postback?.outcome });
    } catch (error) {
      if (error instanceof Rejection && error.status !== 403) {
        // `reason`, not `message`: the Logger reserves `message` for the log line's own text and drops the key.
        logger.warn('postback refused: input', { status: error.status, reason: error.message, sourceIp });
        count('RejectedPostback', { reason: 'input' });
        await refuse(signed ? 'signed_input' : error.code, error.message);
      }
      throw error;
    }
  });
}
