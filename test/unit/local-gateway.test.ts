/**
 * The local API Gateway's events for bodies, as AWS's HTTP API builds them: text types (text/*, JSON, XML,
 * JavaScript) as text, their bytes that are not UTF-8 replaced; every other body base64, as bytes. The receiver
 * reads neither kind of undecodable body into ids.
 */

import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { hitRequestFrom } from '../../functions/runtime/http-route';
import {
  buildEvent,
  type LambdaHandler,
  LOCAL_RESPONDENT_ADDRESS,
  matchRoute,
  sourceAddress,
  startApiGateway,
} from '../../infra/local/api-gateway';
import type { FunctionName } from '../../infra/routes';

const postback = (body: Buffer, contentType: string) => {
  const url = new URL('http://127.0.0.1/postback/1001/success?kid=k1&sig=s');
  const route = matchRoute('POST', url.pathname);
  if (!route) throw new Error('no postback route');
  return buildEvent({ url, headers: { 'content-type': contentType }, body, sourceIp: '127.0.0.1' }, route);
};

describe('the local gateway', () => {
  it('passes a form body base64, as API Gateway does with every type but text, JSON, XML and JavaScript', () => {
    const event = postback(Buffer.from('pid=Jos%C3%A9&token=t'), 'application/x-www-form-urlencoded');
    expect(event.isBase64Encoded).toBe(true);
    expect(hitRequestFrom(event)).toMatchObject({ body: 'pid=Jos%C3%A9&token=t' });
    expect(hitRequestFrom(event).bodyNotUtf8).toBeUndefined();
    expect(postback(Buffer.from('pid=p'), '').isBase64Encoded).toBe(true);
    expect(postback(Buffer.from('{"pid":"p"}'), 'application/vnd.api+json').isBase64Encoded).toBe(true);
  });

  it('passes a text type as text', () => {
    for (const type of [
      'application/json',
      'application/json; charset=utf-8',
      'text/plain',
      'application/xml',
    ]) {
      const event = postback(Buffer.from('{"pid":"Jos\u00e9"}'), type);
      expect(event).toMatchObject({ isBase64Encoded: false, body: '{"pid":"Jos\u00e9"}' });
      expect(hitRequestFrom(event).body).toBe('{"pid":"Jos\u00e9"}');
    }
  });

  it('passes bytes that are not UTF-8 as base64, which the receiver sees as not UTF-8', () => {
    const bytes = Buffer.from([...Buffer.from('pid=Jos'), 0xe9, ...Buffer.from('&token=t')]);
    const event = postback(bytes, 'application/x-www-form-urlencoded');
    expect(event.isBase64Encoded).toBe(true);
    expect(Buffer.from(event.body ?? '', 'base64')).toEqual(bytes);
    expect(hitRequestFrom(event)).toMatchObject({ bodyNotUtf8: true, body: undefined });
  });

  it('passes a text type that is not UTF-8 as text with replacement characters, which the receiver marks lossy', () => {
    const bytes = Buffer.from([...Buffer.from('{"pid":"Jos'), 0xe9, ...Buffer.from('"}')]);
    const event = postback(bytes, 'application/json; charset=ISO-8859-1');
    expect(event).toMatchObject({ isBase64Encoded: false, body: '{"pid":"Jos\uFFFD"}' });
    expect(hitRequestFrom(event)).toMatchObject({ bodyLossy: true, body: '{"pid":"Jos\uFFFD"}' });
    expect(hitRequestFrom(event).bodyNotUtf8).toBeUndefined();
  });

  it("refuses a request whose event is over Lambda's 6 MB, as AWS never invokes the function with it", async () => {
    const invoked: string[] = [];
    const handler: LambdaHandler = async (event) => {
      invoked.push(event.rawPath);
      return { statusCode: 200, body: '{}' };
    };
    const handlers = new Proxy({} as Record<FunctionName, LambdaHandler>, { get: () => handler });
    const api = await startApiGateway(handlers);
    try {
      const post = (bytes: number) =>
        fetch(`${api.url}/postback/1001/success?kid=k1&sig=s`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: `pid=p&token=t&x=${'y'.repeat(bytes)}`,
        });
      // 5 MB base64 is 6.7 MB of event: under API Gateway's 10 MB, over Lambda's limit.
      expect((await post(5 * 1024 * 1024)).status).toBe(413);
      expect(invoked).toEqual([]);
      expect((await post(4 * 1024 * 1024)).status).toBe(200);
      expect(invoked).toEqual(['/postback/1001/success']);
    } finally {
      await api.stop();
    }
  });

  it("takes a simulated respondent's address from its header, only from loopback", () => {
    const request = (peer: string, named?: string) =>
      ({
        socket: { remoteAddress: peer },
        headers: named ? { [LOCAL_RESPONDENT_ADDRESS]: named } : {},
      }) as unknown as IncomingMessage;
    expect(sourceAddress(request('::ffff:127.0.0.1', '198.51.100.23'))).toBe('198.51.100.23');
    expect(sourceAddress(request('::ffff:127.0.0.1'))).toBe('127.0.0.1');
    // Anything else is the connection's address, as API Gateway takes it, whatever a header says.
    expect(sourceAddress(request('192.0.2.9', '198.51.100.23'))).toBe('192.0.2.9');
    expect(sourceAddress(request('127.0.0.1', 'not an address; drop table'))).toBe('127.0.0.1');
  });
});
