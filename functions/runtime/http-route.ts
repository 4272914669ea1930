/**
 * The HTTP edge shared by the handlers: API Gateway HTTP API (payload v2) events in, responses out, and the
 * one place where errors become responses. JSON for servers; for browsers, always a page.
 */
import { isUtf8 } from 'node:buffer';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { StoreUnavailable } from '../ledger/ledger-store';
import type { HitRequest } from '../receiving/hit-request';
import { type Landing, SURVEY_OVER_PAGE } from '../receiving/landing-page';
import { Rejection } from '../shared/rejection';
import { KeyRingUnavailable } from './key-ring-source';
import { count, logger } from './observability';

export type ApiEvent = APIGatewayProxyEventV2;
export type ApiResult = APIGatewayProxyStructuredResultV2;
type Handler = (event: ApiEvent, context: Context) => Promise<ApiResult>;

/**
 * The id API Gateway gave the request: what its access log, a stored hit and an error answer all name. (Lambda's
 * own `awsRequestId` is another value, in the function's log lines as `function_request_id`.)
 */
export const requestIdOf = (event: ApiEvent, context: Pick<Context, 'awsRequestId'>): string =>
  event.requestContext?.requestId ?? context.awsRequestId;

/** Every log line of a request names API Gateway's id for it, so a line leads to its access log entry. */
const namingTheRequest: middy.MiddlewareObj<ApiEvent, ApiResult> = {
  before: async (request) => {
    logger.appendKeys({ request_id: requestIdOf(request.event, request.context) });
  },
};

/** The parts of an API Gateway event a hit is read from. */
export function hitRequestFrom(event: ApiEvent): HitRequest {
  const bytes =
    event.body !== undefined && event.isBase64Encoded ? Buffer.from(event.body, 'base64') : undefined;
  // Bytes that are not UTF-8 are not text, unless the sender says they are Latin-1: said so, never decoded into
  // replacement characters.
  const encoding =
    bytes === undefined || isUtf8(bytes)
      ? 'utf8'
      : declaresLatin1(event.headers?.['content-type'])
        ? 'windows-1252'
        : undefined;
  // API Gateway hands a body of a text type (JSON, text/*) over as text, its bytes that are not UTF-8 replaced by
  // U+FFFD: a Latin-1 `José` arrives as `Jos\uFFFD`, one id with `Josè`. Its ids are refused if they hold one.
  const undecodable = encoding === undefined;
  const lossy = bytes === undefined && event.body?.includes('\uFFFD') === true;
  const body =
    encoding === undefined
      ? undefined
      : bytes === undefined
        ? event.body
        : encoding === 'utf8'
          ? bytes.toString('utf8')
          : windows1252(bytes);
  return {
    pathParameters: event.pathParameters ?? {},
    rawQueryString: event.rawQueryString ?? '',
    contentType: event.headers?.['content-type'],
    contentEncoding: event.headers?.['content-encoding'],
    body,
    ...(undecodable ? { bodyNotUtf8: true } : {}),
    ...(lossy ? { bodyLossy: true } : {}),
  };
}

/** A Windows-1252 body's text (what an ISO-8859-1 one is read as too: `declaresLatin1`). */
function windows1252(bytes: Buffer): string {
  // Node's own decoder for the label reads it as ISO-8859-1 (Node 20 and 22): the 32 bytes that differ, by hand.
  return bytes
    .toString('latin1')
    .replace(/[\u0080-\u009f]/g, (c) => WINDOWS_1252_HIGH[c.charCodeAt(0) - 0x80] as string);
}
/** Windows-1252's 0x80-0x9F; its five undefined bytes as the controls of the same code. */
const WINDOWS_1252_HIGH = [
  ...'\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f',
  ...'\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178',
];

