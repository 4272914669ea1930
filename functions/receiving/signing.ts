/**
 * Signatures on the URLs this product hands to the marketplace.
 *
 * A URL's signature binds it to its channel, survey, outcome and key id, so a respondent who sees a redirect
 * URL cannot turn it into a postback, another outcome or another survey. pid and token are not signed: they
 * are unknown when the URL is configured (the marketplace substitutes them per attempt).
 *
 * Keys rotate by id. A key ring holds every key that is still accepted; `current` names the one that signs.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import * as z from 'zod/mini';
import { describeIssues } from '../shared/validation';
import type { Channel, Outcome } from './outcome';

export const KEY_ID_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;

/**
 * A presented key id as a log line may show it: itself when it has a key id's shape, else only its length (a URL
 * built with its parameters swapped carries the signature as `kid`: 40 of its 43 characters logged would leave a
 * forger a few thousand guesses).
 */
export const loggableKeyId = (kid: string | undefined): string | undefined =>
  kid === undefined || KEY_ID_PATTERN.test(kid) ? kid : `(${kid.length} characters, not a key id)`;
/** base64url of a 32-byte HMAC-SHA256, unpadded. */
const SIGNATURE_PATTERN = /^[A-Za-z0-9_-]{43}$/;
const MIN_SECRET_LENGTH = 32;
const RESERVED = new Set(['current', 'retire']);
/**
 * Names a key id may not take: the ring's own fields, and those every object has (the stored ring is a plain JSON
 * object: `__proto__` as a property name is lost on the way, `constructor` found where no key was written).
 */
const forbiddenKeyId = (kid: string) => RESERVED.has(kid) || kid in Object.prototype;
/**
 * A key id as an error may show it: a short one itself, a long one only by its length (a ring edited by hand with a
 * key's name and secret swapped has a secret where a name belongs, and errors reach logs and terminals).
 */
export const shownKeyId = (kid: string) => (kid.length <= 16 ? kid : `(a name of ${kid.length} characters)`);

export interface SigningKey {
  readonly kid: string;
  readonly secret: string;
  /** After this instant the key is refused. */
  readonly retireAt?: Date;
}

export interface KeyRing {
  readonly current: SigningKey;
  readonly keys: ReadonlyMap<string, SigningKey>;
}

/** What a signature is bound to. */
export interface SignedTarget {
  readonly channel: Channel;
  readonly surveyId: string;
  readonly outcome: Outcome;
}

export type SignatureCheck =
  | { readonly valid: true; readonly kid: string }
  | {
      readonly valid: false;
      readonly reason: 'missing' | 'malformed' | 'unknown-key' | 'retired-key' | 'mismatch';
    };

const keyId = (message?: string) => z.string().check(z.regex(KEY_ID_PATTERN, message));
const keyRingDocument = z.catchall(
  z.object({
    current: keyId('must name a key id'),
    // Read entry by entry below: one that names no key, or no time, is not the ring's undoing.
    retire: z.optional(z.record(z.string(), z.unknown())),
  }),
  z.unknown(),
);
const retirementTime = z.iso.datetime({ offset: true });

/**
 * Whether a member of the ring is a key: a key id's name holding a secret of at least `MIN_SECRET_LENGTH` characters.
 * Any other (a note, a key cut short, a name no key id may have) is never accepted, and is no reason to refuse the
 * ring's keys: refusing the ring would refuse every hit (the CLI warns of it, key-ring-check.ts).
 */
export const isKeyMember = (name: string, value: unknown): value is string =>
  !RESERVED.has(name) &&
  KEY_ID_PATTERN.test(name) &&
  typeof value === 'string' &&
  value.length >= MIN_SECRET_LENGTH;

/**
 * When `retire` retires a key: the time its entry gives (ISO 8601 with its offset; a date written year first
 * otherwise, as it reads); an entry whose time cannot be read so retires the key now, as written by hand to retire a
 * key that leaked, rather than leave it accepted (the CLI warns of both).
 */
export function retirementOf(retire: Readonly<Record<string, unknown>>, kid: string): Date | undefined {
  if (!Object.hasOwn(retire, kid)) return undefined;
  const value = retire[kid];
  const at = retirementTime.safeParse(value);
  if (at.success) return new Date(at.data);
  // Year first only (`2027-01-01`, `2027-01-01 12:00`): `12/01/2026` reads as December here and January elsewhere.
  // Without an offset, in UTC, as the receivers read it: JavaScript reads a time without one in the machine's zone,
  // so a laptop in Pacific time (the CLI, the local stack) would retire the key eight hours after production.
  const read =
    typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}/.test(value)
      ? Number.NaN
      : /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(value.trim())
        ? Date.parse(`${value.trim().replace(' ', 'T')}Z`)
        : Date.parse(value);
  return new Date(Number.isFinite(read) ? read : 0);
}

/** Whether a `retire` entry's time is written as a ring's times are (ISO 8601 with its offset). */
export const isRetirementTime = (value: unknown): boolean => retirementTime.safeParse(value).success;

/**
 * Parses a key ring from its stored JSON form:
 * `{"current":"k2","k1":"<secret>","k2":"<secret>","retire":{"k1":"2026-12-01T00:00:00Z"}}`.
 * Every property other than `current` and `retire` is a key id holding a secret of at least 32 characters; one
 * that is not is no key (`isKeyMember`), a `retire` entry naming no key retires nothing, and one whose time cannot
 * be read retires its key now (`retirementOf`). Refused: a ring whose current key is not one, or is retired.
 * Errors never include secret material.
 */
