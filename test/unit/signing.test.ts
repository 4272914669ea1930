import { describe, expect, it } from 'vitest';
import { keyRingWarnings } from '../../functions/cli/key-ring-check';
import {
  parseKeyRing,
  retirementOf,
  rotateKeyRing,
  serializeKeyRing,
  sign,
  verify,
} from '../../functions/receiving/signing';

const ring = parseKeyRing(
  JSON.stringify({
    current: 'k2',
    k1: 'a'.repeat(32),
    k2: 'b'.repeat(32),
    retire: { k1: '2026-12-01T00:00:00Z' },
  }),
);
const target = { channel: 'postback', surveyId: '1001', outcome: 'success' } as const;
const now = new Date('2026-11-21T12:00:00Z');

describe('key ring', () => {
  it('reads keys, the current key and retirement times', () => {
    expect(ring.current.kid).toBe('k2');
    expect([...ring.keys.keys()].sort()).toEqual(['k1', 'k2']);
    expect(ring.keys.get('k1')?.retireAt?.toISOString()).toBe('2026-12-01T00:00:00.000Z');
  });

  it.each([
    ['not JSON', 'not json', /not valid JSON/],
    ['no current', JSON.stringify({ k1: 'a'.repeat(32) }), /current/],
    ['current missing from ring', JSON.stringify({ current: 'k9', k1: 'a'.repeat(32) }), /k9/],
    [
      'a short current key',
      JSON.stringify({ current: 'k1', k1: 'short' }),
      /\(current\) must be .*at least 32/,
    ],
    [
      'retiring the current key',
      JSON.stringify({ current: 'k1', k1: 'a'.repeat(32), retire: { k1: '2026-01-01T00:00:00Z' } }),
      /current key/,
    ],
  ])('refuses a ring with %s, without echoing secrets', (_, json, message) => {
    expect(() => parseKeyRing(json)).toThrow(message);
    try {
      parseKeyRing(json);
    } catch (error) {
      expect(String(error)).not.toContain('a'.repeat(32));
      expect(String(error)).not.toContain('short');
    }
  });

  it('takes a ring whose other members are no keys (a note, a key cut short, a bad name, a retirement of none) as its keys alone', () => {
    const parsed = parseKeyRing(
      JSON.stringify({
        current: 'k1',
        k1: 'a'.repeat(32),
        note: 'by bob',
        k2: 'short',
        'bad id': 'b'.repeat(32),
        retire: { k7: '2026-01-01T00:00:00Z', k2: '2026-01-01T00:00:00Z' },
      }),
    );
    expect([...parsed.keys.keys()]).toEqual(['k1']);
    expect(parsed.current.kid).toBe('k1');
  });
});

describe('key ring mistakes made by hand', () => {
  const secret = '3f9a1c27b8e04d5f9a6b2c1d0e7f8a9b';
  it.each([
    // A key's name and secret swapped: the secret sits where a name belongs.
    ['a secret as a key name', { current: 'k1', k1: 'a'.repeat(32), [secret]: 'k2' }],
    [
      'a long secret as a key name',
      { current: 'k1', k1: 'a'.repeat(32), [`${secret}${secret}`]: 'b'.repeat(32) },
    ],
    ['a secret named as current', { current: secret, k1: 'a'.repeat(32) }],
    [
      'a secret named to retire',
      { current: 'k1', k1: 'a'.repeat(32), retire: { [secret]: '2026-01-01T00:00:00Z' } },
    ],
    [
      // Longer than a key id may be: refused by the ring's schema, whose message names where.
      'a long secret named to retire',
      { current: 'k1', k1: 'a'.repeat(32), retire: { [`${secret}${secret}`]: '2026-01-01T00:00:00Z' } },
    ],
  ])('never quotes a name that may be a secret, nor takes it for a key (%s)', (_, document) => {
    // Refused (its current key is none), or read with the misplaced secret no key: either way never quoted, in the
    // error or in the CLI's warnings.
    let said = keyRingWarnings(JSON.stringify(document)).join('\n');
    try {
      const parsed = parseKeyRing(JSON.stringify(document));
      expect([...parsed.keys.keys()].some((kid) => kid.startsWith(secret.slice(0, 16)))).toBe(false);
    } catch (error) {
      said += String(error);
    }
    expect(said).not.toContain(secret);
    expect(said).not.toContain(secret.slice(0, 16));
  });

  /** A rotation of the ring to a new key named `kid`. */
  const rotatedAs = (kid: string) => () =>
    rotateKeyRing(ring, { kid, secret: 'c'.repeat(32), retireAt: new Date(now.getTime() + 3_600_000), now });

  it.each(['__proto__', 'constructor', 'toString', 'hasOwnProperty'])(
    'refuses a key named %s (a name every object has), in a ring and in a rotation',
    (kid) => {
      const json = `{"current":"k1","k1":"${'a'.repeat(32)}","${kid}":"${'b'.repeat(32)}"}`;
      expect(() => parseKeyRing(json)).toThrow(/a name every object has/);
      expect(rotatedAs(kid)).toThrow(/a name the ring itself uses, or every object has/);
    },
  );

  it("refuses a new key named as the ring's own fields", () => {
    for (const kid of ['current', 'retire']) expect(rotatedAs(kid)).toThrow(/a name the ring itself uses/);
  });
});

