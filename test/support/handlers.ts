/**
 * The receivers as the tests use them: built by their factories from a fresh table in the run's engine (or any
 * endpoint, such as a fault-injecting proxy in front of it), a key ring and whatever else a test needs, without
 * touching process.env or re-importing a module.
 */

import {
  createDocumentClient,
  createLedgerStore,
  type LedgerStore,
  type LedgerStoreOptions,
} from '../../functions/ledger/ledger-store';
import type { LandingTemplates } from '../../functions/receiving/landing-page';
import type { LedgerCircuit } from '../../functions/receiving/ledger-circuit';
import { createPostbackHandler } from '../../functions/receiving/postback-handler';
import { createRedirectHandler } from '../../functions/receiving/redirect-handler';
import type { RefusalRecorderOptions } from '../../functions/receiving/refusal-recorder';
import type { HitBuffer } from '../../functions/runtime/hit-buffer';
import { type KeyRingSource, keyRingSource } from '../../functions/runtime/key-ring-source';
import { parseAllowList } from '../../functions/runtime/source-allow-list';
import type { Handler } from './api-events';
import { freshTable, TEST_KEY_RING } from './ledger';

const EVERY_REFUSAL: RefusalRecorderOptions = { perSecond: Number.POSITIVE_INFINITY, waitMs: 30_000 };

export interface ReceiverOptions {
  /** Where the handlers' store connects; a fresh table's engine by default. */
  readonly endpoint?: string;
  readonly tableName?: string;
  readonly keyRing?: string;
  /** A key ring source of the test's own (one that fails, hangs ...), instead of `keyRing`. */
  readonly keyRingSource?: KeyRingSource;
  readonly landing?: LandingTemplates;
  readonly buffer?: HitBuffer;
  readonly postbackSources?: string;
  readonly storeTimeoutMs?: number;
  /** The receivers' wait for the ledger before they buffer (REDIRECT_STORE_BUDGET_MS, POSTBACK_STORE_BUDGET_MS). */
  readonly storeBudgetMs?: number;
  /**
   * How refusals are counted: by default here every one, waited for, so tests can read each back (the deployed
   * handlers keep to REFUSALS_RECORDED_PER_SECOND a container and REFUSAL_WAIT_MS; refusal-recorder.test.ts).
   */
  readonly refusals?: RefusalRecorderOptions;
  /**
   * Redirects recorded per sender and minute: by default here no bound, since a test's one address stands for
   * every respondent (the deployed handlers keep to REDIRECTS_PER_SENDER_MINUTE; redirect.test.ts).
   */
  readonly perSenderMinute?: number;
  /** The receivers' shared memory that the ledger just failed (ledger-circuit.ts); default, one each. */
  readonly circuit?: LedgerCircuit;
  /** The store's options (with the attempt feed: which attempts stay out of the day index). */
  readonly storeOptions?: LedgerStoreOptions;
}

export interface Receivers {
  readonly redirect: Handler;
  readonly postback: Handler;
  /** The handlers' own store (through `endpoint`). */
  readonly store: LedgerStore;
  /** The table and the engine itself, for reading back past any proxy. */
  readonly table: { readonly endpoint: string; readonly tableName: string };
}

/** Both receivers over one table: a fresh one unless `tableName` is given. */
export async function receivers(options: ReceiverOptions = {}): Promise<Receivers> {
  const table =
    options.tableName && options.endpoint
      ? { endpoint: options.endpoint, tableName: options.tableName }
      : await freshTable();
  const store = createLedgerStore(
    createDocumentClient({
      endpoint: options.endpoint ?? table.endpoint,
      ...(options.storeTimeoutMs ? { requestTimeoutMs: options.storeTimeoutMs } : {}),
    }),
    table.tableName,
    undefined,
    options.storeOptions,
  );
  const keyRing = options.keyRingSource ?? keyRingSource({ inline: options.keyRing ?? TEST_KEY_RING });
  return {
    redirect: createRedirectHandler({
      store,
      keyRing,
      buffer: options.buffer,
      landing: options.landing ?? {},
      refusals: options.refusals ?? EVERY_REFUSAL,
      storeBudgetMs: options.storeBudgetMs,
      perSenderMinute: options.perSenderMinute ?? 0,
      circuit: options.circuit,
    }) as unknown as Handler,
    postback: createPostbackHandler({
      store,
      keyRing,
      buffer: options.buffer,
      postbackSources: parseAllowList(options.postbackSources),
      refusals: options.refusals ?? EVERY_REFUSAL,
      storeBudgetMs: options.storeBudgetMs,
      circuit: options.circuit,
    }) as unknown as Handler,
    store,
    table,
  };
}
