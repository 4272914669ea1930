/**
 * The faults the local marketplace can put on its supplier API: a hung call, 429, 503 and a truncated body,
 * each with a share of calls. Drawn from the seeded PRNG in a fixed order, so one seed gives the same faults
 * run after run.
 */
import { type Answer, failure } from './answers';
import type { Random } from './random';

/** Shares of supplier API calls answered with a fault instead of the real answer. */
export interface ApiFaults {
  tooManyRequests: number;
  serverError: number;
  /** Never answered (the client's timeout fires). */
  timeout: number;
  /** 200 with a truncated JSON body. */
  malformed: number;
}

export const NO_API_FAULTS: ApiFaults = { tooManyRequests: 0, serverError: 0, timeout: 0, malformed: 0 };

/** The fault a call gets before it is answered: left hanging, or an error answer; undefined for none. */
export function faultBeforeAnswer(random: Random, faults: ApiFaults): 'hang' | Answer | undefined {
  if (random.chance(faults.timeout)) return 'hang';
  if (random.chance(faults.tooManyRequests)) return failure(429, 'Too many requests');
  if (random.chance(faults.serverError)) return failure(503, 'Service unavailable');
  return undefined;
}

/** Drawn after the answer: the first bytes of its body, to send with 200, or undefined to send it whole. */
export function truncatedBody(random: Random, faults: ApiFaults, answer: Answer): string | undefined {
  return random.chance(faults.malformed) ? JSON.stringify(answer.body).slice(0, 20) : undefined;
}