describe('a retirement written without an offset', () => {
  it("is read in UTC, as the receivers read it, whatever the machine's zone; one with an offset or a zone name as it says", () => {
    expect(retirementOf({ k1: '2027-01-01 12:00' }, 'k1')?.toISOString()).toBe('2027-01-01T12:00:00.000Z');
    expect(retirementOf({ k1: '2027-01-01T12:00:30' }, 'k1')?.toISOString()).toBe('2027-01-01T12:00:30.000Z');
    expect(retirementOf({ k1: '2027-01-01' }, 'k1')?.toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(retirementOf({ k1: '2027-01-01T12:00:00+02:00' }, 'k1')?.toISOString()).toBe(
      '2027-01-01T10:00:00.000Z',
    );
  });
});

describe('signatures', () => {
  const key = ring.current;

  it('are 43 base64url characters and deterministic', () => {
    const signature = sign(key, target);
    expect(signature).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(sign(key, target)).toBe(signature);
  });

  it('accept the signature of the same target and key', () => {
    expect(verify(ring, target, 'k2', sign(key, target), now)).toEqual({ valid: true, kid: 'k2' });
  });

  it.each([
    ['another survey', { ...target, surveyId: '1002' }],
    ['another outcome', { ...target, outcome: 'fail' as const }],
    ['another channel', { ...target, channel: 'redirect' as const }],
  ])('bind the URL: a signature for %s does not verify', (_, other) => {
    expect(verify(ring, target, 'k2', sign(key, other), now)).toEqual({ valid: false, reason: 'mismatch' });
  });

  it('bind the key id: a valid signature presented under another key id fails', () => {
    expect(verify(ring, target, 'k1', sign(key, target), now)).toEqual({ valid: false, reason: 'mismatch' });
  });

  it('refuse missing, malformed and unknown-key signatures', () => {
    const good = sign(key, target);
    expect(verify(ring, target, undefined, good, now)).toMatchObject({ reason: 'missing' });
    expect(verify(ring, target, 'k2', undefined, now)).toMatchObject({ reason: 'missing' });
    expect(verify(ring, target, 'k2', `${good}=`, now)).toMatchObject({ reason: 'malformed' });
    expect(verify(ring, target, 'k2', good.slice(1), now)).toMatchObject({ reason: 'malformed' });
    expect(verify(ring, target, 'k2', `${good.slice(0, 42)}!`, now)).toMatchObject({ reason: 'malformed' });
    expect(verify(ring, target, 'k3', good, now)).toMatchObject({ reason: 'unknown-key' });
  });

  it('refuse a signature differing only in its last character (no base64 malleability)', () => {
    const good = sign(key, target);
    const last = good.at(-1) === 'A' ? 'B' : 'A';
    expect(verify(ring, target, 'k2', good.slice(0, 42) + last, now)).toMatchObject({ reason: 'mismatch' });
  });

  it('accept an old key until its retirement time and refuse it from then on', () => {
    const old = ring.keys.get('k1');
    if (!old) throw new Error('k1 missing');
    const signature = sign(old, target);
    expect(verify(ring, target, 'k1', signature, new Date('2026-11-30T23:59:59Z')).valid).toBe(true);
    expect(verify(ring, target, 'k1', signature, new Date('2026-12-01T00:00:00Z'))).toMatchObject({
      reason: 'retired-key',
    });
  });
});

describe('rotation', () => {
  const now = new Date('2026-11-21T12:00:00Z');
  const base = parseKeyRing(JSON.stringify({ current: 'k1', k1: 'a'.repeat(32) }));

  it('adds the next key as current and retires the old one at the given time', () => {
    const rotated = rotateKeyRing(base, {
      secret: 'n'.repeat(40),
      retireAt: new Date('2026-11-28T12:00:00Z'),
      now,
    });
    expect(rotated.current.kid).toBe('k2');
    expect(rotated.keys.get('k1')?.retireAt?.toISOString()).toBe('2026-11-28T12:00:00.000Z');
    expect(parseKeyRing(serializeKeyRing(rotated))).toEqual(rotated);
  });

  it('keeps an earlier retirement, and forgets keys retired long ago', () => {
    const once = rotateKeyRing(base, {
      secret: 'n'.repeat(40),
      retireAt: new Date('2026-11-22T00:00:00Z'),
      now,
    });
    const twice = rotateKeyRing(once, {
      secret: 'm'.repeat(40),
      retireAt: new Date('2026-12-30T00:00:00Z'),
      now,
    });
    expect(twice.keys.get('k1')?.retireAt?.toISOString()).toBe('2026-11-22T00:00:00.000Z');
    const later = rotateKeyRing(twice, {
      secret: 'o'.repeat(40),
      retireAt: new Date('2027-03-01T00:00:00Z'),
      now: new Date('2027-02-01T00:00:00Z'),
    });
    // k1 and k2 retired more than 30 days before this rotation; k3 retires with it.
    expect([...later.keys.keys()].sort()).toEqual(['k3', 'k4']);
  });

  it('refuses a duplicate key id, a short secret and a retirement in the past', () => {
    expect(() =>
      rotateKeyRing(base, { kid: 'k1', secret: 'n'.repeat(40), retireAt: new Date('2027-01-01'), now }),
    ).toThrow(/already/);
    expect(() => rotateKeyRing(base, { secret: 'short', retireAt: new Date('2027-01-01'), now })).toThrow(
      /at least/,
    );
    expect(() =>
      rotateKeyRing(base, { secret: 'n'.repeat(40), retireAt: new Date('2026-01-01'), now }),
    ).toThrow(/future/);
  });
});
