/**
 * How the receivers count a refused hit in the ledger: for investigation (`rejected`) and the survey health check,
 * never at the price of a genuine hit. A flood of forged hits must not hold the receivers' executions or the
 * ledger: each container records at most `perSecond` refusals a second (the rest are counted in a metric only),
 * and a refusal is answered after `waitMs` at most: a write not done by then is given up (aborted with its retries,
 * for Lambda freezes a container once it has answered, and a write left running would go on, or retry, whenever
 * the container next ran). A refusal that could not be counted still stands.
 */
import type { LedgerStore, RejectedHit } from '../ledger/ledger-store';
import { describe } from '../runtime/http-route';
import { count, logger } from '../runtime/observability';
import { settleWithin } from '../shared/time-limit';

export const REFUSALS_RECORDED_PER_SECOND = 5;
/**
 * Claimed surveys a container's refused postbacks are counted under in a minute, at most; the rest of the minute's
 * under none (`-`). The survey id is the sender's to make up: refusals to ever new ids were an item each (kept 90
 * days) and a health-check window of hundreds of thousands to read. A genuine burst (a broken signature on every
 * survey's URLs) still names its first surveys every minute, in every container.
 */
export const REFUSED_SURVEYS_PER_MINUTE = 25;
export const REFUSAL_WAIT_MS = 300;
/**
 * Refusals only the holder of a genuine URL can cause (`signature_retired_key`: the signature holds, under a key
 * retired since; `signed_forbidden` and `signed_input`: it holds, the postback refused for its source address or
 * what it carries): what turns a survey's health failing, for the marketplace's postbacks are being lost. They are
 * counted apart from the rest, a second, always under their survey: forged hits to made-up surveys, which cost
 * nothing to send, used up both bounds above and hid them (stored under no survey, or not at all).
 */
export const GENUINE_REFUSALS_PER_SECOND = 20;
const GENUINE_REFUSAL_CODES: ReadonlySet<string> = new Set([
  'signature_retired_key',
  'signed_forbidden',
  'signed_input',
]);

export type RefusalRecording = 'recorded' | 'failed' | 'pending' | 'not-recorded';

export interface RefusalRecorderOptions {
  readonly perSecond?: number;
  readonly waitMs?: number;
  readonly now?: () => number;
}

export function refusalRecorder(
  store: Pick<LedgerStore, 'recordRejectedHit'>,
  options: RefusalRecorderOptions = {},
): (rejected: RejectedHit) => Promise<RefusalRecording> {
  const perSecond = options.perSecond ?? REFUSALS_RECORDED_PER_SECOND;
  const genuinePerSecond = Math.max(perSecond, GENUINE_REFUSALS_PER_SECOND);
  const waitMs = options.waitMs ?? REFUSAL_WAIT_MS;
  const now = options.now ?? Date.now;
  let second = Number.NaN;
  let used = 0;
  let usedGenuine = 0;
  let minute = Number.NaN;
  const surveys = new Set<string>();
  return async (refused) => {
    const current = Math.floor(now() / 1000);
    if (current !== second) [second, used, usedGenuine] = [current, 0, 0];
    const genuine = GENUINE_REFUSAL_CODES.has(refused.code);
    if (genuine ? usedGenuine >= genuinePerSecond : used >= perSecond) {
      count('RefusalsNotRecorded', { channel: refused.channel });
      return 'not-recorded';
    }
    if (genuine) usedGenuine++;
    else used++;
    if (Math.floor(current / 60) !== minute) {
      minute = Math.floor(current / 60);
      surveys.clear();
    }
    let rejected = refused;
    if (!genuine && refused.surveyId !== undefined && !surveys.has(refused.surveyId)) {
      if (surveys.size < REFUSED_SURVEYS_PER_MINUTE) surveys.add(refused.surveyId);
      else rejected = { ...refused, surveyId: undefined };
    }
    const giveUp = new AbortController();
    const write = store.recordRejectedHit(rejected, giveUp.signal).then(
      (): RefusalRecording => 'recorded',
      (error: unknown): RefusalRecording => {
        // Given up below, and counted there.
        if (giveUp.signal.aborted) return 'pending';
        logger.error('refused hit not recorded', {
          channel: rejected.channel,
          code: rejected.code,
          error: describe(error),
        });
        return 'failed';
      },
    );
    return settleWithin(write, waitMs, (): RefusalRecording => {
      giveUp.abort();
      count('RefusalsNotRecorded', { channel: rejected.channel });
      return 'pending';
    });
  };
}