/**
 * A content type whose charset is ISO-8859-1 or Windows-1252, both read as Windows-1252, as browsers and the
 * encoding standard read them: the two differ only in 0x80-0x9F, where Windows-1252 has `€`, `š`, `Œ` and curly
 * quotes and ISO-8859-1 control characters no sender means (and no id may hold). The five bytes Windows-1252 leaves
 * undefined stay controls, refused in an id (400).
 */
function declaresLatin1(contentType: string | undefined): boolean {
  const charset = /;\s*charset\s*=\s*"?([\w-]+)/i.exec(contentType ?? '')?.[1]?.toLowerCase();
  return (
    charset !== undefined &&
    ['iso-8859-1', 'latin1', 'iso_8859-1', 'windows-1252', 'cp1252'].includes(charset)
  );
}

const NO_STORE = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };

export function json(statusCode: number, body: Record<string, unknown>): ApiResult {
  return {
    statusCode,
    headers: { ...NO_STORE, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  };
}

/** A respondent's answer: a redirect to the landing page or the plain page. Never leaks the URL onwards. */
export function respondentAnswer(landing: Landing): ApiResult {
  const headers = { ...NO_STORE, 'referrer-policy': 'no-referrer' };
  if (landing.kind === 'redirect')
    return { statusCode: 302, headers: { ...headers, location: landing.location }, body: '' };
  return {
    statusCode: 200,
    headers: {
      ...headers,
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
    },
    body: landing.html,
  };
}

/** A dependency down: answered 503 so the sender retries, counted and logged as such. */
const DEPENDENCIES_DOWN = [
  {
    error: KeyRingUnavailable,
    metric: 'KeyRingUnavailable',
    log: 'signing key ring unavailable',
    message: 'the signing keys cannot be read right now; retry later',
  },
  {
    error: StoreUnavailable,
    metric: 'StoreUnavailable',
    log: 'ledger store unavailable',
    message: 'the ledger is unavailable; retry later',
  },
] as const;

/**
 * For server-to-server routes: a Rejection answers its own status with a JSON error naming the problem; a
 * dependency down (the ledger, the signing keys) answers 503 so the sender retries; anything else is a bug and
 * answers 500 with the request id, never the error itself.
 */
export function jsonRoute(handler: Handler) {
  return middy<ApiEvent, ApiResult>()
    .use(injectLambdaContext(logger, { resetKeys: true, logEvent: false }))
    .use(namingTheRequest)
    .use({
      onError: async (request) => {
        const error = request.error;
        const requestId = requestIdOf(request.event, request.context);
        if (error instanceof Rejection) {
          request.response = json(error.status, { error: error.code, message: error.message });
          return;
        }
        const down = DEPENDENCIES_DOWN.find(({ error: kind }) => error instanceof kind);
        if (down) {
          count(down.metric);
          logger.error(down.log, { error: describe(error) });
          request.response = json(503, { error: 'unavailable', message: down.message, requestId });
          return;
        }
        count('InternalError');
        logger.error('unhandled error', { error: describe(error) });
        request.response = json(500, { error: 'internal', message: 'internal error', requestId });
      },
    })
    .handler(handler);
}

/** For browser routes: whatever happens, the respondent gets the plain page. */
export function respondentRoute(handler: Handler) {
  return middy<ApiEvent, ApiResult>()
    .use(injectLambdaContext(logger, { resetKeys: true, logEvent: false }))
    .use(namingTheRequest)
    .use({
      onError: async (request) => {
        count('InternalError');
        logger.error('unhandled error on a respondent route', { error: describe(request.error) });
        request.response = respondentAnswer({ kind: 'page', html: SURVEY_OVER_PAGE });
      },
    })
    .handler(handler);
}

/** An error's name, message and cause's name: enough to diagnose, nothing from the request. */
export function describe(error: unknown): Record<string, string> {
  if (!(error instanceof Error)) return { name: 'unknown' };
  const described: Record<string, string> = { name: error.name, message: error.message };
  if (error.cause instanceof Error) described.cause = `${error.cause.name}: ${error.cause.message}`;
  return described;
}
