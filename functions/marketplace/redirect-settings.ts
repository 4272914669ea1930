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

/** The fields a read-back must show as set: the server-to-server postbacks, what finance trusts. */
const MUST_READ_BACK = new Set<string>(['pstbck', 'pstbck_fail']);

/**
 * Fields the marketplace's controller keeps no per-survey value of: a read-back shows the supplier's global value,
 * or nothing, whatever was set. Never a difference: terminations earn nothing, and postbacks are received by either
 * method, so what they read back as cannot be drift, and re-applying would not change it.
 */
export const NOT_KEPT_PER_SURVEY: ReadonlySet<string> = new Set([
  'tUrl',
  'pstBckSuccessMethod',
  'pstBckFailMethod',
]);

/**
 * Fields whose value at the marketplace is not what this product set. URLs compare as the same characters however
 * escaped (`%5B%25%25pid%25%25%5D` is `[%%pid%%]`, `&amp;` is `&`), the scheme and host in any case, a default port
 * or none, the query's parameters in any order. A field the read-back leaves out is not a difference, except the two postbacks; `tUrl` and the methods
 * never are (`NOT_KEPT_PER_SURVEY`): the marketplace's own controller stores none of them per survey and reads back
 * the supplier's global values or nothing, so comparing them would fail every survey's verification for good.
 */
export function settingsDifferences(expected: RedirectSettings, actual: RedirectSettings): FieldDifference[] {
  const differences: FieldDifference[] = [];
  for (const field of REDIRECT_SETTING_FIELDS) {
    const want = expected[field];
    const have = actual[field];
    if (NOT_KEPT_PER_SURVEY.has(field)) continue;
    if (have === undefined && want !== undefined && !MUST_READ_BACK.has(field)) continue;
    const same =
      want === have || (want !== undefined && have !== undefined && comparable(want) === comparable(have));
    if (!same) differences.push({ field, expected: want, actual: have });
  }
  return differences;
}

/**
 * A URL as `unescaped` reads it, its query's parameters in any order: split at the `&` written as such (or as HTML's
 * `&amp;`) before anything is decoded, so an escaped `%26` in a value never reads as a separator (a `kid=k1%26sig=S`
 * is one parameter, with no signature).
 */
function comparable(url: string): string {
  const text = url.replace(/&amp;/gi, '&');
  const at = text.indexOf('?');
  if (at < 0) return unescaped(text);
  const parameters = text
    .slice(at + 1)
    .split('&')
    .map(unescaped)
    .sort();
  return JSON.stringify([unescaped(text.slice(0, at)), parameters]);
}

/**
 * Escapes that change how a URL is read when undone: a path's `/`, the query's `?`, `=`, `&` and `+` (a space to a
 * form decoder), a fragment's `#`. `kid%3Dk1` is no `kid` parameter, and `/postback%2F7001` no route, at the
 * receiver: kept escaped (their hex in upper case), so a URL the marketplace holds so reads as drift.
 */
const DELIMITER_ESCAPES = new Set(['23', '26', '2B', '2F', '3D', '3F']);

/**
 * A URL's characters with HTML's `&amp;` and percent-escapes of ASCII undone (once; other escapes kept, and those of
 * delimiters, `DELIMITER_ESCAPES`), its scheme and host in lower case and a default port dropped
 * (`HTTPS://Hits.Example.com:443/` is `https://hits.example.com/`).
 */
function unescaped(url: string): string {
  return url
    .replace(
      /^([a-z][a-z0-9+.-]*):\/\/([^/?#@]*)/i,
      (_, scheme: string, host: string) =>
        `${scheme.toLowerCase()}://${host.toLowerCase().replace(scheme.toLowerCase() === 'https' ? /:443$/ : /:80$/, '')}`,
    )
    .replace(/&amp;/gi, '&')
    .replace(/%([0-7][0-9A-Fa-f])/g, (_, hex: string) =>
      DELIMITER_ESCAPES.has(hex.toUpperCase())
        ? `%${hex.toUpperCase()}`
        : String.fromCharCode(Number.parseInt(hex, 16)),
    );
}
