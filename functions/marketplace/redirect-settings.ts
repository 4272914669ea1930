/**
 * The redirect settings this product wants a survey to have at the marketplace: all nine fields, always, since
 * the marketplace merges and a field left out would keep whatever an earlier configuration put there.
 */
import { createHash } from 'node:crypto';
import type { SurveyUrls } from '../receiving/survey-urls';
import { REDIRECT_SETTING_FIELDS, type RedirectSettings } from './marketplace-records';

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

/** A stable fingerprint of a survey's settings: equal settings, equal fingerprint. */
export function settingsFingerprint(settings: RedirectSettings): string {
  const canonical = REDIRECT_SETTING_FIELDS.map((field) => [field, settings[field] ?? null]);
  return createHash('sha256').update(JSON.stringify(canonical)).digest('base64url').slice(0, 22);
}

export interface FieldDifference {
  readonly field: (typeof REDIRECT_SETTING_FIELDS)[number];
  readonly expected: string | undefined;
  readonly actual: string | undefined;
}

/** Fields whose value at the marketplace is not what this product set. Methods compare case-insensitively. */
export function settingsDifferences(expected: RedirectSettings, actual: RedirectSettings): FieldDifference[] {
  const differences: FieldDifference[] = [];
  for (const field of REDIRECT_SETTING_FIELDS) {
    const want = expected[field];
    const have = actual[field];
    const same = field.endsWith('Method') ? want?.toUpperCase() === have?.toUpperCase() : want === have;
    if (!same) differences.push({ field, expected: want, actual: have });
  }
  return differences;
}
