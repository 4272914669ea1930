/**
 * Reading a hit out of an HTTP request: which survey and outcome the URL claims, its signature, and the
 * attempt's pid and token, wherever the sender put them (query string, JSON body or form body).
 *
 * Pure: works on a transport-neutral request, so the Lambda handlers, the local server and the tests share it.
 */

import type { RejectedHit } from '../ledger/ledger-store';
import { badRequest, type RefusalCode, Rejection } from '../shared/rejection';
import { type IdentifierField, identifierProblem, isBlank, isPlaceholder } from './identifiers';
import { type Channel, type Outcome, outcomesOf, parseOutcome } from './outcome';
import type { SignedTarget } from './signing';

/** Postback bodies are a handful of fields; anything larger is not a postback. */
export const MAX_BODY_BYTES = 8192;

export interface HitRequest {
  readonly pathParameters: Readonly<Record<string, string | undefined>>;
  /** As received, still percent-encoded. */
  readonly rawQueryString: string;
  readonly contentType?: string | undefined;
  /** The body's Content-Encoding, if the sender compressed it (`gzip` ...); `identity` is none. */
  readonly contentEncoding?: string | undefined;
  /** The body as text (already base64-decoded by the adapter), if any. */
  readonly body?: string | undefined;
  /** The body's bytes were not UTF-8 (the adapter left `body` out rather than decode them lossily). */
  readonly bodyNotUtf8?: boolean | undefined;
  /**
   * The body came as text with replacement characters in it (API Gateway's decoding of bytes that were not UTF-8):
   * an id read from it that holds one is refused, since two ids would read as one; ids that read whole stand.
   */
  readonly bodyLossy?: boolean | undefined;
}

/** What the URL claims: its target and the signature presented for it. */
export interface HitClaim {
  readonly target: SignedTarget;
  readonly kid: string | undefined;
  readonly signature: string | undefined;
  /**
   * The other pairs of key id and signature the query makes when a sender appended a `kid` or `sig` of its own
   * beside the URL's (its own HMAC, an empty one): the hit is genuine when any pair checks out.
   */
  readonly others?: readonly { readonly kid: string | undefined; readonly signature: string | undefined }[];
}

/** How many values of `kid` and of `sig` a query's pairs are made from, at most (the first ones given). */
const SIGNATURE_VALUES = 4;

/** Where the attempt's identifiers were read from. */
export type HitSource = 'query' | 'json' | 'form';

/** A hit whose URL checked out and whose identifiers are valid: ready to record. */
export interface Hit {
  readonly channel: Channel;
  readonly surveyId: string;
  readonly outcome: Outcome;
  readonly pid: string;
  readonly token: string;
  readonly source: HitSource;
  /**
   * A redirect's sender, as a short fingerprint of the address it came from (sender.ts): the health check counts
   * success claims per sender, so one person forging them from one address cannot make a survey look failing.
   */
  readonly from?: string | undefined;
}

type Params = ReadonlyMap<string, string>;

/**
 * What the ledger keeps of a refused hit: the refusal, and what the URL claimed as it came (survey, outcome, and
 * the query's pid and token, unchecked; the store clips and escapes them).
 */
export function refusedHit(
  channel: Channel,
  request: HitRequest,
  refusal: { readonly code: RefusalCode; readonly reason: string },
  received: { readonly at: Date; readonly requestId: string; readonly sourceIp: string },
): RejectedHit {
  const pid = queryParameter(request.rawQueryString, 'pid');
  return {
    at: received.at.toISOString(),
    requestId: received.requestId,
    channel,
    code: refusal.code,
    reason: refusal.reason,
    surveyId: request.pathParameters.surveyId,
    outcome: request.pathParameters.outcome,
    // As a recorded hit's pid reads (a Latin-1 byte kept as its escape), so the two can be told apart and matched;
    // the token too, whose bytes that are not UTF-8 (why it was refused, perhaps) would all read as U+FFFD.
    pid,
    token: queryParameter(request.rawQueryString, 'token'),
    sourceIp: received.sourceIp,
  };
}

