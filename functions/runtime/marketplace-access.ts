/**
 * The marketplace client as configured by the environment. The access token comes from Secrets Manager or an
 * SSM SecureString in AWS (fetched through Powertools' cache, so warm containers do not fetch it per call), or
 * from MARKETPLACE_ACCESS_TOKEN locally. It is never logged and never part of an error.
 */

import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import { getParameter } from '@aws-lambda-powertools/parameters/ssm';
import * as z from 'zod/mini';
import {
  createMarketplaceClient,
  type MarketplaceClient,
  RUN_MAX_RETRY_AFTER_MS,
} from '../marketplace/marketplace-client';
import { describeIssues, filled, optionalWholeNumber, wholeNumber } from '../shared/validation';

export const TOKEN_CACHE_SECONDS = 300;

const environment = z
  .object({
    MARKETPLACE_BASE_URL: z.url('must be the marketplace supplier host URL'),
    MARKETPLACE_API_VERSION: z._default(z.enum(['v1', 'v2']), 'v1'),
    MARKETPLACE_ACCESS_TOKEN: z.optional(filled()),
    MARKETPLACE_TOKEN_SECRET_ID: z.optional(filled()),
    MARKETPLACE_TOKEN_PARAMETER: z.optional(filled()),
    MARKETPLACE_TIMEOUT_MS: wholeNumber(100, 120_000, 10_000),
    MARKETPLACE_BODY_TIMEOUT_MS: wholeNumber(1_000, 600_000, 120_000),
    MARKETPLACE_RETRIES: wholeNumber(0, 10, 4),
    MARKETPLACE_CONCURRENCY: wholeNumber(1, 64, 4),
    /** Calls started per second at most by this function's client (unset: no limit but the concurrency). */
    MARKETPLACE_CALLS_PER_SECOND: optionalWholeNumber(1, 1_000),
    /** The largest answer read, in MB (default: an eighth of the function's memory, at least 64). */
    MARKETPLACE_MAX_ANSWER_MB: optionalWholeNumber(1, 4_096),
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: optionalWholeNumber(128, 10_240),
    AWS_LAMBDA_FUNCTION_NAME: z.optional(z.string()),
  })
  .check(
    z.superRefine((env, ctx) => {
      const sources = {
        MARKETPLACE_TOKEN_SECRET_ID: env.MARKETPLACE_TOKEN_SECRET_ID,
        MARKETPLACE_TOKEN_PARAMETER: env.MARKETPLACE_TOKEN_PARAMETER,
        MARKETPLACE_ACCESS_TOKEN: env.MARKETPLACE_ACCESS_TOKEN,
      };
      const set = Object.entries(sources)
        .filter(([, value]) => Boolean(value))
        .map(([name]) => name);
      if (set.length !== 1) {
        // Named as they stand (the local stack fills in MARKETPLACE_ACCESS_TOKEN unless another source is given in
        // its environment): never one left out, which read as the one to blame.
        const [first, ...others] = set;
        ctx.addIssue({
          code: 'custom',
          path: [first ?? 'MARKETPLACE_TOKEN_SECRET_ID'],
          message: first
            ? `and ${others.join(' and ')} are both set: set exactly one of ${Object.keys(sources).join(', ')}`
            : 'is not set, nor MARKETPLACE_TOKEN_PARAMETER or MARKETPLACE_ACCESS_TOKEN: set exactly one of them',
        });
      }
      if (env.MARKETPLACE_ACCESS_TOKEN && env.AWS_LAMBDA_FUNCTION_NAME) {
        ctx.addIssue({
          code: 'custom',
          path: ['MARKETPLACE_ACCESS_TOKEN'],
          message: 'must not be set in Lambda; use a secret',
        });
      }
    }),
  );

/** Reads the marketplace settings and builds the client. Throws naming the bad variables, never their values. */
export function marketplaceFromEnvironment(
  env: NodeJS.ProcessEnv = process.env,
  run: { readonly stopAt?: () => number | undefined } = {},
): MarketplaceClient {
  const parsed = environment.safeParse(env);
  if (!parsed.success) {
    throw new Error(`invalid marketplace configuration: ${describeIssues(parsed.error)}`);
  }
  const config = parsed.data;
  return createMarketplaceClient({
    baseUrl: config.MARKETPLACE_BASE_URL,
    apiVersion: config.MARKETPLACE_API_VERSION,
    timeoutMs: config.MARKETPLACE_TIMEOUT_MS,
    bodyTimeoutMs: config.MARKETPLACE_BODY_TIMEOUT_MS,
    retries: config.MARKETPLACE_RETRIES,
    concurrency: config.MARKETPLACE_CONCURRENCY,
    ...(config.MARKETPLACE_CALLS_PER_SECOND ? { callsPerSecond: config.MARKETPLACE_CALLS_PER_SECOND } : {}),
    // An answer larger than its function can parse fails its call by name instead of ending the run (and every
    // retry of it) at the same survey: JSON parsed takes several times its size.
    maxBodyBytes:
      (config.MARKETPLACE_MAX_ANSWER_MB ?? Math.max(64, (config.AWS_LAMBDA_FUNCTION_MEMORY_SIZE ?? 0) / 8)) *
      1_048_576,
    accessToken: tokenSource(config),
    // A scheduled run waits out a Retry-After of a minute or two (never past its deadline) rather than stop.
    ...(run.stopAt ? { stopAt: run.stopAt, maxRetryAfterMs: RUN_MAX_RETRY_AFTER_MS } : {}),
  });
}

function tokenSource(
  config: z.infer<typeof environment>,
): (options?: { readonly fresh?: boolean }) => Promise<string> {
  if (config.MARKETPLACE_ACCESS_TOKEN) {
    const token = config.MARKETPLACE_ACCESS_TOKEN;
    return async () => token;
  }
  // `fresh` (after a 401): past the cache, so a token rotated in its secret is used at once, not minutes later.
  const fetchToken = config.MARKETPLACE_TOKEN_SECRET_ID
    ? (forceFetch: boolean) =>
        getSecret<string>(config.MARKETPLACE_TOKEN_SECRET_ID as string, {
          maxAge: TOKEN_CACHE_SECONDS,
          forceFetch,
        })
    : (forceFetch: boolean) =>
        getParameter(config.MARKETPLACE_TOKEN_PARAMETER as string, {
          decrypt: true,
          maxAge: TOKEN_CACHE_SECONDS,
          forceFetch,
        });
  return async (options) => {
    const token = await fetchToken(options?.fresh === true);
    if (typeof token !== 'string' || token === '')
      throw new Error('the marketplace access token secret is empty');
    return token;
  };
}
