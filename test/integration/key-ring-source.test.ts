/**
 * Key ring sources: Secrets Manager through the cache, with one fresh look for an unknown key id (rate-limited;
 * unavailable rather than refused when no fresh look can be had), a time limit on every fetch,
 * a file the local stack re-reads when it changes, and saving a rotated ring.
 */
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { parseKeyRing, sign } from '../../functions/receiving/signing';
import { checkSignature, KeyRingUnavailable, keyRingStore } from '../../functions/runtime/key-ring-source';
import { scratchDirectory } from '../support/scratch';

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

  it('takes one fresh look when a hit presents a key the cached ring holds as retired: a retirement put back is heeded at once', async () => {
    const retired = JSON.stringify({
      current: 'k2',
      k1: 'a'.repeat(40),
      k2: 'b'.repeat(40),
      retire: { k1: '2026-01-01T00:00:00Z' },
    });
    const putBack = JSON.stringify({
      current: 'k2',
      k1: 'a'.repeat(40),
      k2: 'b'.repeat(40),
      retire: { k1: '2099-01-01T00:00:00Z' },
    });
    secrets
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: retired })
      .resolves({ SecretString: putBack });
    const source = keyRingStore({ secretId: 'ring-r' }).load;
    expect((await checkSignature(source, claimWith('k2', retired), new Date())).valid).toBe(true);
    expect(await checkSignature(source, claimWith('k1', retired), new Date())).toEqual({
      valid: true,
      kid: 'k1',
    });
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('replays of a retired key cannot make it fetch more than once per interval, and are refused', async () => {
    const retired = JSON.stringify({
      current: 'k2',
      k1: 'a'.repeat(40),
      k2: 'b'.repeat(40),
      retire: { k1: '2026-01-01T00:00:00Z' },
    });
    secrets.on(GetSecretValueCommand).resolves({ SecretString: retired });
    const source = keyRingStore({ secretId: 'ring-s' }).load;
    for (let i = 0; i < 5; i++)
      expect(await checkSignature(source, claimWith('k1', retired), new Date())).toEqual({
        valid: false,
        reason: 'retired-key',
      });
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('forged unknown key ids cannot make it fetch more than once per interval, and are refused, not taken for an outage', async () => {
    secrets.on(GetSecretValueCommand).resolves({ SecretString: OLD });
    const source = keyRingStore({ secretId: 'ring-b' }).load;
    const forged = (kid: string) =>
      checkSignature(source, { target, kid, signature: 'A'.repeat(43) }, new Date());
    // Looked up afresh, then taken as fresh for a few seconds: refused each time, one fetch in all.
    for (let i = 0; i < 5; i++)
      expect(await forged(`k${9 + i}`)).toEqual({ valid: false, reason: 'unknown-key' });
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('takes one fresh look when a signature does not check out under its key: a secret replaced under the same key id is heeded at once', async () => {
    const replaced = JSON.stringify({ current: 'k1', k1: 'c'.repeat(40) });
    secrets
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: OLD })
      .resolves({ SecretString: replaced });
    const source = keyRingStore({ secretId: 'ring-m' }).load;
    expect((await checkSignature(source, claimWith('k1', OLD), new Date())).valid).toBe(true);
    expect(await checkSignature(source, claimWith('k1', replaced), new Date())).toEqual({
      valid: true,
      kid: 'k1',
    });
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('forged signatures under a known key cannot make it fetch more than once per interval, and are refused, even while the ring cannot be read afresh', async () => {
    secrets
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: OLD })
      .rejects(Object.assign(new Error('throttled'), { name: 'ThrottlingException' }));
    const source = keyRingStore({ secretId: 'ring-n' }).load;
    const forged = () => checkSignature(source, { target, kid: 'k1', signature: 'A'.repeat(43) }, new Date());
    for (let i = 0; i < 5; i++) expect(await forged()).toEqual({ valid: false, reason: 'mismatch' });
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
    // The genuine key still serves from the ring read before.
    expect((await checkSignature(source, claimWith('k1', OLD), new Date())).valid).toBe(true);
  });

  it('a job that signs URLs reads the ring afresh or not at all: no stand-in for a ring that cannot be read', async () => {
    secrets
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: OLD })
      .rejects(Object.assign(new Error('throttled'), { name: 'ThrottlingException' }));
    const store = keyRingStore({ secretId: 'ring-g' });
    expect((await store.load({ fresh: true })).current.kid).toBe('k1');
    await expect(store.load({ fresh: true })).rejects.toBeInstanceOf(KeyRingUnavailable);
    // A receiver takes the last good ring instead, and for a while after a failure asks for nothing.
    expect((await store.load()).current.kid).toBe('k1');
    const asked = secrets.commandCalls(GetSecretValueCommand).length;
    expect((await store.load()).current.kid).toBe('k1');
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(asked);
  });

  it('unreadable at a cold start, or not answering, is unavailable, never a hang and never a refusal', async () => {
    secrets
      .on(GetSecretValueCommand)
      .rejects(Object.assign(new Error('down'), { name: 'InternalServiceError' }));
    await expect(keyRingStore({ secretId: 'ring-d' }).load()).rejects.toBeInstanceOf(KeyRingUnavailable);
    secrets.reset();
    secrets.on(GetSecretValueCommand).callsFake(() => new Promise(() => undefined));
    const started = Date.now();
    await expect(keyRingStore({ secretId: 'ring-e' }, { fetchTimeoutMs: 100 }).load()).rejects.toBeInstanceOf(
      KeyRingUnavailable,
    );
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('a fresh look for an unknown key id that fails or hangs is unavailable, not a refusal; the cached ring still serves', async () => {
    secrets
      .on(GetSecretValueCommand)
      .resolvesOnce({ SecretString: OLD })
      .callsFake(() => new Promise(() => undefined));
    const source = keyRingStore({ secretId: 'ring-f' }, { fetchTimeoutMs: 100 }).load;
    expect((await checkSignature(source, claimWith('k1', OLD), new Date())).valid).toBe(true);
    await expect(checkSignature(source, claimWith('k2', NEW), new Date())).rejects.toBeInstanceOf(
      KeyRingUnavailable,
    );
    // Moments later, still no answer to go by: not refused either.
    await expect(checkSignature(source, claimWith('k2', NEW), new Date())).rejects.toBeInstanceOf(
      KeyRingUnavailable,
    );
    expect((await checkSignature(source, claimWith('k1', OLD), new Date())).valid).toBe(true);
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
    const file = join(scratchDirectory('ring-'), 'keys.json');
    const store = keyRingStore({ file });
    await store.save(parseKeyRing(OLD));
    expect((await store.load()).current.kid).toBe('k1');
    await store.save(parseKeyRing(NEW));
    utimesSync(file, new Date(), new Date(Date.now() + 5_000));
    expect((await store.load()).current.kid).toBe('k2');
  });
});