/** Reads the survey, outcome, key id and signature a hit's URL claims. Throws a 400 Rejection. */
export function readClaim(channel: Channel, request: HitRequest): { claim: HitClaim; query: Params } {
  const appended = new Map<string, string[]>();
  const query = readParams(request.rawQueryString, 'query', appended);
  const surveyId = request.pathParameters.surveyId;
  const problem = identifierProblem('surveyId', surveyId);
  if (problem) throw badRequest(problem);
  const outcome = parseOutcome(channel, request.pathParameters.outcome);
  if (!outcome) {
    throw badRequest(`outcome must be one of ${outcomesOf(channel).join(', ')}`);
  }
  const kids = [query.get('kid'), ...(appended.get('kid') ?? [])];
  const signatures = [query.get('sig'), ...(appended.get('sig') ?? [])].map(signatureAsSent);
  return {
    claim: {
      target: { channel, surveyId: surveyId as string, outcome },
      kid: kids[0],
      signature: signatures[0],
      others: kids.flatMap((kid, i) =>
        signatures.flatMap((signature, j) => (i === 0 && j === 0 ? [] : [{ kid, signature }])),
      ),
    },
    query,
  };
}

/**
 * The signature is the URL's last parameter, so a sender that adds its own with a second `?` (or leaves a stray
 * newline) leaves them on it: what comes before is the signature as signed (the signed message is the survey,
 * channel and outcome, never the query, so what follows changes nothing of what is checked).
 */
const signatureAsSent = (value: string | undefined) => value?.split(/[?\s]/, 1)[0];

/**
 * The name a query gives `field` in other case (`PID`, `KID`), when it does not give it as written: the URLs built
 * here name every parameter in lower case, and the query's names are read as written.
 */
function namedInOtherCase(request: HitRequest, field: string): string | undefined {
  return [...new URLSearchParams(request.rawQueryString ?? '').keys()].find(
    (key) => key !== field && key.toLowerCase() === field,
  );
}

/**
 * What a postback refused for a missing signature is told: which of `kid` and `sig` the query lacks, and why when
 * it shows (a name in other case, parameters separated by `;`). Never a value of either.
 */
export function missingSignatureMessage(
  request: HitRequest,
  claim: { kid?: string; signature?: string },
): string {
  const absent = [...(claim.kid ? [] : ['kid']), ...(claim.signature ? [] : ['sig'])];
  const raw = request.rawQueryString ?? '';
  const otherCase = absent.flatMap((field) => namedInOtherCase(request, field) ?? []);
  const hint =
    otherCase.length > 0
      ? `: the query has ${otherCase.join(' and ')}, and parameter names are lower-case`
      : !raw.includes('&') && raw.includes(';')
        ? ': parameters are separated by &, not ;'
        : '';
  return `signature is missing (${absent.join(' and ')} not in the query)${hint}`;
}

/**
 * Reads pid and token from the query and, for postbacks, the body. One that says nothing (empty, null, a
 * placeholder left unsubstituted) lets the other stand. When the signed query already carries both, they stand,
 * and a body that cannot be read (or is too large to) or spells them otherwise is ignored, but for a `+` the query
 * read as a space: the marketplace's body format is undocumented, and refusing a genuine postback loses it. When the
 * ids must come from the body too, a value given in both places must agree. Throws a Rejection (400, 413 or 415).
 */
