import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Settings of the local stack. Every value can be overridden by the environment variable of the same name;
 * these are only what a fresh clone runs with.
 */

export const LOCAL_DEFAULTS = {
  LOCAL_HOST: '127.0.0.1',
  PORT: '3000',
  DYNAMODB_PORT: '8000',
  /** The hit buffer's stand-in for SQS (ElasticMQ's usual port), so the CLI finds its queues. */
  SQS_PORT: '9324',
  TABLE_NAME: 'survey-ledger',
  AWS_REGION: 'us-east-1',
  /** The local marketplace (started unless MARKETPLACE_BASE_URL points at another one). */
  MARKETPLACE_PORT: '4010',
  MARKETPLACE_ACCESS_TOKEN: 'local-marketplace-token',
  MARKETPLACE_SEED: '20261121',
  /** The redirect sync runs this often locally, in ms (every 15 minutes in AWS); 0 runs it once at start. */
  REDIRECT_SYNC_INTERVAL_MS: '10000',
  /** Scheduled reconciliation runs this often locally, in ms (hourly in AWS); 0 turns it off. */
  RECONCILE_INTERVAL_MS: '60000',
  /** Locally a run cut short waits for the next schedule instead of invoking itself. */
  RECONCILE_CONTINUE: 'next-schedule',
  /** Locally, discrepancies are judged once quiet for this long (ten minutes in AWS). */
  RECONCILE_SETTLE_SECONDS: '5',
  /**
   * How far the attempt feed may trail the table locally, where its stand-in delivers every second (seven minutes
   * in AWS): the stack's readers and the CLI's alike, so `health` and `reconcile` judge as the stack does.
   */
  ATTEMPT_FEED_LAG_SECONDS: '5',
  /** The survey health check runs this often locally, in ms (every 5 minutes in AWS); 0 turns it off. */
  HEALTH_INTERVAL_MS: '30000',
  /**
   * Locally the health rules look at minutes, not quarter hours (15, 10 and 30 in AWS), so a survey whose postbacks
   * stop turns failing within about two minutes of simulated traffic.
   */
  HEALTH_WINDOW_MINUTES: '2',
  HEALTH_GRACE_MINUTES: '1',
  HEALTH_STOPPED_MINUTES: '2',
  /** One simulated respondent this often, in ms; 0 sends none. */
  RESPONDENT_INTERVAL_MS: '2000',
  /** The finance API checks this bearer token locally (IAM in AWS). */
  FINANCE_AUTH: 'bearer',
  FINANCE_API_TOKEN: 'local-finance-token-change-me',
  /** The drainer's backoff, scaled down locally (60 s doubling to 2 h, circuit 30 s in AWS). */
  DRAIN_BACKOFF_BASE_SECONDS: '1',
  DRAIN_BACKOFF_MAX_SECONDS: '2',
  DRAIN_CIRCUIT_SECONDS: '1',
  POWERTOOLS_DEV: 'true',
  POWERTOOLS_LOG_LEVEL: 'WARN',
  /** The SDK warns that its 2027 releases need Node 22; Lambda runs 22 already, local shells may not. */
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
} as const;

/** The key ring a fresh clone starts with, so URLs printed by the CLI work against `npm start`. Never used in AWS. */
export const DEV_KEY_RING = JSON.stringify({
  current: 'dev1',
  dev1: 'local-development-signing-key-not-for-production',
});
export const DEV_KEY_RING_FILE = '.local/signing-keys.json';

/**
 * Fills unset variables with the local defaults, derived URLs included. Without any key ring configured, the
 * ring lives in .local/signing-keys.json (created with the development ring), so `redirects rotate` can change
 * it and the running local stack picks the change up. Returns the environment.
 */
export function applyLocalDefaults(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  // The local marketplace's token only where no other source of it is given, as with the key ring: a secret or a
  // parameter named by hand beside the default token was refused as two sources.
  const otherTokenSource = Boolean(env.MARKETPLACE_TOKEN_SECRET_ID || env.MARKETPLACE_TOKEN_PARAMETER);
  for (const [name, value] of Object.entries(LOCAL_DEFAULTS))
    if (!(name === 'MARKETPLACE_ACCESS_TOKEN' && otherTokenSource)) env[name] ??= value;
  const defaultRing = !env.SIGNING_KEYS && !env.SIGNING_KEYS_FILE && !env.SIGNING_KEYS_SECRET_ID;
  if (defaultRing) env.SIGNING_KEYS_FILE = DEV_KEY_RING_FILE;
  const file = env.SIGNING_KEYS_FILE;
  if (file && !existsSync(file)) {
    // A file named by hand is made only in a directory that exists, and said: a path mistyped would otherwise sign
    // with the development key without a word.
    if (!defaultRing && !existsSync(dirname(file)))
      throw new Error(`SIGNING_KEYS_FILE ${file}: its directory does not exist`);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${DEV_KEY_RING}\n`, { mode: 0o600 });
    if (!defaultRing)
      process.stderr.write(
        `SIGNING_KEYS_FILE ${file} did not exist: created with the development key ring\n`,
      );
  }
  // Without an endpoint of their own, the local stack runs the engine and the marketplace itself; the markers
  // remember that choice once the URLs below are filled in.
  if (env.DYNAMODB_ENDPOINT === undefined) {
    env.LOCAL_ENGINE ??= 'embedded';
    env.DYNAMODB_ENDPOINT = `http://${env.LOCAL_HOST}:${env.DYNAMODB_PORT}`;
  }
  if (env.MARKETPLACE_BASE_URL === undefined) {
    env.LOCAL_MARKETPLACE ??= 'local';
    env.MARKETPLACE_BASE_URL = `http://${env.LOCAL_HOST}:${env.MARKETPLACE_PORT}`;
  }
  env.PUBLIC_BASE_URL ??= `http://${env.LOCAL_HOST}:${env.PORT}`;
  env.SQS_ENDPOINT ??= `http://${env.LOCAL_HOST}:${env.SQS_PORT}`;
  return env;
}

/** The URLs of the local hit buffer's queues at the stand-in's endpoint. */
export const localQueueUrls = (sqsEndpoint: string) => ({
  queueUrl: `${sqsEndpoint}/000000000000/hits`,
  deadLetterUrl: `${sqsEndpoint}/000000000000/hits-dlq`,
});
