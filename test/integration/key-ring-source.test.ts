/**
 * Key ring sources: Secrets Manager through the cache, with one fresh look for an unknown key id (rate-limited),
 * a file the local stack re-reads when it changes, and saving a rotated ring.
 */
import { mkdtempSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { parseKeyRing, sign } from '../../functions/receiving/signing';
import { checkSignature, keyRingStore } from '../../functions/runtime/key-ring-source';

const secrets = mockClient(SecretsManagerClient);
afterAll(() => secrets.restore());
beforeEach(() => secrets.reset());

const OLD = JSON.stringify({ current: 'k1', k1: 'a'.repeat(40) });
const NEW = JSON.stringify({ current: 'k2', k1: 'a'.repeat(40), k2: 'b'.repeat(40) });
const target = { channel: 'postback', surveyId: '9', outcome: 'success' } as const;
const claimWith = (kid: string, ringJson: string) => {
  const key = parseKeyRing(ringJson).keys.get(kid);
  if (!key) throw new Error(kid);
  return { target, kid, signature: sign(key, target) };
};

describe('Secrets Manager key ring', () => {
  it('is cached, and fetched afresh once when a hit presents a key id it does not know', async () => {
    secrets.on(GetSecretValueCommand).resolvesOnce({ SecretString: OLD }).resolves({ SecretString: NEW });
    const source = keyRingStore({ secretId: 'ring-a' }).load;
    expect((await checkSignature(source, claimWith('k1', OLD), new Date())).valid).toBe(true);
    expect((await checkSignature(source, claimWith('k1', OLD), new Date())).valid).toBe(true);
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(1);

    expect(await checkSignature(source, claimWith('k2', NEW), new Date())).toEqual({
      valid: true,
      kid: 'k2',
    });
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('forged unknown key ids cannot make it fetch more than once per interval', async () => {
    secrets.on(GetSecretValueCommand).resolves({ SecretString: OLD });
    const source = keyRingStore({ secretId: 'ring-b' }).load;
    for (let i = 0; i < 5; i++) {
      const result = await checkSignature(
        source,
        { target, kid: `k${9 + i}`, signature: 'A'.repeat(43) },
        new Date(),
      );
      expect(result).toEqual({ valid: false, reason: 'unknown-key' });
    }
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('saves a rotated ring with PutSecretValue', async () => {
    await keyRingStore({ secretId: 'ring-c' }).save(parseKeyRing(NEW));
    const [call] = secrets.commandCalls(PutSecretValueCommand);
    expect(call?.args[0].input.SecretId).toBe('ring-c');
    expect(parseKeyRing(call?.args[0].input.SecretString ?? '').current.kid).toBe('k2');
  });
});

describe('file key ring', () => {
  it('is re-read when the file changes, so a rotation reaches the running local stack', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'ring-')), 'keys.json');
    const store = keyRingStore({ file });
    await store.save(parseKeyRing(OLD));
    expect((await store.load()).current.kid).toBe('k1');
    await store.save(parseKeyRing(NEW));
    utimesSync(file, new Date(), new Date(Date.now() + 5_000));
    expect((await store.load()).current.kid).toBe('k2');
  });
});