export function readIdentity(
  request: HitRequest,
  query: Params,
): { pid: string; token: string; source: HitSource } {
  // A pid given empty (`pid=`) is given: the marketplace substituted the panel's none (identifiers.ts); so is one
  // left as the placeholder (it had none to substitute, or did not): the token names the attempt.
  const pidGiven = query.get('pid') !== undefined;
  const querySuffices = pidGiven && !isBlank(query.get('token'));
  let body: ParsedBody | undefined;
  try {
    body = readBody(request);
  } catch (error) {
    // Whatever is wrong with it (unreadable, of another type, oversized): the signed query says who it was.
    if (!querySuffices || !(error instanceof Rejection)) throw error;
  }
  const pick = (field: Exclude<IdentifierField, 'surveyId'>): { value: string; fromBody: boolean } => {
    const fromQuery = query.get(field);
    const fromBody = body?.params.get(field);
    if (!isBlank(fromQuery) && !isBlank(fromBody) && fromQuery !== fromBody) {
      // A `+` its sender did not percent-encode reads as a space (in a query, or a form body): values that differ
      // only so are one value, and the query's reading stands, whichever side kept the `+`: it is what a redirect
      // of the same attempt, which has only its query, keyed (the body's `+` over a raw one in the query split one
      // respondent into two attempts, a redirect without a postback and a postback without a redirect).
      const loose = (value: string) => value.replaceAll('+', ' ');
      if (loose(fromQuery as string) === loose(fromBody as string)) return checked(field, fromQuery, false);
      // The signed query carrying both ids is enough, and the body only another spelling of them (a number for
      // `00123`, another encoding): the query's stand, as they would for a redirect of the same attempt.
      if (querySuffices) return checked(field, fromQuery, false);
      throw badRequest(`${field} is given twice with different values (query and body)`);
    }
    if (!isBlank(fromQuery)) return checked(field, fromQuery, false);
    if (!isBlank(fromBody)) {
      if (request.bodyLossy && (fromBody as string).includes('\uFFFD'))
        throw badRequest(`${field} in the body is not well-formed UTF-8`);
      return checked(field, fromBody, true);
    }
    // Nothing usable anywhere: the problem of what there is (a placeholder is named as such), and a name given in
    // other case (`PID`) said to be one: the query's names are read as written, lower-case in the URLs built here.
    const otherCase = fromQuery === undefined ? namedInOtherCase(request, field) : undefined;
    if (otherCase !== undefined && isBlank(fromBody))
      throw badRequest(`${field} is missing: the query has ${otherCase}, and parameter names are lower-case`);
    // A pid left as the placeholder wherever it is given is the empty pid: refused, a genuine postback is lost.
    const given = fromQuery ?? fromBody;
    if (field === 'pid' && given !== undefined && isPlaceholder(given)) return { value: '', fromBody: false };
    return checked(field, given, false);
  };
  const pid = pick('pid');
  const token = pick('token');
  const source: HitSource = body && (pid.fromBody || token.fromBody) ? body.kind : 'query';
  return { pid: pid.value, token: token.value, source };
}

function checked(field: Exclude<IdentifierField, 'surveyId'>, value: string | undefined, fromBody: boolean) {
  const problem = identifierProblem(field, value);
  if (problem) throw badRequest(problem);
  return { value: value as string, fromBody };
}

interface ParsedBody {
  readonly kind: 'json' | 'form';
  readonly params: Params;
}

function readBody(request: HitRequest): ParsedBody | undefined {
  const encoding = request.contentEncoding?.trim().toLowerCase();
  const hasBody = (request.body ?? '') !== '' || request.bodyNotUtf8 === true;
  if (encoding && encoding !== 'identity' && hasBody)
    throw new Rejection(
      415,
      'unsupported_media_type',
      `content encoding ${encoding.slice(0, 40)} is not accepted; send the body uncompressed`,
    );
  if (request.bodyNotUtf8) throw badRequest('body is not well-formed UTF-8');
  const text = request.body ?? '';
  if (Buffer.byteLength(text, 'utf8') > MAX_BODY_BYTES) {
    throw new Rejection(413, 'payload_too_large', `body exceeds ${MAX_BODY_BYTES} bytes`);
  }
  // A byte-order mark is not content, but some encoders put one first.
  const content = text.replace(/^\uFEFF/, '');
  if (content.trim() === '') return undefined;
  const mediaType = request.contentType?.split(';')[0]?.trim().toLowerCase();
  const declared = mediaType ? kindOfMediaType(mediaType) : undefined;
  const evident = sniff(content);
  // The declared type first; when the body is not of it (a sender that labels every request application/json,
  // JSON sent as text/plain), the form the body evidently has: the postback body's format is undocumented, and a
  // genuine postback refused is lost.
  const kinds = [...new Set([declared, evident])].filter((kind) => kind !== undefined);
  if (kinds.length === 0) {
    throw new Rejection(
      415,
      'unsupported_media_type',
      mediaType
        ? `content type ${mediaType.slice(0, 80)} is not accepted; send application/json or application/x-www-form-urlencoded`
        : 'body is neither JSON nor form-encoded',
    );
  }
  let first: { parsed?: ParsedBody; error?: unknown } | undefined;
  for (const kind of kinds) {
    try {
      const parsed = {
        kind,
        // Whitespace around a form is never part of it (an encoder writes spaces as `+` or `%20`): a body ending
        // in a newline, as a line-oriented sender writes it, must not end its last value with one.
        params: kind === 'json' ? readJsonParams(content) : readParams(content.trim(), 'body'),
      };
      if (parsed.params.has('pid') || parsed.params.has('token')) return parsed;
      first ??= { parsed };
    } catch (error) {
      first ??= { error };
    }
  }
  if (first?.parsed) return first.parsed;
  throw first?.error;
}

