/**
 * The seven URLs of a survey, as this product hands them to the marketplace (`setRedirectionForSurvey`).
 */
import { identifierProblem } from './identifiers';
import {
  type Channel,
  OUTCOMES,
  type Outcome,
  POSTBACK_FIELD,
  POSTBACK_OUTCOMES,
  REDIRECT_FIELD,
} from './outcome';
import { type KeyRing, type SigningKey, sign } from './signing';

/** The marketplace's literal placeholders; it substitutes them per attempt. */
export const PID_PLACEHOLDER = '[%%pid%%]';
export const TOKEN_PLACEHOLDER = '[%%token%%]';

/** The path a channel's hits arrive on. Shared with the route table so they cannot drift apart. */
export const HIT_PATHS = {
  redirect: '/redirect/{surveyId}/{outcome}',
  postback: '/postback/{surveyId}/{outcome}',
} as const satisfies Record<Channel, string>;

export type SurveyUrls = Record<
  (typeof REDIRECT_FIELD)[Outcome] | (typeof POSTBACK_FIELD)['success' | 'fail'],
  string
>;

/** One signed hit URL with the placeholders left in. */
export function hitUrl(
  baseUrl: string,
  channel: Channel,
  surveyId: string,
  outcome: Outcome,
  key: SigningKey,
): string {
  const path = HIT_PATHS[channel].replace('{surveyId}', surveyId).replace('{outcome}', outcome);
  const signature = sign(key, { channel, surveyId, outcome });
  return `${trimSlash(baseUrl)}${path}?pid=${PID_PLACEHOLDER}&token=${TOKEN_PLACEHOLDER}&kid=${key.kid}&sig=${signature}`;
}

/**
 * Builds the five redirect and two postback URLs of a survey, signed with the ring's current key. The postbacks on
 * `postbackBaseUrl` when given: a host of their own, which no respondent's browser is ever sent to.
 */
export function buildSurveyUrls(
  baseUrl: string,
  surveyId: string,
  ring: KeyRing,
  postbackBaseUrl: string = baseUrl,
): SurveyUrls {
  const problem = identifierProblem('surveyId', surveyId);
  if (problem) throw new RangeError(problem);
  for (const url of [baseUrl, postbackBaseUrl])
    if (!/^https?:\/\/[^\s?#]+$/.test(trimSlash(url))) {
      throw new RangeError('base URL must be an http(s) URL without query or fragment');
    }
  const urls: Partial<SurveyUrls> = {};
  for (const outcome of OUTCOMES) {
    urls[REDIRECT_FIELD[outcome]] = hitUrl(baseUrl, 'redirect', surveyId, outcome, ring.current);
  }
  for (const outcome of POSTBACK_OUTCOMES) {
    urls[POSTBACK_FIELD[outcome]] = hitUrl(postbackBaseUrl, 'postback', surveyId, outcome, ring.current);
  }
  return urls as SurveyUrls;
}

function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}
