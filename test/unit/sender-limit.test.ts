/** The per-sender bound on recorded redirects, per minute. */
import { describe, expect, it } from 'vitest';
import { senderLimiter } from '../../functions/receiving/sender-limit';

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

  it('has no bound at 0, and records a hit without an address', () => {
    const none = senderLimiter(0);
    expect(Array.from({ length: 500 }, () => none('198.51.100.1')).every((v) => v === 'record')).toBe(true);
    const one = senderLimiter(1);
    expect([one(undefined), one(undefined)]).toEqual(['record', 'record']);
  });
});