function kindOfMediaType(mediaType: string): 'json' | 'form' | undefined {
  if (mediaType === 'application/json' || mediaType.endsWith('+json')) return 'json';
  if (mediaType === 'application/x-www-form-urlencoded') return 'form';
  return undefined;
}

/** Whatever its label says, a body is taken as JSON or a form only when its form is unambiguous. */
function sniff(text: string): 'json' | 'form' | undefined {
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) return 'json';
  // name=value pairs joined by `&`, a stray `&` at either end or doubled allowed (form encoders emit them).
  if (/^&*[^=&\s]+=[^&\s]*(&+[^=&\s]+=[^&\s]*)*&*$/.test(trimmed)) return 'form';
  return undefined;
}

/** Only the identifiers are read from a JSON body; other fields are ignored. Keys match case-insensitively. */
function readJsonParams(body: string): Params {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    throw badRequest('body is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw badRequest('JSON body must be an object');
  }
  const repeated = refuseRepeatedIds(body);
  const params = new Map<string, string>();
  for (const [rawKey, parsedRaw] of Object.entries(value)) {
    const raw = repeated.has(rawKey) ? repeated.get(rawKey) : parsedRaw;
    const key = rawKey.toLowerCase();
    if (key !== 'pid' && key !== 'token') continue;
    let text: string;
    // null says nothing: the query's value, if any, stands.
    if (raw === null) continue;
    if (typeof raw === 'string') text = raw;
    else if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= 0) text = String(raw);
    else if (typeof raw === 'number' && Number.isInteger(raw) && raw > 0) {
      // Past 2^53 the parsed number is rounded (a 19-digit id of a sender with 64-bit integers): its digits as
      // written, when the body writes it once, plainly.
      const written = integerAsWritten(body, key, raw);
      if (written === undefined) throw badRequest(`${key} in the JSON body must be a string`);
      text = written;
    } else throw badRequest(`${key} in the JSON body must be a string`);
    const seen = params.get(key);
    if (seen !== undefined && seen !== text) {
      // As in a query: one saying nothing (empty, a placeholder) lets the other stand.
      if (isBlank(text)) continue;
      if (!isBlank(seen)) throw badRequest(`${key} is given twice with different values (body)`);
    }
    params.set(key, text);
  }
  return params;
}

/**
 * An id written twice under one name with two values (`{"pid":"a","pid":"b"}`) is as ambiguous as in a query: the
 * parse keeps the last, another reader of the same body may keep the first. As there, one saying nothing (null,
 * empty, a placeholder left as it was) lets the other stand, and values are compared as read (`"12"` and `12`, an
 * escape and its character, are one value). Names in other cases are told apart by the caller (they survive the parse).
 * Returns, for each name written more than once, the value that stands (the first saying something), in place of
 * the parse's last.
 */
function refuseRepeatedIds(body: string): Map<string, unknown> {
  const chosen = new Map<string, unknown>();
  // The usual body names each id once, unescaped: nothing to scan.
  if (!body.includes('\\u') && !/"(pid|token)"[\s\S]*"\1"/i.test(body)) return chosen;
  const values = new Map<string, string>();
  for (const [name, text] of topLevelMembers(body)) {
    if (!/^(pid|token)$/i.test(name)) continue;
    const parsed: unknown = JSON.parse(text);
    const value = typeof parsed === 'string' ? parsed : text;
    if (!chosen.has(name)) chosen.set(name, parsed);
    if (parsed === null || isBlank(value)) continue;
    const seen = values.get(name);
    if (seen !== undefined && seen !== value)
      throw badRequest(`${name.toLowerCase()} is given twice with different values (body)`);
    if (seen === undefined) chosen.set(name, parsed);
    values.set(name, value);
  }
  return chosen;
}

/**
 * The members of a JSON object text as written, duplicates included: each name (unescaped) with its value's text
 * (trimmed). The text is valid JSON (it parsed): only strings and nesting need tracking.
 */
