/**
 * The local API Gateway's events for bodies: text passes as text only when it is UTF-8; other bytes go base64, so
 * the handlers judge them as in AWS, never as text decoded into replacement characters.
 */

import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { hitRequestFrom } from '../../functions/runtime/http-route';
import {
  buildEvent,
  LOCAL_RESPONDENT_ADDRESS,
  matchRoute,
  sourceAddress,
} from '../../infra/local/api-gateway';

const postback = (body: Buffer, contentType: string) => {
  const url = new URL('http://127.0.0.1/postback/1001/success?kid=k1&sig=s');
  const route = matchRoute('POST', url.pathname);
  if (!route) throw new Error('no postback route');
  return buildEvent({ url, headers: { 'content-type': contentType }, body, sourceIp: '127.0.0.1' }, route);
};

describe('the local gateway', () => {
  it('passes a UTF-8 form body as text', () => {
    const event = postback(Buffer.from('pid=Jos%C3%A9&token=t'), 'application/x-www-form-urlencoded');
    expect(event).toMatchObject({ isBase64Encoded: false, body: 'pid=Jos%C3%A9&token=t' });
    expect(hitRequestFrom(event).bodyNotUtf8).toBeUndefined();
  });

  it('passes bytes that are not UTF-8 as base64, which the receiver sees as not UTF-8', () => {
    const bytes = Buffer.from([...Buffer.from('pid=Jos'), 0xe9, ...Buffer.from('&token=t')]);
    const event = postback(bytes, 'application/x-www-form-urlencoded');
    expect(event.isBase64Encoded).toBe(true);
    expect(Buffer.from(event.body ?? '', 'base64')).toEqual(bytes);
    expect(hitRequestFrom(event)).toMatchObject({ bodyNotUtf8: true, body: undefined });
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
