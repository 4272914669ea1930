/**
 * Reading a hit out of an HTTP request: which survey and outcome the URL claims, its signature, and the
 * attempt's pid and token, wherever the sender put them (query string, JSON body or form body).
 *
 * Pure: works on a transport-neutral request, so the Lambda handlers, the local server and the tests share it.
 */

import type { RejectedHit } from '../ledger/ledger-store';
import { badRequest, type RefusalCode, Rejection } from '../shared/rejection';
import { type IdentifierField, identifierProblem } from './identifiers';
import { type Channel, type Outcome, outcomesOf, parseOutcome } from './outcome';
import type { SignedTarget } from './signing';

/** Postback bodies are a handful of fields; anything larger is not a postback. */
export const MAX_BODY_BYTES = 8192;

export interface HitRequest {
  readonly pathParameters: Readonly<Record<string, string | undefined>>;
  /** As received, still percent-encoded. */
  readonly rawQueryString: string;
  readonly contentType?: string | undefined;
  /** The body as text (already base64-decoded by the adapter), if any. */
  readonly body?: string | undefined;
}

/** What the URL claims: its target and the signature presented for it. */
export interface HitClaim {
  readonly target: SignedTarget;
  readonly kid: string | undefined;
  readonly signature: string | undefined;
}

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
  const params = new URLSearchParams(request.rawQueryString);
  return {
    at: received.at.toISOString(),
    requestId: received.requestId,
    channel,
    code: refusal.code,
    reason: refusal.reason,
    surveyId: request.pathParameters.surveyId,
    outcome: request.pathParameters.outcome,
    pid: params.get('pid') ?? undefined,
    token: params.get('token') ?? undefined,
    sourceIp: received.sourceIp,
  };
}

/** Reads the survey, outcome, key id and signature a hit's URL claims. Throws a 400 Rejection. */
export function readClaim(channel: Channel, request: HitRequest): { claim: HitClaim; query: Params } {
  const query = readParams(request.rawQueryString, 'query');
  const surveyId = request.pathParameters.surveyId;
  const problem = identifierProblem('surveyId', surveyId);
  if (problem) throw badRequest(problem);
  const outcome = parseOutcome(channel, request.pathParameters.outcome);
  if (!outcome) {
    throw badRequest(`outcome must be one of ${outcomesOf(channel).join(', ')}`);
  }
  return {
    claim: {
      target: { channel, surveyId: surveyId as string, outcome },
      kid: query.get('kid'),
      signature: query.get('sig'),
    },
    query,
  };
}

/**
 * Reads pid and token from the query and, for postbacks, the body. A value given twice must be given the
 * same way twice. Throws a Rejection (400, 413 or 415).
 */
export function readIdentity(
  request: HitRequest,
  query: Params,
): { pid: string; token: string; source: HitSource } {
  const body = readBody(request);
  const pick = (field: Exclude<IdentifierField, 'surveyId'>): string => {
    const fromQuery = query.get(field);
    const fromBody = body?.params.get(field);
    if (fromQuery !== undefined && fromBody !== undefined && fromQuery !== fromBody) {
      throw badRequest(`${field} is given twice with different values (query and body)`);
    }
    const value = fromQuery ?? fromBody;
    const problem = identifierProblem(field, value);
    if (problem) throw badRequest(problem);
    return value as string;
  };
  const pid = pick('pid');
  const token = pick('token');
  const source: HitSource = body?.params.has('pid') ? body.kind : 'query';
  return { pid, token, source };
}

interface ParsedBody {
  readonly kind: 'json' | 'form';
  readonly params: Params;
}

function readBody(request: HitRequest): ParsedBody | undefined {
  const text = request.body ?? '';
  if (Buffer.byteLength(text, 'utf8') > MAX_BODY_BYTES) {
    throw new Rejection(413, 'payload_too_large', `body exceeds ${MAX_BODY_BYTES} bytes`);
  }
  if (text.trim() === '') return undefined;
  const mediaType = request.contentType?.split(';')[0]?.trim().toLowerCase();
  const kind = mediaType ? kindOfMediaType(mediaType) : sniff(text);
  if (!kind) {
    throw new Rejection(
      415,
      'unsupported_media_type',
      mediaType
        ? `content type ${mediaType.slice(0, 80)} is not accepted; send application/json or application/x-www-form-urlencoded`
        : 'body is neither JSON nor form-encoded',
    );
  }
  return { kind, params: kind === 'json' ? readJsonParams(text) : readParams(text, 'body') };
}

function kindOfMediaType(mediaType: string): 'json' | 'form' | undefined {
  if (mediaType === 'application/json' || mediaType.endsWith('+json')) return 'json';
  if (mediaType === 'application/x-www-form-urlencoded') return 'form';
  return undefined;
}

/** Without a content type, a body is taken only when its form is unambiguous. */
function sniff(text: string): 'json' | 'form' | undefined {
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) return 'json';
  if (/^[^=&\s]+=[^&\s]*(&[^=&\s]+=[^&\s]*)*$/.test(trimmed)) return 'form';
  return undefined;
}

/** Only the identifiers are read from a JSON body; other fields are ignored. Keys match case-insensitively. */
function readJsonParams(text: string): Params {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw badRequest('body is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw badRequest('JSON body must be an object');
  }
  const params = new Map<string, string>();
  for (const [rawKey, raw] of Object.entries(value)) {
    const key = rawKey.toLowerCase();
    if (key !== 'pid' && key !== 'token') continue;
    let text: string;
    if (typeof raw === 'string') text = raw;
    else if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw >= 0) text = String(raw);
    else throw badRequest(`${key} in the JSON body must be a string`);
    const seen = params.get(key);
    if (seen !== undefined && seen !== text)
      throw badRequest(`${key} is given twice with different values (body)`);
    params.set(key, text);
  }
  return params;
}

/** Parses `a=1&b=2`; a name repeated with a different value is refused, never silently resolved. */
function readParams(encoded: string, where: 'query' | 'body'): Params {
  const params = new Map<string, string>();
  let search: URLSearchParams;
  try {
    search = new URLSearchParams(encoded);
  } catch {
    throw badRequest(`${where} is not valid form encoding`);
  }
  for (const [rawKey, value] of search) {
    const key = where === 'body' ? rawKey.toLowerCase() : rawKey;
    const seen = params.get(key);
    if (seen !== undefined && seen !== value) {
      throw badRequest(`${key} is given twice with different values (${where})`);
    }
    params.set(key, value);
  }
  return params;
}
