/**
 * The whole local stack for a test file, as `npm start` runs it (configured through its environment, like the
 * deployed functions), on free ports, over a fresh table of the run's engine, optionally behind a fault-injecting
 * proxy. Returns the stack and a store reading the table directly.
 */
import {
  createDocumentClient,
  createLedgerStore,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { startLocalSchedule } from '../../infra/local/scheduler';
import { type LocalStack, startLocalStack } from '../../infra/local/stack';
import { type EngineProxy, startEngineProxy } from './engine-proxy';
import { freshTable, TEST_KEY_RING } from './ledger';

export interface TestStack {
  readonly stack: LocalStack;
  /** The table read directly from the engine, past any proxy. */
  readonly ledger: LedgerStore;
  readonly endpoint: string;
  readonly tableName: string;
  /** The proxy the stack's functions reach the engine through, when asked for. */
  readonly proxy?: EngineProxy;
}

/**
 * Starts the stack with the test key ring and any settings (`STORE_TIMEOUT_MS`, `LOCAL_DRAINER`,
 * `MARKETPLACE_SEED`, landing pages ...) on top of free ports.
 */
export async function startTestStack(
  settings: Record<string, string> = {},
  options: { proxy?: boolean } = {},
): Promise<TestStack> {
  const { endpoint, tableName } = await freshTable();
  const proxy = options.proxy ? await startEngineProxy(endpoint) : undefined;
  Object.assign(process.env, {
    PORT: '0',
    MARKETPLACE_PORT: '0',
    SQS_PORT: '0',
    DYNAMODB_ENDPOINT: proxy?.endpoint ?? endpoint,
    TABLE_NAME: tableName,
    SIGNING_KEYS: TEST_KEY_RING,
    ...settings,
  });
  const stack = await startLocalStack();
  return {
    stack,
    ledger: createLedgerStore(createDocumentClient({ endpoint }), tableName),
    endpoint,
    tableName,
    ...(proxy ? { proxy } : {}),
  };
}

/** One run of the scheduled redirect sync, as the local scheduler runs the deployed entry. */
export async function syncRedirectsOnce(): Promise<{ counts: Record<string, number> }> {
  const schedule = await startLocalSchedule('redirect-sync', 0, () => {});
  try {
    return (await schedule.runNow()) as { counts: Record<string, number> };
  } finally {
    await schedule.stop();
  }
}