function topLevelMembers(text: string): [string, string][] {
  const members: [string, string][] = [];
  let depth = 0;
  let stringFrom = -1;
  let lastString = '""';
  let name: string | undefined;
  let valueFrom = 0;
  const close = (at: number) => {
    if (name !== undefined) members.push([name, text.slice(valueFrom, at).trim()]);
    name = undefined;
  };
  for (let at = 0; at < text.length; at++) {
    const c = text[at];
    if (stringFrom >= 0) {
      if (c === '\\') at++;
      else if (c === '"') {
        lastString = text.slice(stringFrom, at + 1);
        stringFrom = -1;
      }
    } else if (c === '"') stringFrom = at;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (depth === 1) close(at);
      depth--;
    } else if (depth === 1 && c === ':' && name === undefined) {
      name = JSON.parse(lastString) as string;
      valueFrom = at + 1;
    } else if (depth === 1 && c === ',') close(at);
  }
  return members;
}

/**
 * The digits of an integer member `key` as the JSON text writes them, when it writes one such member and its
 * digits are the parsed number's. A key written with escapes is not found (the caller refuses).
 */
function integerAsWritten(body: string, key: string, parsed: number): string | undefined {
  const written = new Set(
    Array.from(body.matchAll(new RegExp(`"${key}"\\s*:\\s*(\\d+)(?=\\s*[,}])`, 'gi')), (match) => match[1]),
  );
  const [digits] = written;
  return written.size === 1 && digits !== undefined && Number(digits) === parsed ? digits : undefined;
}

/** The parameters a hit is read by: given twice, they must agree; any other parameter is not this product's. */
const READ = new Set(['pid', 'token', 'kid', 'sig']);
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Parses `a=1&b=2` (`+` a space, a malformed escape kept as it is). The parameters a hit is read by must be
 * well-formed UTF-8 once decoded (never replaced by U+FFFD, which would make two ids one) and, when repeated, the
 * same; any other parameter is left alone.
 */
const ID_PARAMS = new Set(['pid', 'token']);
const SIGNATURE_PARAMS = new Set(['kid', 'sig']);

function readParams(
  encoded: string,
  where: 'query' | 'body',
  /** Where other values of `kid` and `sig` go (a sender's own appended), rather than refusing the hit. */
  appended?: Map<string, string[]>,
): Params {
  const params = new Map<string, string>();
  for (const part of encoded.split('&')) {
    if (part === '') continue;
    const at = part.indexOf('=');
    const decoded = decode(at < 0 ? part : part.slice(0, at));
    const rawKey = decoded === undefined ? undefined : parameterName(decoded);
    const key = where === 'body' ? rawKey?.toLowerCase() : rawKey;
    if (key === undefined || !(where === 'body' ? ID_PARAMS : READ).has(key)) continue;
    const raw = at < 0 ? '' : part.slice(at + 1);
    // A pid a panel keeps in another encoding (Latin-1 `Jos%E9`) is kept, its stray bytes left escaped, so both
    // channels key its attempt alike and the postback is not refused (and lost); a token is the marketplace's own.
    const value = key === 'pid' ? decodePid(raw) : decode(raw);
    // A key id or signature that is not text checks out as none (a sender's raw digest appended as `sig`).
    if (value === undefined && appended && SIGNATURE_PARAMS.has(key)) continue;
    if (value === undefined) throw badRequest(`${key} is not well-formed UTF-8 (${where})`);
    const seen = params.get(key);
    if (seen !== undefined && seen !== value && appended && SIGNATURE_PARAMS.has(key)) {
      const values = appended.get(key) ?? [];
      if (!values.includes(value) && values.length < SIGNATURE_VALUES - 1)
        appended.set(key, [...values, value]);
      continue;
    }
    if (seen !== undefined && seen !== value) {
      // An id given once blank (empty, a placeholder left as it was) says nothing: the other value stands.
      const id = ID_PARAMS.has(key);
      if (id && isBlank(value)) continue;
      if (!id || !isBlank(seen)) throw badRequest(`${key} is given twice with different values (${where})`);
    }
    params.set(key, value);
  }
  return params;
}

/**
 * A pid as written in a query (percent-encoded), decoded as a hit's is: a byte that is not UTF-8 left as its escape
 * (`Jos%E9`), never a replacement character. What a lookup by pid must decode it with to find the attempt.
 */
export const decodePid = (encoded: string): string => decode(encoded) ?? decodeKeepingStrayBytes(encoded);

/** A query parameter's first value decoded as a hit's pid is (`decodePid`); undefined when it is not given. */
export function queryParameter(rawQueryString: string | undefined, name: string): string | undefined {
  for (const part of (rawQueryString ?? '').split('&')) {
    const at = part.indexOf('=');
    if (at > 0 && decodePid(part.slice(0, at)) === name) return decodePid(part.slice(at + 1));
  }
  return undefined;
}

