/**
 * A local stand-in for API Gateway's HTTP API: matches the route table, builds real payload-v2 events, invokes
 * the same handlers the stack deploys and writes their responses back. Listens on loopback only.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, Context } from 'aws-lambda';
import { type FunctionName, ROUTES, type Route, routeKey } from '../routes';
import { invokeHandler } from './invocation';

export type LambdaHandler = (
  event: APIGatewayProxyEventV2,
  context: Context,
) => Promise<APIGatewayProxyResultV2>;

/**
 * The address a simulated respondent's browser stands for. Every request reaches the local stand-in from loopback,
 * where in AWS each respondent has an address of its own (what the health check counts success claims by): the
 * local marketplace's respondents name theirs in this header, which only this stand-in reads, and only from
 * loopback. API Gateway itself takes the address from the connection, never from a header.
 */
export const LOCAL_RESPONDENT_ADDRESS = 'x-local-respondent-address';

/** API Gateway's own payload limit. */
const MAX_PAYLOAD_BYTES = 10 * 1024 * 1024;
/** Lambda's limit on a synchronous invocation's event (its JSON): a larger request never reaches the function. */
export const MAX_EVENT_BYTES = 6 * 1024 * 1024;
/**
 * The content types API Gateway's HTTP API hands over as text; every other body (a form, none declared) goes
 * base64. A text type's bytes that are not UTF-8 arrive replaced by U+FFFD, as Node decodes them here.
 */
const TEXT_TYPES = /^\s*(text\/|application\/(json|xml|javascript)\s*(;|$))/i;

export interface LocalApi {
  readonly url: string;
  stop(): Promise<void>;
}

export function sourceAddress(req: Pick<IncomingMessage, 'socket' | 'headers'>): string {
  const peer = req.socket.remoteAddress?.replace(/^::ffff:/, '') ?? '127.0.0.1';
  const simulated = req.headers[LOCAL_RESPONDENT_ADDRESS];
  const loopback = peer === '127.0.0.1' || peer === '::1';
  return loopback && typeof simulated === 'string' && /^[\d.:a-f]{2,45}$/i.test(simulated) ? simulated : peer;
}

export async function startApiGateway(
  handlers: Record<FunctionName, LambdaHandler>,
  host = '127.0.0.1',
  port = 0,
): Promise<LocalApi> {
  const server: Server = createServer((req, res) => {
    serve(req, res).catch((error) => {
      console.error('local api gateway: handler failed', error);
      send(res, 500, { 'content-type': 'application/json' }, '{"message":"Internal Server Error"}');
    });
  });

  async function serve(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://local');
    const match = matchRoute(req.method ?? 'GET', url.pathname);
    if (!match) return send(res, 404, { 'content-type': 'application/json' }, '{"message":"Not Found"}');
    const body = await readBody(req);
    if (body === 'too-large') {
      return send(res, 413, { 'content-type': 'application/json' }, '{"message":"Request Entity Too Large"}');
    }
    const event = buildEvent(
      {
        url,
        headers: req.headers,
        body,
        sourceIp: sourceAddress(req),
        httpVersion: req.httpVersion,
      },
      match,
    );
    if (Buffer.byteLength(JSON.stringify(event)) > MAX_EVENT_BYTES) {
      return send(res, 413, { 'content-type': 'application/json' }, '{"message":"Request Entity Too Large"}');
    }
    // Lambda's request id is not API Gateway's, as in AWS: a handler that names the wrong one shows it.
    const context = lambdaContext(match.route.function);
    const result = await invokeHandler(handlers[match.route.function], event, context);
    if (typeof result === 'string' || result === undefined) {
      return send(res, 200, { 'content-type': 'application/json' }, result ?? '');
    }
    const headers = Object.fromEntries(Object.entries(result.headers ?? {}).map(([k, v]) => [k, String(v)]));
    const payload = result.isBase64Encoded ? Buffer.from(result.body ?? '', 'base64') : (result.body ?? '');
    send(res, result.statusCode ?? 200, headers, payload);
  }

  server.listen(port, host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${host}:${address.port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function pathPattern(path: string): RegExp {
  const source = path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{(\w+)\}/g, '(?<$1>[^/]+)');
  return new RegExp(`^${source}$`);
}

const MATCHERS = ROUTES.map((route) => ({ route, pattern: pathPattern(route.path) }));

export interface RouteMatch {
  readonly route: Route;
  readonly pathParameters: Record<string, string>;
}

/** The route a request goes to, as API Gateway would pick it, with its path parameters decoded. */
export function matchRoute(method: string, pathname: string): RouteMatch | undefined {
  for (const { route, pattern } of MATCHERS) {
    if (route.method !== method) continue;
    const match = pattern.exec(pathname);
    if (!match) continue;
    const pathParameters: Record<string, string> = {};
    for (const [name, value] of Object.entries(match.groups ?? {})) {
      try {
        pathParameters[name] = decodeURIComponent(value);
      } catch {
        pathParameters[name] = value;
      }
    }
    return { route, pathParameters };
  }
  return undefined;
}

async function readBody(req: IncomingMessage): Promise<Buffer | 'too-large'> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_PAYLOAD_BYTES) return 'too-large';
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export interface RawRequest {
  readonly url: URL;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
  readonly sourceIp: string;
  readonly httpVersion?: string;
}

/** The payload-v2 event API Gateway's HTTP API hands a Lambda integration for this request. */
export function buildEvent(
  request: RawRequest,
  { route, pathParameters }: RouteMatch,
): APIGatewayProxyEventV2 {
  const { url, body } = request;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  }
  const rawQueryString = url.search.slice(1);
  const query: Record<string, string> = {};
  for (const [name, value] of new URLSearchParams(rawQueryString)) {
    query[name] = name in query ? `${query[name]},${value}` : value;
  }
  const isText = TEXT_TYPES.test(headers['content-type'] ?? '');
  const now = new Date();
  const requestId = randomUUID();
  return {
    version: '2.0',
    routeKey: routeKey(route),
    rawPath: url.pathname,
    rawQueryString,
    ...(headers.cookie ? { cookies: headers.cookie.split(/;\s*/) } : {}),
    headers,
    ...(rawQueryString ? { queryStringParameters: query } : {}),
    pathParameters,
    requestContext: {
      accountId: 'local',
      apiId: 'local',
      domainName: headers.host ?? 'localhost',
      domainPrefix: (headers.host ?? 'localhost').split('.')[0] ?? 'localhost',
      http: {
        method: route.method,
        path: url.pathname,
        protocol: `HTTP/${request.httpVersion ?? '1.1'}`,
        sourceIp: request.sourceIp,
        userAgent: headers['user-agent'] ?? '',
      },
      requestId,
      routeKey: routeKey(route),
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    ...(body.length > 0 ? { body: isText ? body.toString('utf8') : body.toString('base64') } : {}),
    isBase64Encoded: body.length > 0 && !isText,
  };
}

/** A Lambda context good enough for the handlers and Powertools. */
export function lambdaContext(
  functionName: string,
  awsRequestId: string = randomUUID(),
  timeoutMs = 10_000,
): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:local:000000000000:function:${functionName}`,
    memoryLimitInMB: '256',
    awsRequestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: string | Buffer) {
  res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
