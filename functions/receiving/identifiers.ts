/**
 * The identifiers a hit carries, and what this product accepts for each.
 *
 * The survey id is ours and strictly numeric. pid and token are the supplier's: the signature proves a hit is
 * genuine, so their shape is not this product's business. Any Unicode text the marketplace can substitute is
 * accepted; refused is only what cannot be an identifier: a missing value, an unsubstituted placeholder,
 * control characters (they would split a log line or a CSV row) or text that is not well-formed Unicode, and
 * anything over the byte bound.
 *
 * Ids up to 64 bytes of UTF-8 for a pid and 72 for a token (the marketplace's tokens are hex-like, a UUID is 36)
 * keep an attempt within one 1 KB DynamoDB write unit for the hits of every day (redirect, postback, a retry of
 * each) even when made wholly of characters the keys must escape (`#`, `%`, three bytes each in a key):
 * test/integration/item-size.test.ts measures that worst case at 992 bytes. Longer ids are accepted (a genuine
 * postback refused is a postback lost, and nothing in the marketplace bounds a panel's ids), at two units a hit,
 * up to what DynamoDB's keys can hold escaped: a pid in the partition key (2,048 bytes), a token in sort keys
 * (1,024 bytes, escaped twice in the discrepancy index's).
 * Keys escape their delimiters (ledger-schema.ts `keyPart`), so every value keys unambiguously.
 */

export const SURVEY_ID_PATTERN = /^[1-9][0-9]{0,11}$/;
/** The longest ids an attempt stays within one write unit with. */
export const ONE_UNIT_PID_BYTES = 64;
export const ONE_UNIT_TOKEN_BYTES = 72;
/** The longest ids accepted. */
export const PID_MAX_BYTES = 512;
export const TOKEN_MAX_BYTES = 128;

/** What the marketplace leaves in a URL when it did not substitute a placeholder. */
const PLACEHOLDER = /\[%%\w+%%\]/;

/**
 * A value that says nothing (missing, empty, or a placeholder left as it was): another place's value may stand.
 * Spaces are a value (an id may be made of them), as `identifierProblem` accepts them.
 */
export const isBlank = (value: string | undefined): boolean =>
  value === undefined || value === '' || PLACEHOLDER.test(value);
/** C0, DEL and C1 controls; lone surrogates (not Unicode text, and not storable as UTF-8). */
const CONTROL = /\p{Cc}/u;
const LONE_SURROGATE = /\p{Cs}/u;

export type IdentifierField = 'surveyId' | 'pid' | 'token';

const MAX_BYTES: Record<Exclude<IdentifierField, 'surveyId'>, number> = {
  pid: PID_MAX_BYTES,
  token: TOKEN_MAX_BYTES,
};

/** Why a value is not an acceptable identifier, or undefined when it is. */
export function identifierProblem(field: IdentifierField, value: string | undefined): string | undefined {
  if (value === undefined || value === '') return `${field} is missing`;
  if (PLACEHOLDER.test(value)) return `${field} is an unsubstituted placeholder`;
  if (field === 'surveyId') {
    return SURVEY_ID_PATTERN.test(value)
      ? undefined
      : `${field} must be a positive integer of at most 12 digits`;
  }
  if (CONTROL.test(value)) return `${field} must not contain control characters`;
  if (LONE_SURROGATE.test(value)) return `${field} must be well-formed Unicode text`;
  const max = MAX_BYTES[field];
  if (Buffer.byteLength(value, 'utf8') > max) return `${field} must be at most ${max} bytes of UTF-8`;
  return undefined;
}
