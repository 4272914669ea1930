/** The per-sender bound on recorded redirects, per minute. */
import { describe, expect, it } from 'vitest';
import { SITE_SHARE, senderLimiter } from '../../functions/receiving/sender-limit';

describe('senderLimiter', () => {
  it('records a sender up to the bound a minute, says the first one past it, and starts again the next minute', () => {
    let now = Date.UTC(2026, 10, 25, 12, 0, 10);
    const limit = senderLimiter(2, () => now);
    expect(['a', 'a', 'a', 'a'].map(() => limit('198.51.100.1'))).toEqual([
      'record',
      'record',
      'first-over',
      'over',
    ]);
    expect(limit('198.51.100.2')).toBe('record');
    now += 60_000;
    expect(limit('198.51.100.1')).toBe('record');
  });

  it("holds an IPv6 sender's /48 to a wider bound: one forger rotating its /64s is held, subscribers apart are not", () => {
    const limit = senderLimiter(2, () => 0);
    const bound = 2 * SITE_SHARE;
    // One redirect from each of many /64s of one /48: recorded up to the site's bound, then not.
    const verdicts = Array.from({ length: bound + 3 }, (_, i) => limit(`2001:db8:77:${i.toString(16)}::1`));
    expect(verdicts.slice(0, bound).every((v) => v === 'record')).toBe(true);
    expect(verdicts.slice(bound)).toEqual(['first-over', 'over', 'over']);
    // Another /48 is counted apart, and so is IPv4 (and IPv4 written as IPv6).
    expect(limit('2001:db8:78:1::1')).toBe('record');
    expect(Array.from({ length: 2 }, () => limit('::ffff:192.0.2.1'))).toEqual(['record', 'record']);
    // A /64's own bound still comes first, and what it sends past it does not fill its site's.
    const own = senderLimiter(2, () => 0);
    expect(Array.from({ length: 100 }, () => own('2001:db8:99:1::1')).slice(0, 3)).toEqual([
      'record',
      'record',
      'first-over',
    ]);
    expect(own('2001:db8:99:2::1')).toBe('record');
  });

  it('has no bound at 0, and records a hit without an address', () => {
    const none = senderLimiter(0);
    expect(Array.from({ length: 500 }, () => none('198.51.100.1')).every((v) => v === 'record')).toBe(true);
    const one = senderLimiter(1);
    expect([one(undefined), one(undefined)]).toEqual(['record', 'record']);
  });
});
