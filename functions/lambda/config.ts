/**
 * The receivers' configuration, read from the environment once per container. A missing or invalid value
 * fails the cold start with a message naming the variable; no request ever sees a half-configured handler.
 */
import { z } from 'zod';
import { type LandingTemplates, templateProblem } from '../core/landing-page';
import { OUTCOMES } from '../core/outcome';

export const LANDING_VARIABLES = {
  success: 'LANDING_URL_SUCCESS',
  fail: 'LANDING_URL_FAIL',
  overquota: 'LANDING_URL_OVERQUOTA',
  quality: 'LANDING_URL_QUALITY',
  termination: 'LANDING_URL_TERMINATION',
} as const;

const landingTemplate = z
  .string()
  .optional()
  .transform((value) => (value === '' ? undefined : value))
  .superRefine((value, ctx) => {
    const problem = value === undefined ? undefined : templateProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: `landing URL template ${problem}` });
  });

const environment = z
  .object({
    TABLE_NAME: z.string().min(1, 'is required'),
    AWS_REGION: z.string().min(1).default('us-east-1'),
    /** A local engine; unset in AWS. */
    DYNAMODB_ENDPOINT: z.url().optional(),
    STORE_TIMEOUT_MS: z.coerce.number().int().min(50).max(30_000).default(1000),
    /** Secrets Manager secret holding the signing key ring (AWS). */
    SIGNING_KEYS_SECRET_ID: z.string().min(1).optional(),
    /** The signing key ring itself (local runs only). */
    SIGNING_KEYS: z.string().min(1).optional(),
    AWS_LAMBDA_FUNCTION_NAME: z.string().optional(),
    ...Object.fromEntries(Object.values(LANDING_VARIABLES).map((name) => [name, landingTemplate])),
  })
  .superRefine((env, ctx) => {
    if (!env.SIGNING_KEYS_SECRET_ID && !env.SIGNING_KEYS) {
      ctx.addIssue({
        code: 'custom',
        path: ['SIGNING_KEYS_SECRET_ID'],
        message: 'or SIGNING_KEYS is required',
      });
    }
    if (env.SIGNING_KEYS && env.AWS_LAMBDA_FUNCTION_NAME) {
      ctx.addIssue({
        code: 'custom',
        path: ['SIGNING_KEYS'],
        message: 'must not be set in Lambda; keep the key ring in Secrets Manager (SIGNING_KEYS_SECRET_ID)',
      });
    }
  });

export type KeyRingLocation = { readonly secretId: string } | { readonly inline: string };

export interface ReceiverConfig {
  readonly tableName: string;
  readonly region: string;
  readonly dynamoEndpoint?: string | undefined;
  readonly storeTimeoutMs: number;
  readonly keyRing: KeyRingLocation;
  readonly landing: LandingTemplates;
}

/** Reads and validates the receivers' environment. Throws an Error naming every bad variable. */
export function readReceiverConfig(env: NodeJS.ProcessEnv = process.env): ReceiverConfig {
  const parsed = environment.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`);
    throw new Error(`invalid configuration: ${problems.join('; ')}`);
  }
  const values = parsed.data as z.infer<typeof environment> & Record<string, string | undefined>;
  const landing: LandingTemplates = {};
  for (const outcome of OUTCOMES) {
    const template = values[LANDING_VARIABLES[outcome]];
    if (template) landing[outcome] = template;
  }
  return {
    tableName: values.TABLE_NAME,
    region: values.AWS_REGION,
    dynamoEndpoint: values.DYNAMODB_ENDPOINT,
    storeTimeoutMs: values.STORE_TIMEOUT_MS,
    keyRing: values.SIGNING_KEYS_SECRET_ID
      ? { secretId: values.SIGNING_KEYS_SECRET_ID }
      : { inline: values.SIGNING_KEYS as string },
    landing,
  };
}
