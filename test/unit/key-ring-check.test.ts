/**
 * The CLI's warnings on a key ring edited by hand that still parses: a member given twice, a note kept in the ring.
 */
import { describe, expect, it } from 'vitest';
import { keyRingWarnings } from '../../functions/cli/key-ring-check';
import { parseKeyRing } from '../../functions/receiving/signing';

const SECRET_1 = 'Zm9vYmFyYmF6cXV4MDEyMzQ1Njc4OWFiY2RlZmdoaWpr';
const SECRET_2 = 'c2Vjb25kLWtleS1tYXRlcmlhbC0wMTIzNDU2Nzg5YWJj';

describe('key ring warnings', () => {
  it('says nothing of a ring as rotation writes it', () => {
    const ring = JSON.stringify({
      current: 'k2',
      k1: SECRET_1,
      k2: SECRET_2,
      retire: { k1: '2026-12-01T00:00:00.000Z' },
    });
    expect(keyRingWarnings(ring)).toEqual([]);
  });

  it('names a member given twice, at the top and in retire, which the receivers read last-wins', () => {
    const ring = `{"current":"k1","k1":"${SECRET_1}","k2":"${SECRET_2}","current":"k2","retire":{"k1":"2026-12-01T00:00:00Z","k1":"2026-12-02T00:00:00Z"}}`;
    // It parses: the receivers take the last current.
    expect(parseKeyRing(ring).current.kid).toBe('k2');
    const warnings = keyRingWarnings(ring);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/gives current more than once: only the last is read/);
    expect(warnings[1]).toMatch(/gives retire\.k1 more than once/);
    // Strings that hold a colon or escaped quotes are values, not members.
    expect(keyRingWarnings(`{"current":"k1","k1":"${SECRET_1}","k2":"a \\"b\\": c ${SECRET_2}"}`)).toEqual([
      expect.stringMatching(/member k2 holds words/),
    ]);
  });

  it('names a note kept in the ring, which the receivers accept as a key, and never quotes a secret', () => {
    const note = 'rotated by Alice after the laptop was lost in March';
    const ring = JSON.stringify({ current: 'k1', k1: SECRET_1, note });
    expect(parseKeyRing(ring).keys.has('note')).toBe(true);
    const warnings = keyRingWarnings(ring);
    expect(warnings).toEqual([expect.stringMatching(/member note holds words, not key material/)]);
    expect(warnings.join('\n')).not.toContain(note);
    expect(warnings.join('\n')).not.toContain(SECRET_1);
  });

  it('a short note, a number, a name no key id may have, a retirement of no key or at no time: ignored by the receivers, named here', () => {
    const ring = JSON.stringify({
      current: 'k1',
      k1: SECRET_1,
      note: 'by bob',
      version: 3,
      'old key': SECRET_2,
      retire: {
        k9: '2026-12-01T00:00:00Z',
        k1x: '12/01/2026',
        k1y: '2027-01-01',
        note: '2026-12-01T00:00:00Z',
      },
      k1x: SECRET_2,
      k1y: SECRET_2,
    });
    // The receivers read it: its keys, nothing else accepted; a retirement they cannot read retires its key now.
    const parsed = parseKeyRing(ring);
    expect([...parsed.keys.keys()].sort()).toEqual(['k1', 'k1x', 'k1y']);
    expect(parsed.keys.get('k1x')?.retireAt?.getTime()).toBe(0);
    expect(parsed.keys.get('k1y')?.retireAt?.toISOString()).toBe('2027-01-01T00:00:00.000Z');
    const warnings = keyRingWarnings(ring);
    expect(warnings).toEqual([
      expect.stringMatching(/member note is not a key .*the receivers ignore it/),
      expect.stringMatching(/member version is not a key/),
      expect.stringMatching(/member old key is not a key/),
      expect.stringMatching(/retire entry for k9 names no key of the ring: it retires nothing/),
      expect.stringMatching(/retire entry for k1x .*cannot be read as a time, and the key is refused now/),
      expect.stringMatching(/retire entry for k1y .*read as 2027-01-01T00:00:00.000Z/),
      expect.stringMatching(/retire entry for note names no key of the ring/),
    ]);
    expect(warnings.join('\n')).not.toContain(SECRET_2);
    expect(warnings.join('\n')).not.toContain('by bob');
  });

  it('shows a long member name by its length only (a secret put where a name belongs)', () => {
    const ring = `{"current":"k1","k1":"${SECRET_1}","${SECRET_2}":"x y","${SECRET_2}":"x y"}`;
    const text = keyRingWarnings(ring).join('\n');
    expect(text).toContain('(a name of 44 characters)');
    expect(text).not.toContain(SECRET_2);
  });
});
