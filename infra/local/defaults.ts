/**
 * Settings of the local stack. Every value can be overridden by the environment variable of the same name;
 * these are only what a fresh clone runs with.
 */

export const LOCAL_DEFAULTS = {
  LOCAL_HOST: '127.0.0.1',
  PORT: '3000',
  DYNAMODB_PORT: '8000',
  TABLE_NAME: 'survey-ledger',
  AWS_REGION: 'us-east-1',
  /** A fixed development key ring, so URLs printed by the CLI work against `npm start`. Never used in AWS. */
  SIGNING_KEYS: JSON.stringify({ current: 'dev1', dev1: 'local-development-signing-key-not-for-production' }),
  /** The local marketplace (started unless MARKETPLACE_BASE_URL points at another one). */
  MARKETPLACE_PORT: '4010',
  MARKETPLACE_ACCESS_TOKEN: 'local-marketplace-token',
  MARKETPLACE_SEED: '20261121',
  /** One simulated respondent this often, in ms; 0 sends none. */
  RESPONDENT_INTERVAL_MS: '2000',
  POWERTOOLS_DEV: 'true',
  POWERTOOLS_LOG_LEVEL: 'WARN',
  /** The SDK warns that its 2027 releases need Node 22; Lambda runs 22 already, local shells may not. */
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
} as const;

/** Fills unset variables with the local defaults, derived URLs included. Returns the environment. */
export function applyLocalDefaults(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  for (const [name, value] of Object.entries(LOCAL_DEFAULTS)) env[name] ??= value;
  env.DYNAMODB_ENDPOINT ??= `http://${env.LOCAL_HOST}:${env.DYNAMODB_PORT}`;
  env.PUBLIC_BASE_URL ??= `http://${env.LOCAL_HOST}:${env.PORT}`;
  return env;
}
