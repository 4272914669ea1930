/**
 * Where the marketplace token comes from: Secrets Manager or SSM in AWS (cached across calls), the environment
 * locally; and configuration errors that name the variable, never its value.
 */
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { marketplaceFromEnvironment } from '../../functions/runtime/marketplace-access';
import { type LocalMarketplace, startLocalMarketplace } from '../../infra/local/marketplace/server';

const TOKEN = 'token-from-the-vault-0123456789';
let marketplace: LocalMarketplace;
const secrets = mockClient(SecretsManagerClient);
const ssm = mockClient(SSMClient);

beforeAll(async () => {
  marketplace = await startLocalMarketplace({ accessToken: TOKEN });
});
afterAll(async () => {
  secrets.restore();
  ssm.restore();
  await marketplace.stop();
});

describe('marketplace access', () => {
  it('reads the token from Secrets Manager once and reuses it', async () => {
    secrets.reset();
    secrets.on(GetSecretValueCommand, { SecretId: 'marketplace-token' }).resolves({ SecretString: TOKEN });
    const client = marketplaceFromEnvironment({
      MARKETPLACE_BASE_URL: marketplace.url,
      MARKETPLACE_TOKEN_SECRET_ID: 'marketplace-token',
    });
    await client.getMetadata();
    await client.getAllocatedSurveys();
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(1);
  });

  it('a scheduled run built from the environment waits out a Retry-After of a minute; any other client refuses at once', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'Date'] });
    const fetched = vi.spyOn(globalThis, 'fetch');
    try {
      const env = {
        MARKETPLACE_BASE_URL: marketplace.url,
        MARKETPLACE_ACCESS_TOKEN: TOKEN,
        MARKETPLACE_RETRIES: '2',
      };
      const refusedOnce = () => {
        let refused = false;
        fetched.mockImplementation(async () => {
          if (refused)
            return new Response(JSON.stringify({ apiStatus: 'success', result: [] }), { status: 200 });
          refused = true;
          return new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Too many requests' }), {
            status: 429,
            headers: { 'retry-after': '60' },
          });
        });
      };
      refusedOnce();
      const run = marketplaceFromEnvironment(env, { stopAt: () => Date.now() + 600_000 });
      const waited = run.getAllocatedSurveys();
      await vi.advanceTimersByTimeAsync(61_000);
      await expect(waited).resolves.toMatchObject({ rows: [] });
      expect(fetched).toHaveBeenCalledTimes(2);
      fetched.mockClear();
      refusedOnce();
      await expect(marketplaceFromEnvironment(env).getAllocatedSurveys()).rejects.toThrow(
        /asked for no calls for 60 s/,
      );
      expect(fetched).toHaveBeenCalledTimes(1);
    } finally {
      fetched.mockRestore();
      vi.useRealTimers();
    }
  });

  it("reads no answer larger than MARKETPLACE_MAX_ANSWER_MB, else an eighth of the function's memory (64 MB at least)", async () => {
    const answer = (megabytes: number) =>
      new Response('{}', { status: 200, headers: { 'content-length': String(megabytes * 1_048_576) } });
    const fetched = vi.spyOn(globalThis, 'fetch');
    const env = {
      MARKETPLACE_BASE_URL: marketplace.url,
      MARKETPLACE_ACCESS_TOKEN: TOKEN,
      MARKETPLACE_RETRIES: '0',
    };
    fetched.mockImplementation(async () => answer(2));
    await expect(
      marketplaceFromEnvironment({ ...env, MARKETPLACE_MAX_ANSWER_MB: '1' }).getMetadata(),
    ).rejects.toThrow(/over 1 MB/);
    fetched.mockImplementation(async () => answer(129));
    await expect(
      marketplaceFromEnvironment({ ...env, AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '1024' }).getMetadata(),
    ).rejects.toThrow(/over 128 MB/);
    // At least 64 MB, whatever the memory (a listing the function may well parse is not refused).
    fetched.mockImplementation(async () => answer(40));
    await expect(
      marketplaceFromEnvironment({ ...env, AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '256' }).getMetadata(),
    ).rejects.not.toThrow(/over \d+ MB/);
    fetched.mockRestore();
  });

  it('spaces calls by MARKETPLACE_CALLS_PER_SECOND, and not at all when it is unset or empty', async () => {
    const starts: number[] = [];
    const fetched = vi.spyOn(globalThis, 'fetch').mockImplementation(async () => {
      starts.push(performance.now());
      return new Response('{"result":{},"success":true}', { status: 200 });
    });
    // How long nine calls at once take to start, first to last.
    const span = async (extra: Record<string, string>) => {
      starts.length = 0;
      const client = marketplaceFromEnvironment({
        MARKETPLACE_BASE_URL: marketplace.url,
        MARKETPLACE_ACCESS_TOKEN: TOKEN,
        MARKETPLACE_RETRIES: '0',
        ...extra,
      });
      await Promise.allSettled(Array.from({ length: 9 }, () => client.getMetadata()));
      return (starts.at(-1) as number) - (starts[0] as number);
    };
    try {
      // 20 a second: eight gaps of 50 ms at least.
      expect(await span({ MARKETPLACE_CALLS_PER_SECOND: '20' })).toBeGreaterThanOrEqual(380);
      // Unset or empty: no spacing (empty once read as 10 a second, 800 ms for nine).
      for (const unset of [{}, { MARKETPLACE_CALLS_PER_SECOND: '' }] as Record<string, string>[])
        expect(await span(unset)).toBeLessThan(300);
      expect(() => marketplaceFromEnvironment({ MARKETPLACE_CALLS_PER_SECOND: '0' })).toThrow(
        /MARKETPLACE_CALLS_PER_SECOND/,
      );
    } finally {
      fetched.mockRestore();
    }
  });

  it('reads the token past its cache after a 401: one rotated in its secret is used at once', async () => {
    secrets.reset();
    secrets
      .on(GetSecretValueCommand, { SecretId: 'rotated-token' })
      .resolvesOnce({ SecretString: 'the-token-before-rotation' })
      .resolves({ SecretString: TOKEN });
    const client = marketplaceFromEnvironment({
      MARKETPLACE_BASE_URL: marketplace.url,
      MARKETPLACE_TOKEN_SECRET_ID: 'rotated-token',
      MARKETPLACE_RETRIES: '0',
    });
    await expect(client.getMetadata()).resolves.toBeDefined();
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
    // The fresh token is cached as usual afterwards.
    await client.getMetadata();
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('reads the token from an SSM SecureString, decrypted', async () => {
    ssm.reset();
    ssm.on(GetParameterCommand).resolves({ Parameter: { Value: TOKEN } });
    const client = marketplaceFromEnvironment({
      MARKETPLACE_BASE_URL: marketplace.url,
      MARKETPLACE_TOKEN_PARAMETER: '/receiver/marketplace-token',
    });
    await client.getMetadata();
    expect(ssm.commandCalls(GetParameterCommand)[0]?.args[0].input).toEqual({
      Name: '/receiver/marketplace-token',
      WithDecryption: true,
    });
  });

  it('takes the token from the environment locally', async () => {
    const client = marketplaceFromEnvironment({
      MARKETPLACE_BASE_URL: marketplace.url,
      MARKETPLACE_ACCESS_TOKEN: TOKEN,
      MARKETPLACE_API_VERSION: 'v2',
    });
    expect((await client.getAllocatedSurveys()).rows[0]?.countryCode).toBe('US');
  });

  it('refuses a plain token in Lambda, and names variables without echoing values', () => {
    expect(() =>
      marketplaceFromEnvironment({
        MARKETPLACE_BASE_URL: marketplace.url,
        MARKETPLACE_ACCESS_TOKEN: TOKEN,
        AWS_LAMBDA_FUNCTION_NAME: 'f',
      }),
    ).toThrow(/MARKETPLACE_ACCESS_TOKEN must not be set in Lambda/);
    try {
      marketplaceFromEnvironment({
        MARKETPLACE_BASE_URL: 'not a url',
        MARKETPLACE_ACCESS_TOKEN: TOKEN,
        MARKETPLACE_TOKEN_SECRET_ID: 'x',
      });
      expect.unreachable();
    } catch (error) {
      const message = String(error);
      expect(message).toMatch(/MARKETPLACE_BASE_URL/);
      expect(message).toMatch(/exactly one of/);
      expect(message).not.toContain(TOKEN);
    }
    // Two sources set (the local stack's default token beside a parameter given): the two named, not a third.
    expect(() =>
      marketplaceFromEnvironment({
        MARKETPLACE_BASE_URL: marketplace.url,
        MARKETPLACE_ACCESS_TOKEN: TOKEN,
        MARKETPLACE_TOKEN_PARAMETER: '/marketplace/token',
      }),
    ).toThrow(
      /MARKETPLACE_TOKEN_PARAMETER and MARKETPLACE_ACCESS_TOKEN are both set: set exactly one of MARKETPLACE_TOKEN_SECRET_ID/,
    );
    expect(() => marketplaceFromEnvironment({ MARKETPLACE_BASE_URL: marketplace.url })).toThrow(
      /MARKETPLACE_TOKEN_SECRET_ID is not set, nor MARKETPLACE_TOKEN_PARAMETER or MARKETPLACE_ACCESS_TOKEN/,
    );
  });
});