/**
 * A parameter other than the pid as written in a query, decoded as a hit's is: its bytes must be UTF-8 (a token is the
 * marketplace's own), or it is refused naming it, rather than read with replacement characters that match nothing.
 */
export function strictQueryParameter(rawQueryString: string | undefined, name: string): string | undefined {
  for (const part of (rawQueryString ?? '').split('&')) {
    const at = part.indexOf('=');
    if (at <= 0 || decode(part.slice(0, at)) !== name) continue;
    const value = decode(part.slice(at + 1));
    if (value === undefined) throw badRequest(`${name} is not well-formed UTF-8`);
    return value;
  }
  return undefined;
}

/**
 * The pid as the query carried it, percent-encoded byte for byte (as `encodeURIComponent` writes UTF-8, and a
 * byte that is not UTF-8 as its own escape): what hands the respondent's id on in another URL unchanged, where
 * encoding `pid` itself would turn a kept escape (`Jos%E9`) into text (`Jos%25E9`). Undefined when the query holds
 * no such pid (it came from a body).
 */
export function pidAsSent(rawQueryString: string | undefined, pid: string): string | undefined {
  for (const part of (rawQueryString ?? '').split('&')) {
    const at = part.indexOf('=');
    if (at <= 0) continue;
    // Named as the hit's reading names it (`&amp;` between parameters), and the value the hit took: a blank or a
    // placeholder given beside it is passed over as there.
    if (parameterName(decodePid(part.slice(0, at))) !== 'pid') continue;
    const value = part.slice(at + 1);
    if (decodePid(value) !== pid) continue;
    return bytesOf(value.replaceAll('+', ' '))
      .map((byte) => (byte < 0x80 ? encodeURIComponent(String.fromCharCode(byte)) : byteEscape(byte)))
      .join('');
  }
  return undefined;
}

/** A parameter's name as a hit reads it: a URL stored HTML-escaped (`&amp;` between parameters) still names it. */
const parameterName = (decoded: string): string => (decoded.startsWith('amp;') ? decoded.slice(4) : decoded);

/** One byte as its percent escape, `%E9`. */
const byteEscape = (byte: number): string => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;

/** Form decoding of one name or value: undefined when its bytes are not UTF-8. */
function decode(encoded: string): string | undefined {
  // The usual value has nothing to decode, or decodes strictly (decodeURIComponent refuses bytes that are not
  // UTF-8 and escapes that are malformed); only the latter two go byte by byte.
  const spaced = encoded.includes('+') ? encoded.replaceAll('+', ' ') : encoded;
  if (!spaced.includes('%')) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return decodeBytes(spaced);
  }
}

/** The bytes a form-encoded value stands for: escapes decoded, a malformed escape kept as its characters. */
function bytesOf(spaced: string): number[] {
  const bytes: number[] = [];
  for (const [piece] of spaced.matchAll(/%[0-9a-fA-F]{2}|[\s\S]/gu)) {
    if (piece.length === 3 && piece.startsWith('%')) bytes.push(Number.parseInt(piece.slice(1), 16));
    else bytes.push(...Buffer.from(piece, 'utf8'));
  }
  return bytes;
}

/** Byte by byte: a malformed escape kept as it is, undefined when the bytes are not UTF-8. */
function decodeBytes(spaced: string): string | undefined {
  try {
    return STRICT_UTF8.decode(Uint8Array.from(bytesOf(spaced)));
  } catch {
    return undefined;
  }
}

/** How many bytes a UTF-8 character starting with `lead` has; 0 when no character starts so. */
function utf8Length(lead: number): number {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/**
 * Every UTF-8 character decoded and every byte that is not part of one left as its escape (`Jos%E9` stays
 * `Jos%E9`, `caf%C3%A9` is `café`): never a replacement character, which would make two ids one.
 */
function decodeKeepingStrayBytes(encoded: string): string {
  const bytes = bytesOf(encoded.replaceAll('+', ' '));
  let text = '';
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i] as number;
    const length = utf8Length(lead);
    if (length > 0 && i + length <= bytes.length) {
      try {
        text += STRICT_UTF8.decode(Uint8Array.from(bytes.slice(i, i + length)));
        i += length;
        continue;
      } catch {
        // not a character: the lead byte is kept escaped below
      }
    }
    text += byteEscape(lead);
    i += 1;
  }
  return text;
}