export function parseKeyRing(json: string): KeyRing {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new KeyRingError('signing key ring is not valid JSON');
  }
  // Read off the document as parsed, before anything copies it (a copy would drop `__proto__` without a word).
  if (raw !== null && typeof raw === 'object')
    for (const name of Object.keys(raw))
      if (!RESERVED.has(name) && forbiddenKeyId(name))
        throw new KeyRingError(`signing key id ${name} is a name every object has: not a valid key id`);
  const parsed = keyRingDocument.safeParse(raw);
  // Its paths are `current` and `retire` alone (`retire`'s entries are read one by one below): never a name that
  // may be a secret put where a key id goes.
  if (!parsed.success)
    throw new KeyRingError(`signing key ring is invalid: ${describeIssues(parsed.error, { limit: 1 })}`);
  const { current, retire = {}, ...rest } = parsed.data;
  const keys = new Map<string, SigningKey>();
  for (const [kid, secret] of Object.entries(rest)) {
    if (!isKeyMember(kid, secret)) continue;
    const retireAt = retirementOf(retire, kid);
    keys.set(kid, { kid, secret, ...(retireAt ? { retireAt } : {}) });
  }
  const currentKey = keys.get(current);
  if (!currentKey)
    throw new KeyRingError(
      Object.hasOwn(rest, current)
        ? `signing key ${shownKeyId(current)} (current) must be a string of at least ${MIN_SECRET_LENGTH} characters`
        : `current names key ${shownKeyId(current)}, which the ring does not hold`,
    );
  if (currentKey.retireAt)
    throw new KeyRingError(`current key ${shownKeyId(current)} must not have a retirement time`);
  return { current: currentKey, keys };
}

export class KeyRingError extends Error {
  override readonly name = 'KeyRingError';
}

/** The signature of a target under one key: base64url HMAC-SHA256, 43 characters. */
export function sign(key: SigningKey, target: SignedTarget): string {
  const message = ['v1', target.channel, target.surveyId, target.outcome, key.kid].join('|');
  return createHmac('sha256', key.secret).update(message).digest('base64url');
}

/**
 * Checks a presented key id and signature against a target. The comparison is constant-time over the
 * signature's 43 characters; only the shape checks before it (length, alphabet) can end early.
 */
export function verify(
  ring: KeyRing,
  target: SignedTarget,
  kid: string | undefined,
  signature: string | undefined,
  now: Date,
): SignatureCheck {
  if (!kid || !signature) return { valid: false, reason: 'missing' };
  if (!KEY_ID_PATTERN.test(kid) || !SIGNATURE_PATTERN.test(signature))
    return { valid: false, reason: 'malformed' };
  const key = ring.keys.get(kid);
  if (!key) return { valid: false, reason: 'unknown-key' };
  const expected = Buffer.from(sign(key, target), 'ascii');
  const matches = timingSafeEqual(expected, Buffer.from(signature, 'ascii'));
  if (!matches) return { valid: false, reason: 'mismatch' };
  if (key.retireAt && now.getTime() >= key.retireAt.getTime()) return { valid: false, reason: 'retired-key' };
  return { valid: true, kid };
}

/** The stored JSON form of a ring (the inverse of parseKeyRing). */
export function serializeKeyRing(ring: KeyRing): string {
  const document: Record<string, unknown> = { current: ring.current.kid };
  const retire: Record<string, string> = {};
  for (const key of ring.keys.values()) {
    document[key.kid] = key.secret;
    if (key.retireAt) retire[key.kid] = key.retireAt.toISOString();
  }
  if (Object.keys(retire).length > 0) document.retire = retire;
  return JSON.stringify(document);
}

export interface Rotation {
  /** The new key id; by default the next free `k<n>`. */
  readonly kid?: string;
  /** The new key's secret (at least 32 characters of randomness). */
  readonly secret: string;
  /** When the keys signing today stop being accepted. */
  readonly retireAt: Date;
  readonly now: Date;
  /** Keys retired longer ago than this are dropped from the ring. */
  readonly forgetAfterMs?: number;
}

/**
 * A ring with a new current key. The old current key (and any other unretired one) is kept until `retireAt`;
 * keys retired long ago are dropped.
 */
export function rotateKeyRing(ring: KeyRing, rotation: Rotation): KeyRing {
  const kid = rotation.kid ?? nextKeyId(ring);
  if (!KEY_ID_PATTERN.test(kid))
    throw new KeyRingError(`a key id of ${kid.length} characters is not a valid key id`);
  if (forbiddenKeyId(kid))
    throw new KeyRingError(
      `key id ${kid} is a name the ring itself uses, or every object has: choose another`,
    );
  if (ring.keys.has(kid)) throw new KeyRingError(`key id ${kid} is already in the ring`);
  if (rotation.secret.length < MIN_SECRET_LENGTH)
    throw new KeyRingError(`a signing key must be at least ${MIN_SECRET_LENGTH} characters`);
  if (rotation.retireAt.getTime() <= rotation.now.getTime())
    throw new KeyRingError('the retirement time must be in the future');
  const forgetBefore = rotation.now.getTime() - (rotation.forgetAfterMs ?? 30 * 86_400_000);
  const keys = new Map<string, SigningKey>();
  for (const key of ring.keys.values()) {
    if (key.retireAt && key.retireAt.getTime() < forgetBefore) continue;
    const retireAt = key.retireAt && key.retireAt < rotation.retireAt ? key.retireAt : rotation.retireAt;
    keys.set(key.kid, { ...key, retireAt });
  }
  const current: SigningKey = { kid, secret: rotation.secret };
  keys.set(kid, current);
  return { current, keys };
}

function nextKeyId(ring: KeyRing): string {
  let highest = 0;
  for (const kid of ring.keys.keys()) {
    const match = /^k(\d+)$/.exec(kid);
    if (match) highest = Math.max(highest, Number(match[1]));
  }
  return `k${highest + 1}`;
}
