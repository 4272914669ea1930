/**
 * The outcomes an attempt can end in, and the channels that report them.
 *
 * The marketplace knows five redirect targets (one per outcome) and two postbacks (success and fail).
 * Everything else in the product speaks in these names; the marketplace's field names appear only here.
 */

export const OUTCOMES = ['success', 'fail', 'overquota', 'quality', 'termination'] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** Outcomes the marketplace reports server-to-server. */
export const POSTBACK_OUTCOMES = ['success', 'fail'] as const satisfies readonly Outcome[];
export type PostbackOutcome = (typeof POSTBACK_OUTCOMES)[number];

/** `redirect`: the respondent's browser (a claim anyone can forge); `postback`: the marketplace's server. */
export type Channel = 'redirect' | 'postback';

/** The outcomes a channel can carry. */
export function outcomesOf(channel: Channel): readonly Outcome[] {
  return channel === 'redirect' ? OUTCOMES : POSTBACK_OUTCOMES;
}

/** Narrows a raw path segment to an outcome the channel carries, or undefined. */
export function parseOutcome(channel: Channel, raw: string | undefined): Outcome | undefined {
  return outcomesOf(channel).find((outcome) => outcome === raw);
}

/** The marketplace's redirect-settings field for each redirect outcome (`setRedirectionForSurvey`). */
export const REDIRECT_FIELD = {
  success: 'sUrl',
  fail: 'fUrl',
  overquota: 'oUrl',
  quality: 'qTUrl',
  termination: 'tUrl',
} as const satisfies Record<Outcome, string>;

/** The marketplace's redirect-settings field for each postback outcome. */
export const POSTBACK_FIELD = {
  success: 'pstbck',
  fail: 'pstbck_fail',
} as const satisfies Record<PostbackOutcome, string>;
