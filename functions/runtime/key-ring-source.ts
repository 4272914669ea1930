/**
 * Where the signing key ring lives: Secrets Manager in AWS (read through Powertools' cache, so a rotation
 * reaches warm containers within the cache age, and at once when a hit presents a key id the cached ring does
 * not know yet), a JSON file for the local stack (re-read when it changes), or inline in the environment for
 * tests. The CLI saves rotated rings through the same sources.
 */
import { chmod, chown, mkdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import { PutSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { HitClaim } from '../receiving/hit-request';
import {
  type KeyRing,
  parseKeyRing,
  type SignatureCheck,
  serializeKeyRing,
  verify,
} from '../receiving/signing';
import { settleWithin } from '../shared/time-limit';
import { logger } from './observability';

/** How long a fetched key ring is trusted before it is fetched again. */
export const KEY_RING_CACHE_SECONDS = 300;
/** A ring is fetched afresh for an unknown key id at most this often per container. */
export const UNKNOWN_KEY_REFRESH_MS = 5_000;
/** The longest a fetch of the ring may take before the last good ring stands in (or, without one, it is unavailable). */
export const KEY_RING_FETCH_TIMEOUT_MS = 2_000;
/** After a failed fetch, the last good ring serves without fetching for this long. */
export const FAILED_FETCH_PAUSE_MS = 30_000;

/**
 * The ring cannot be read (Secrets Manager down, slow, or throttled, and no ring read before), or a key id it does
 * not know could not be looked up afresh: a hit's signature can be neither accepted nor refused. A dependency
 * down, not a forgery: a postback is answered 503 so the sender can retry.
 */
export class KeyRingUnavailable extends Error {
  override readonly name = 'KeyRingUnavailable';
}

export type KeyRingLocation =
  | { readonly secretId: string }
  | { readonly file: string }
  | { readonly inline: string };

/**
 * The ring as of now (cached). With `unknownKid`, a ring missing that key is fetched afresh (rate-limited); with
 * `retiredKid`, a ring in which that key has retired, likewise (an operator who put a retirement back to rescue
 * surveys left on that key is heeded at once, not after the cache's five minutes); with `mismatchedKid`, likewise
 * whatever the ring holds (a secret replaced under the same key id, by hand or by restoring the secret, is heeded at
 * once rather than every postback signed with it refused for the cache's five minutes); with `fresh`, it is fetched
 * afresh whatever the cache holds (what a job that signs URLs starts from: a ring cached from before a rotation
 * would sign with the key being retired).
 */
export type KeyRingSource = (options?: {
  unknownKid?: string;
  retiredKid?: string;
  mismatchedKid?: string;
  fresh?: boolean;
}) => Promise<KeyRing>;

export interface KeyRingStore {
  readonly load: KeyRingSource;
  save(ring: KeyRing): Promise<void>;
  readonly location: string;
}

export function keyRingSource(location: KeyRingLocation): KeyRingSource {
  return keyRingStore(location).load;
}

export function keyRingStore(
  location: KeyRingLocation,
  options: { fetchTimeoutMs?: number } = {},
): KeyRingStore {
  if ('inline' in location) {
    let ring = parseKeyRing(location.inline);
    return {
      load: async () => ring,
      save: async (next) => {
        ring = next;
      },
      location: 'SIGNING_KEYS (environment)',
    };
  }
  if ('file' in location) return fileStore(location.file);
  return secretStore(location.secretId, options.fetchTimeoutMs);
}

/** How long after a key file was written an unreadable read of it is taken for one made mid-write. */
const MID_WRITE_MS = 2_000;

function fileStore(file: string): KeyRingStore {
  let cached: { mtimeMs: number; ring: KeyRing } | undefined;
  /** The file's time when it was last found unreadable: said once, not on every hit until it is mended. */
  let unreadableAt: number | undefined;
  return {
    load: async () => {
      const { mtimeMs } = await stat(file);
      if (cached?.mtimeMs !== mtimeMs) {
        try {
          cached = { mtimeMs, ring: parseKeyRing(await readFile(file, 'utf8')) };
        } catch (error) {
          // Read while another program wrote it (an editor saving in place, moments ago): the ring read before
          // stands, and the file is read again on the next hit. One left broken is refused, as at a cold start.
          if (!cached || Date.now() - mtimeMs > MID_WRITE_MS) throw error;
          if (unreadableAt !== mtimeMs)
            logger.warn('signing key file unreadable; using the ring read before', {
              error: describe(error),
            });
          unreadableAt = mtimeMs;
        }
      }
      return cached.ring;
    },
    save: async (ring) => {
      await mkdir(dirname(file), { recursive: true });
      // Written beside it, then renamed over it: a hit reading it meanwhile reads the old ring or the new, whole.
      // The file a link points at is the one replaced, with its mode (and, saved as root, its owner) kept.
      const target = await realpath(file).catch(() => file);
      const before = await stat(target).catch(() => undefined);
      const written = `${target}.${process.pid}.${Date.now()}.tmp`;
      try {
        await writeFile(written, `${serializeKeyRing(ring)}\n`, { mode: 0o600 });
        if (before) {
          await chmod(written, before.mode & 0o777);
          if (process.getuid?.() === 0) await chown(written, before.uid, before.gid);
        }
        await rename(written, target);
      } catch (error) {
        await rm(written, { force: true });
        throw error;
      }
    },
    location: file,
  };
}

function secretStore(secretId: string, timeoutMs = KEY_RING_FETCH_TIMEOUT_MS): KeyRingStore {
  let lastGood: { raw: string; ring: KeyRing } | undefined;
  /** When the last fetch failed: for a while after, the last good ring serves at once (no hit waits on a fetch). */
  let failedAt = Number.NEGATIVE_INFINITY;
  /** The last forced fetch: when it was made, and whether it answered. */
  let forced: { at: number; answered: boolean } = { at: Number.NEGATIVE_INFINITY, answered: false };
  /** The forced fetch under way, which hits with other unknown key ids wait for rather than start another. */
  let refreshing: Promise<KeyRing> | undefined;
  /** A fetch that neither answers nor fails within `timeoutMs` is given up (it would hold every hit). */
  const fetchRing = async (forceFetch: boolean) => {
    try {
      const raw = await settleWithin(
        getSecret<string>(secretId, { maxAge: KEY_RING_CACHE_SECONDS, forceFetch }),
        timeoutMs,
        (): never => {
          throw new Error(`no answer within ${timeoutMs} ms`);
        },
      );
      if (typeof raw !== 'string') throw new Error('signing key secret has no string value');
      if (lastGood?.raw !== raw) lastGood = { raw, ring: parseKeyRing(raw) };
      return lastGood.ring;
    } catch (error) {
      failedAt = Date.now();
      throw error;
    }
  };
  /**
   * The ring as cached or fetched; when that fails, the last good one (at once, for a while after a failure), else
   * unavailable. `fresh` takes no stand-in: a job that signs URLs with an old ring would sign with a retiring key.
   */
  const current = async (fresh: boolean) => {
    if (!fresh && lastGood && Date.now() - failedAt < FAILED_FETCH_PAUSE_MS) return lastGood.ring;
    try {
      return await fetchRing(fresh);
    } catch (error) {
      // A key ring that worked a moment ago is better than refusing every hit while Secrets Manager is down.
      if (lastGood && !fresh) {
        logger.warn('signing key ring refresh failed; using the last good one', { error: describe(error) });
        return lastGood.ring;
      }
      throw new KeyRingUnavailable(`the signing key ring cannot be read (${describe(error).message})`);
    }
  };
  let client: SecretsManagerClient | undefined;
  return {
    load: async (options = {}) => {
      const ring = await current(options.fresh === true);
      const retiredAt = options.retiredKid ? ring.keys.get(options.retiredKid)?.retireAt : undefined;
      const stale =
        options.mismatchedKid !== undefined ||
        (options.unknownKid !== undefined && !ring.keys.has(options.unknownKid)) ||
        (retiredAt !== undefined && retiredAt.getTime() <= Date.now());
      if (!stale) return ring;
      // A key id the ring does not know (or holds as retired): a rotation this container has not seen (or a
      // retirement put back), or a forgery (a replay). A ring read afresh tells them apart: one read moments ago that answered is taken as fresh (the key id is refused, so forged
      // ids cannot turn refusals into outages); without an answer (the read failed), the hit is not refused.
      if (!refreshing) {
        if (Date.now() - forced.at < UNKNOWN_KEY_REFRESH_MS) {
          if (forced.answered && lastGood) return lastGood.ring;
          throw new KeyRingUnavailable(
            'a key id the signing key ring does not know, and the ring cannot be read afresh',
          );
        }
        forced = { at: Date.now(), answered: false };
        const attempt = forced;
        refreshing = fetchRing(true)
          .then((fetched) => {
            attempt.answered = true;
            return fetched;
          })
          .finally(() => {
            refreshing = undefined;
          });
      }
      try {
        return await refreshing;
      } catch (error) {
        throw new KeyRingUnavailable(
          `the signing key ring cannot be read afresh (${describe(error).message})`,
        );
      }
    },
    save: async (ring) => {
      client ??= new SecretsManagerClient({});
      await client.send(
        new PutSecretValueCommand({ SecretId: secretId, SecretString: serializeKeyRing(ring) }),
      );
    },
    location: `Secrets Manager ${secretId}`,
  };
}

/**
 * Checks a hit's signature against the ring; a key id the cached ring does not know yet (a rotation in the last
 * few minutes), or holds as retired (a retirement put back since), gets one fresh look at the ring before the hit
 * is refused, and so does a signature that does not check out under its key (the key's secret replaced since), but
 * only where a fresh ring can be had: a forgery is refused, never taken for an outage.
 */
export async function checkSignature(
  source: KeyRingSource,
  claim: HitClaim,
  now: Date,
): Promise<SignatureCheck> {
  const ring = await source();
  const check = verify(ring, claim.target, claim.kid, claim.signature, now);
  if (check.valid) return check;
  // A sender's own `kid` or `sig` beside the URL's: any pair that checks out makes the hit genuine.
  for (const other of claim.others ?? []) {
    const again = verify(ring, claim.target, other.kid, other.signature, now);
    if (again.valid) return again;
  }
  if (check.reason === 'unknown-key')
    return verify(await source({ unknownKid: claim.kid }), claim.target, claim.kid, claim.signature, now);
  if (check.reason === 'retired-key')
    return verify(await source({ retiredKid: claim.kid }), claim.target, claim.kid, claim.signature, now);
  if (check.reason !== 'mismatch') return check;
  const fresh = await source({ mismatchedKid: claim.kid }).catch(() => ring);
  return fresh === ring ? check : verify(fresh, claim.target, claim.kid, claim.signature, now);
}

/** An error's name and message only: a key ring error never carries secret material, nor does this. */
const describe = (error: unknown) =>
  error instanceof Error ? { name: error.name, message: error.message } : { name: 'unknown' };
