/**
 * The redirect settings this product wants a survey to have at the marketplace: all nine fields, always, since
 * the marketplace merges and a field left out would keep whatever an earlier configuration put there.
 */
import type { RedirectSettings } from './marketplace-records';
import type { SurveyUrls } from './survey-urls';

export type PostbackMethod = 'GET' | 'POST';

export interface PostbackMethods {
  readonly success: PostbackMethod;
  readonly fail: PostbackMethod;
}

export const DEFAULT_POSTBACK_METHODS: PostbackMethods = { success: 'GET', fail: 'GET' };

/** Every redirect-settings field, from the survey's signed URLs and the postback methods. */
export function desiredRedirectSettings(
  urls: SurveyUrls,
  methods: PostbackMethods = DEFAULT_POSTBACK_METHODS,
): Required<RedirectSettings> {
  return { ...urls, pstBckSuccessMethod: methods.success, pstBckFailMethod: methods.fail };
}
