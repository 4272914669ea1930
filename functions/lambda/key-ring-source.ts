/**
 * Where the receivers get the signing key ring: Secrets Manager in AWS (fetched through Powertools'
 * cached provider, so a rotation reaches warm containers within the cache age), the environment locally.
 */
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import { type KeyRing, parseKeyRing } from '../core/signing';
import type { KeyRingLocation } from './config';
import { logger } from './observability';

/** How long a fetched key ring is trusted before it is fetched again. */
export const KEY_RING_CACHE_SECONDS = 300;

export type KeyRingSource = () => Promise<KeyRing>;

export function keyRingSource(location: KeyRingLocation): KeyRingSource {
  if ('inline' in location) {
    const ring = parseKeyRing(location.inline);
    return async () => ring;
  }
  let lastGood: { raw: string; ring: KeyRing } | undefined;
  return async () => {
    try {
      const raw = await getSecret<string>(location.secretId, { maxAge: KEY_RING_CACHE_SECONDS });
      if (typeof raw !== 'string') throw new Error('signing key secret has no string value');
      if (lastGood?.raw !== raw) lastGood = { raw, ring: parseKeyRing(raw) };
      return lastGood.ring;
    } catch (error) {
      // A key ring that worked a moment ago is better than refusing every hit while Secrets Manager is down.
      if (lastGood) {
        logger.warn('signing key ring refresh failed; using the last good one', { error: describe(error) });
        return lastGood.ring;
      }
      throw error;
    }
  };
}

/** An error's name and message only: a key ring error never carries secret material, nor does this. */
const describe = (error: unknown) =>
  error instanceof Error ? { name: error.name, message: error.message } : { name: 'unknown' };
