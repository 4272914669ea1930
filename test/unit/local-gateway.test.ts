/**
 * The local API Gateway's events for bodies: text passes as text only when it is UTF-8; other bytes go base64, so
 * the handlers judge them as in AWS, never as text decoded into replacement characters.
 */
import { describe, expect, it } from 'vitest';
import { hitRequestFrom } from '../../functions/runtime/http-route';
import { buildEvent, matchRoute } from '../../infra/local/api-gateway';

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
});
