/**
 * The identifiers a hit carries, and what this product accepts for each.
 *
 * The survey id is ours and strictly numeric. pid and token are the supplier's: the signature proves a hit is
 * genuine, so their shape is not this product's business. Any Unicode text the marketplace can substitute is
 * accepted, control characters too (a panel whose ids carry a tab or a line end its CSV import left there is sent
 * them back; refused, its postbacks would be lost, and every place that shows an id escapes them: printable.ts,
 * the CSV's quoting). Refused is only what cannot be an identifier: a missing value, an unsubstituted
 * placeholder, NUL, the C1 controls (U+0080-U+009F: what a Windows-1252 `€` or curly quote becomes when read as
 * Latin-1, http-route.ts, so storing one would store another id than the panel's), text that is not well-formed
 * Unicode, and anything over the byte bound.
 *
 * Ids up to 64 bytes of UTF-8 for a pid and 72 for a token (the marketplace's tokens are hex-like, a UUID is 36)
 * keep an attempt within one 1 KB DynamoDB write unit for the hits of every day (redirect, postback, a retry of
 * each) even when made wholly of characters the keys must escape (`#`, `%`, three bytes each in a key):
 * test/integration/item-size.test.ts measures that worst case at 992 bytes. Longer ids are accepted (a genuine
 * postback refused is a postback lost, and nothing in the marketplace bounds a panel's ids: an encrypted or signed
 * id, a JWT, runs to hundreds of bytes), at a write unit more a hit for each KB, up to 2 KB for a pid (its URL still
 * well inside the 10 KB API Gateway takes for a request line and headers) and 128 bytes for a token. An id too long
 * for its key escaped is keyed by its digest (ledger-schema.ts `keyId`).
 * Keys escape their delimiters (ledger-schema.ts `keyPart`), so every value keys unambiguously.
 */

export const SURVEY_ID_PATTERN = /^[1-9][0-9]{0,11}$/;
/** The longest ids an attempt stays within one write unit with. */
export const ONE_UNIT_PID_BYTES = 64;
export const ONE_UNIT_TOKEN_BYTES = 72;
/** The longest ids accepted. */
export const PID_MAX_BYTES = 2048;
export const TOKEN_MAX_BYTES = 128;

/**
 * What the marketplace leaves in a URL when it did not substitute a placeholder: the whole value (an id that holds
 * the form among other text is an id).
 */
const PLACEHOLDER = /^\s*\[%%\w+%%\]\s*$/;
export const isPlaceholder = (value: string): boolean => PLACEHOLDER.test(value);

/**
 * A value that says nothing (missing, empty, or a placeholder left as it was): another place's value may stand.
 * Spaces are a value (an id may be made of them), as `identifierProblem` accepts them.
 */
export const isBlank = (value: string | undefined): boolean =>
  value === undefined || value === '' || PLACEHOLDER.test(value);
/**
 * NUL and the C1 controls; the noncharacters U+FFFE and U+FFFF (no text holds them, and SQS refuses a message with
 * them: a postback buffered while the ledger is down would be lost); lone surrogates (not Unicode text, and not
 * storable as UTF-8).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching these controls is the point.
const UNACCEPTED_CONTROL = /[\u0000\u0080-\u009f]/u;
const NONCHARACTER = /[\uFFFE\uFFFF]/u;
const LONE_SURROGATE = /\p{Cs}/u;

export type IdentifierField = 'surveyId' | 'pid' | 'token';

const MAX_BYTES: Record<Exclude<IdentifierField, 'surveyId'>, number> = {
  pid: PID_MAX_BYTES,
  token: TOKEN_MAX_BYTES,
};

/**
 * Why a value is not an acceptable identifier, or undefined when it is. A pid given empty (`pid=`) is one: the
 * marketplace substitutes the panel's id as the entry link carried it, and a panel that sent none gets its
 * respondents' postbacks with an empty pid; the token names the attempt (refused, a genuine postback is lost).
 */
export function identifierProblem(field: IdentifierField, value: string | undefined): string | undefined {
  if (field === 'pid' && value === '') return undefined;
  if (value === undefined || value === '') return `${field} is missing`;
  if (PLACEHOLDER.test(value)) return `${field} is an unsubstituted placeholder`;
  if (field === 'surveyId') {
    if (SURVEY_ID_PATTERN.test(value)) return undefined;
    // The marketplace's ids are numbers: `01001` is not how it writes 1001 (nor any survey of its).
    return /^0[0-9]+$/.test(value)
      ? `${field} must not start with 0 (the marketplace writes its survey ids without leading zeros)`
      : `${field} must be a positive integer of at most 12 digits`;
  }
  if (UNACCEPTED_CONTROL.test(value))
    return `${field} must not contain NUL or C1 control characters (U+0080-U+009F)`;
  if (LONE_SURROGATE.test(value) || NONCHARACTER.test(value))
    return `${field} must be well-formed Unicode text`;
  const max = MAX_BYTES[field];
  if (Buffer.byteLength(value, 'utf8') > max) return `${field} must be at most ${max} bytes of UTF-8`;
  return undefined;
}