describe('file key ring, written while read', () => {
  it('is replaced whole by a save: hits reading it meanwhile read the old ring or the new, never half of one', async () => {
    const file = join(scratchDirectory('ring-atomic-'), 'ring.json');
    const writer = keyRingStore({ file });
    await writer.save(parseKeyRing(OLD));
    const readers = Array.from({ length: 4 }, () => keyRingStore({ file }));
    let saving = true;
    const saves = (async () => {
      for (let i = 0; i < 150; i++) await writer.save(parseKeyRing(i % 2 ? OLD : NEW));
      saving = false;
    })();
    const kids = new Set<string>();
    await Promise.all(
      readers.map(async (reader) => {
        while (saving) kids.add((await reader.load()).current.kid);
      }),
    );
    await saves;
    expect([...kids].sort()).toEqual(['k1', 'k2']);
  });

  it('read while an editor writes it in place (empty, or cut short): the ring read before stands until it reads whole', async () => {
    const file = join(scratchDirectory('ring-edited-'), 'ring.json');
    const store = keyRingStore({ file });
    await store.save(parseKeyRing(OLD));
    expect((await store.load()).current.kid).toBe('k1');
    writeFileSync(file, NEW.slice(0, 20));
    utimesSync(file, new Date(), new Date(Date.now() + 5_000));
    expect((await store.load()).current.kid).toBe('k1');
    writeFileSync(file, NEW);
    utimesSync(file, new Date(), new Date(Date.now() + 10_000));
    expect((await store.load()).current.kid).toBe('k2');
    // Left broken (written more than moments ago): refused, as a process starting now would refuse it.
    writeFileSync(file, NEW.slice(0, 20));
    utimesSync(file, new Date(), new Date(Date.now() - 10_000));
    await expect(store.load()).rejects.toThrow(/not valid JSON/);
    // Never read whole: nothing to stand in, so refused as before.
    const fresh = join(scratchDirectory('ring-cut-'), 'ring.json');
    writeFileSync(fresh, NEW.slice(0, 20));
    await expect(keyRingStore({ file: fresh }).load()).rejects.toThrow(/not valid JSON/);
  });

  it('a save keeps the file its mode, and replaces what a link points at, not the link; nothing is left beside it', async () => {
    const directory = scratchDirectory('ring-link-');
    const target = join(directory, 'ring.json');
    const link = join(directory, 'keys.json');
    writeFileSync(target, OLD, { mode: 0o640 });
    chmodSync(target, 0o640);
    symlinkSync(target, link);
    await keyRingStore({ file: link }).save(parseKeyRing(NEW));
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(statSync(target).mode & 0o777).toBe(0o640);
    expect(parseKeyRing(readFileSync(target, 'utf8')).current.kid).toBe('k2');
    expect(readdirSync(directory).sort()).toEqual(['keys.json', 'ring.json']);
    // A save that cannot be made (a directory where the file goes) leaves no copy of the secrets behind.
    const blocked = join(directory, 'blocked.json');
    mkdirSync(blocked);
    await expect(keyRingStore({ file: blocked }).save(parseKeyRing(NEW))).rejects.toThrow();
    expect(readdirSync(directory).sort()).toEqual(['blocked.json', 'keys.json', 'ring.json']);
  });
});
