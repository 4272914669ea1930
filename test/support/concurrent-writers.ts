/**
 * Concurrent writers of the ledger in one test: a fake clock, one table, stores whose requests pass through a hook
 * first (to pause one actor between its read and its write), and a reconciler over the local marketplace.
 */
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
  type LedgerStore,
  type ReconciliationStore,
  type SurveyRegistry,
} from '../../functions/ledger/ledger-store';
import { createMarketplaceClient } from '../../functions/marketplace/marketplace-client';
import { pacificDayRange } from '../../functions/marketplace/pacific-time';
import type { Hit } from '../../functions/receiving/hit-request';
import { reconciler } from '../../functions/reconciliation/reconciler';
import type { LocalMarketplace } from '../../infra/local/marketplace/server';
import type { SimTransaction } from '../../infra/local/marketplace/state';
import { freshTable } from './ledger';

export const TOKEN = 'concurrent-token';
export const TODAY = '2026-06-10';
export const HOUR = 3_600_000;

export type Hook = (command: string, input: Record<string, unknown>) => Promise<void> | void;

export interface World {
  endpoint: string;
  tableName: string;
  clock: { now: number };
  /** Stores over a client whose calls pass through `hook` first. */
  actor: (hook?: Hook) => {
    attempts: LedgerStore;
    registry: SurveyRegistry;
    results: ReconciliationStore;
    client: ReturnType<typeof createDocumentClient>;
  };
}

export async function world(): Promise<World> {
  const { endpoint, tableName } = await freshTable();
  const clock = { now: pacificDayRange(TODAY).start.getTime() + 13 * HOUR };
  const actor = (hook?: Hook) => {
    const client = createDocumentClient({ endpoint });
    if (hook)
      client.middlewareStack.add(
        (next, context) => async (args) => {
          await hook(String(context.commandName), args.input as Record<string, unknown>);
          return next(args);
        },
        { step: 'initialize', name: 'concurrencyHook' },
      );
    return {
      client,
      attempts: createLedgerStore(client, tableName, () => new Date(clock.now)),
      registry: createSurveyRegistry(client, tableName),
      results: createReconciliationStore(client, tableName),
    };
  };
  return { endpoint, tableName, clock, actor };
}

export const engineOf = (
  marketplace: LocalMarketplace,
  w: World,
  stores: ReturnType<World['actor']>,
  tuning: Partial<Parameters<typeof reconciler>[0]> = {},
) =>
  reconciler({
    marketplace: createMarketplaceClient({ baseUrl: marketplace.url, accessToken: () => TOKEN, retries: 0 }),
    attempts: stores.attempts,
    registry: stores.registry,
    results: stores.results,
    now: () => new Date(w.clock.now),
    settledRecheckMs: 24 * HOUR,
    ...tuning,
  });

export async function survey(
  marketplace: LocalMarketplace,
  registry: SurveyRegistry,
  surveyId: number,
  at: number,
) {
  marketplace.state.addSurvey({ surveyId, cpi: '1.50' });
  await registry.put({
    surveyId: String(surveyId),
    state: 'active',
    verified: true,
    failures: 0,
    expectedCpi: '1.50',
    updatedAt: new Date(at).toISOString(),
  });
}

let sequence = 0;
export function transaction(
  marketplace: LocalMarketplace,
  surveyId: number,
  clickedAt: Date,
  extra: Partial<SimTransaction> = {},
): SimTransaction {
  const n = ++sequence;
  const t: SimTransaction = {
    surveyId,
    token: `tx-${surveyId}-${n}`,
    pid: `p-${surveyId}-${n}`,
    status: 'Completed',
    ip: '198.51.100.1',
    trackId: `track-${n}`,
    termReason: '',
    clickedAt,
    completedAt: new Date(clickedAt.getTime() + 5 * 60_000),
    verifyToken: 'Valid',
    notified: true,
    ...extra,
  };
  marketplace.state.transactions.push(t);
  return t;
}

export const hitOf = (t: SimTransaction, channel: Hit['channel'], outcome: Hit['outcome']): Hit => ({
  channel,
  surveyId: String(t.surveyId),
  outcome,
  pid: t.pid,
  token: t.token,
  source: 'query',
});

/** A gate: `wait()` blocks until `open()`. */
export function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, wait: () => opened };
}

export const isAttemptKey = (input: Record<string, unknown>, token: string) =>
  String((input.Key as { sk?: string } | undefined)?.sk ?? '') === `TOKEN#${token}`;
