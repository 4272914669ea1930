/**
 * The postback source allow-list: only the address API Gateway saw counts, never X-Forwarded-For.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllowList } from '../../functions/runtime/source-allow-list';
import { apiEvent, filledUrl, type Handler, invoke, jsonBody } from '../support/api-events';
import { receivers } from '../support/handlers';
import { TEST_KEY_RING } from '../support/ledger';

describe('allow-list ranges', () => {
  it('match IPv4 and IPv6 addresses in the ranges, and nothing else', () => {
    const allowed = parseAllowList('203.0.113.0/24, 2001:db8::/32, 198.51.100.7');
    expect([allowed?.('203.0.113.200'), allowed?.('198.51.100.7'), allowed?.('2001:db8::1')]).toEqual([
      true,
      true,
      true,
    ]);
    expect([
      allowed?.('203.0.114.1'),
      allowed?.('198.51.100.8'),
      allowed?.('2001:db9::1'),
      allowed?.('not an address'),
    ]).toEqual([false, false, false, false]);
    expect(parseAllowList('')).toBeUndefined();
    expect(() => parseAllowList('10.0.0.0/33')).toThrow(/not an address range/);
    expect(() => parseAllowList('example.com')).toThrow(/not an address range/);
    // A prefix left empty or doubled is a typo, not a range of every address.
    for (const typo of [
      '203.0.113.7/',
      '203.0.113.0/24/8',
      '203.0.113.0/ 24',
      '2001:db8::/',
      '203.0.113.0/-1',
    ])
      expect(() => parseAllowList(typo), typo).toThrow(/not an address range/);
    expect(parseAllowList('203.0.113.0/24')?.('8.8.8.8')).toBe(false);
  });
});

describe('postbacks with an allow-list', () => {
  let handler: Handler;
  beforeAll(async () => {
    ({ postback: handler } = await receivers({ postbackSources: '203.0.113.0/24' }));
  });

  it('accept a signed postback from an allowed address', async () => {
    const url = filledUrl(TEST_KEY_RING, 'postback', '9009', 'success', { pid: 'ok', token: randomUUID() });
    expect((await invoke(handler, apiEvent('GET', url, { sourceIp: '203.0.113.10' }))).statusCode).toBe(200);
  });

  it('refuse one from elsewhere, whatever X-Forwarded-For claims', async () => {
    const url = filledUrl(TEST_KEY_RING, 'postback', '9009', 'success', {
      pid: 'spoof',
      token: randomUUID(),
    });
    const result = await invoke(
      handler,
      apiEvent('GET', url, { sourceIp: '192.0.2.66', headers: { 'x-forwarded-for': '203.0.113.10' } }),
    );
    expect(result.statusCode).toBe(403);
    expect(jsonBody(result)).toEqual({ error: 'forbidden', message: 'source address not allowed' });
  });
});
