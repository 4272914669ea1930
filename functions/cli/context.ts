/**
 * What every CLI command needs: the store, the key ring and the public base URL. By default the CLI talks to
 * the local stack; with RECEIVER_TARGET=aws it uses the AWS credentials and the variables of the deployed stack.
 */
import { applyLocalDefaults } from '../../infra/local/defaults';
import { createDocumentClient, createLedgerStore, type LedgerStore } from '../core/ledger-store';
import type { KeyRing } from '../core/signing';
import { keyRingSource } from '../lambda/key-ring-source';

export interface CliContext {
  readonly store: LedgerStore;
  readonly keyRing: () => Promise<KeyRing>;
  readonly publicBaseUrl: string;
  readonly target: 'local' | 'aws';
}

export function cliContext(env: NodeJS.ProcessEnv = process.env): CliContext {
  const target = env.RECEIVER_TARGET === 'aws' ? 'aws' : 'local';
  if (target === 'local') applyLocalDefaults(env);
  const missing = ['TABLE_NAME', 'PUBLIC_BASE_URL'].filter((name) => !env[name]);
  if (!env.SIGNING_KEYS_SECRET_ID && !env.SIGNING_KEYS) missing.push('SIGNING_KEYS_SECRET_ID');
  if (missing.length > 0) throw new Error(`set ${missing.join(', ')} (RECEIVER_TARGET=${target})`);
  const client = createDocumentClient({ region: env.AWS_REGION, endpoint: env.DYNAMODB_ENDPOINT });
  return {
    store: createLedgerStore(client, env.TABLE_NAME as string),
    keyRing: keyRingSource(
      env.SIGNING_KEYS_SECRET_ID
        ? { secretId: env.SIGNING_KEYS_SECRET_ID }
        : { inline: env.SIGNING_KEYS as string },
    ),
    publicBaseUrl: env.PUBLIC_BASE_URL as string,
    target,
  };
}
