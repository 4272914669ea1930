/**
 * The local marketplace's vocabulary for its HTTP side: an answer (status and JSON body) in the supplier API's
 * envelope, an endpoint (method, path pattern, call-log name and answer), and reading and writing JSON over
 * node:http. Each endpoint group and the server share these.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export type Json = Record<string, unknown>;

export interface Answer {
  status: number;
  body: unknown;
}

export interface EndpointRequest {
  readonly match: RegExpExecArray;
  readonly version: 'v1' | 'v2';
  readonly query: URLSearchParams;
  readonly body: unknown;
}

/** One supplier API endpoint: method, path pattern, name (for the call log) and the answer. */
export interface Endpoint {
  readonly method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  readonly pattern: RegExp;
  readonly name: string;
  readonly answer: (request: EndpointRequest) => Answer;
}

export const ok = (body: Json): Answer => ({ status: 200, body: { apiStatus: 'success', ...body } });
export const failure = (status: number, msg: string): Answer => ({
  status,
  body: { apiStatus: 'Failure', msg },
});

/** The request body as JSON, or undefined when it is empty or not JSON. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function reply(res: ServerResponse, answer: Answer) {
  const body = JSON.stringify(answer.body);
  res.writeHead(answer.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}
