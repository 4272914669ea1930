/**
 * Every tampered field of a valid URL is refused, and the signature comparison runs over the whole signature
 * whatever its first differing character (checked structurally: one constant-time comparison of 43 bytes).
 */
import * as crypto from 'node:crypto';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { parseKeyRing, sign, verify } from '../../functions/receiving/signing';

vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:crypto')>();
  const compare = actual.timingSafeEqual;
  return {
    ...actual,
    timingSafeEqual: vi.fn((a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => compare(a, b)),
  };
});

const ring = parseKeyRing(JSON.stringify({ current: 'k2', k1: 'o'.repeat(40), k2: 'n'.repeat(40) }));
const target = { channel: 'postback', surveyId: '1001', outcome: 'success' } as const;
const now = new Date();
const good = sign(ring.current, target);

describe('tampering', () => {
  it('with any one character of the signature is refused, at every position', () => {
    for (let i = 0; i < good.length; i++) {
      for (const replacement of ['A', 'z', '0', '-', '_']) {
        if (good[i] === replacement) continue;
        const forged = good.slice(0, i) + replacement + good.slice(i + 1);
        expect(verify(ring, target, 'k2', forged, now).valid, `position ${i}`).toBe(false);
      }
    }
  });

  it.each([
    ['the survey', { ...target, surveyId: '1002' }, 'k2'],
    ['the outcome', { ...target, outcome: 'fail' as const }, 'k2'],
    ['the channel', { ...target, channel: 'redirect' as const }, 'k2'],
    ['the key id (another valid key)', target, 'k1'],
    ['the key id (unknown)', target, 'k3'],
  ])('of %s is refused', (_, tampered, kid) => {
    expect(verify(ring, tampered, kid, good, now).valid).toBe(false);
  });

  it('truncating, padding or re-encoding the signature is refused', () => {
    for (const forged of [
      good.slice(0, 42),
      `${good}=`,
      `${good}A`,
      good.replace(/-/g, '+').replace(/_/g, '/'),
      good.toLowerCase(),
      '',
    ]) {
      if (forged === good) continue;
      expect(verify(ring, target, 'k2', forged, now).valid).toBe(false);
    }
  });
});

describe('the comparison', () => {
  beforeEach(() => {
    // A block, not an expression: a function returned from beforeEach is run as its teardown.
    vi.mocked(crypto.timingSafeEqual).mockClear();
  });

  it('compares all 43 bytes in one constant-time call, however many leading characters match', () => {
    for (const matching of [0, 1, 21, 42, 43]) {
      const presented =
        good.slice(0, matching) + (good.slice(matching).replace(/./g, (c) => (c === 'A' ? 'B' : 'A')) || '');
      vi.mocked(crypto.timingSafeEqual).mockClear();
      verify(ring, target, 'k2', presented, now);
      const calls = vi.mocked(crypto.timingSafeEqual).mock.calls;
      expect(calls).toHaveLength(1);
      const [expected, given] = calls[0] as [Buffer, Buffer];
      expect(expected.length).toBe(43);
      expect(given.length).toBe(43);
    }
  });
});
