/**
 * The postback source allow-list: only the address API Gateway saw counts, never X-Forwarded-For.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LedgerStore } from '../../functions/ledger/ledger-store';
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
  let store: LedgerStore;
  beforeAll(async () => {
    ({ postback: handler, store } = await receivers({ postbackSources: '203.0.113.0/24' }));
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

  it('counts a refused postback whose signature holds apart from junk: the marketplace sending from new servers', async () => {
    const at = new Date();
    const signed = filledUrl(TEST_KEY_RING, 'postback', '9010', 'success', {
      pid: 'moved',
      token: randomUUID(),
    });
    const forged = signed.replace(/sig=[^&]+/, 'sig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
    for (const [url, sourceIp] of [
      [signed, '198.51.100.50'],
      [forged, '198.51.100.51'],
    ] as const) {
      const result = await invoke(handler, apiEvent('GET', url, { sourceIp }));
      // Answered alike: the sender learns nothing of its signature from an address refused.
      expect(result.statusCode).toBe(403);
      expect(jsonBody(result)).toEqual({ error: 'forbidden', message: 'source address not allowed' });
    }
    // A signed one from an allowed address that carries its token as the placeholder: refused for what it carries.
    const placeholder = filledUrl(TEST_KEY_RING, 'postback', '9010', 'success', {
      pid: 'p',
      token: '[%%token%%]',
    });
    expect(
      (await invoke(handler, apiEvent('GET', placeholder, { sourceIp: '203.0.113.11' }))).statusCode,
    ).toBe(400);
    const refused = await store.rejectedHitsBetween(
      new Date(at.getTime() - 60_000),
      new Date(at.getTime() + 120_000),
    );
    const codeFrom = (sourceIp: string) => refused.find((r) => r.sourceIp === sourceIp)?.code;
    expect([codeFrom('198.51.100.50'), codeFrom('198.51.100.51'), codeFrom('203.0.113.11')]).toEqual([
      'signed_forbidden',
      'forbidden',
      'signed_input',
    ]);
  });
});
