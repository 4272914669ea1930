/**
 * What every CLI command needs: the store, the key ring, the marketplace and the public base URL. By default the
 * CLI talks to the local stack; with RECEIVER_TARGET=aws it uses the AWS credentials and the variables of the
 * deployed stack.
 */
import { applyLocalDefaults } from '../../infra/local/defaults';
import type { MarketplaceClient } from '../core/marketplace-client';
import type { KeyRing } from '../core/signing';
import {
  createDocumentClient,
  createLedgerStore,
  createSurveyRegistry,
  type LedgerStore,
  type SurveyRegistry,
} from '../core/store';
import { keyRingLocation } from '../lambda/config';
import { type KeyRingStore, keyRingStore } from '../lambda/key-ring-source';
import { marketplaceFromEnvironment } from '../lambda/marketplace-access';

export interface CliContext {
  readonly store: LedgerStore;
  readonly registry: SurveyRegistry;
  readonly keyRing: () => Promise<KeyRing>;
  /** Where the key ring is kept, for rotation. */
  readonly keyRingStore: KeyRingStore;
  readonly publicBaseUrl: string;
  readonly target: 'local' | 'aws';
  /** The marketplace client, built on first use (only some commands need it). */
  marketplace(): MarketplaceClient;
}

export function cliContext(env: NodeJS.ProcessEnv = process.env): CliContext {
  const target = env.RECEIVER_TARGET === 'aws' ? 'aws' : 'local';
  if (target === 'local') applyLocalDefaults(env);
  const missing = ['TABLE_NAME', 'PUBLIC_BASE_URL'].filter((name) => !env[name]);
  if (!env.SIGNING_KEYS_SECRET_ID && !env.SIGNING_KEYS_FILE && !env.SIGNING_KEYS)
    missing.push('SIGNING_KEYS_SECRET_ID');
  if (missing.length > 0) throw new Error(`set ${missing.join(', ')} (RECEIVER_TARGET=${target})`);
  const client = createDocumentClient({ region: env.AWS_REGION, endpoint: env.DYNAMODB_ENDPOINT });
  const keys = keyRingStore(keyRingLocation(env));
  let marketplace: MarketplaceClient | undefined;
  return {
    store: createLedgerStore(client, env.TABLE_NAME as string),
    registry: createSurveyRegistry(client, env.TABLE_NAME as string),
    keyRing: () => keys.load(),
    keyRingStore: keys,
    publicBaseUrl: env.PUBLIC_BASE_URL as string,
    target,
    marketplace: () => {
      marketplace ??= marketplaceFromEnvironment(env);
      return marketplace;
    },
  };
}
