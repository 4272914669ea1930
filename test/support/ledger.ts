/** A fresh ledger table in the run's engine, per test file. */
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import type { Attempt } from '../../functions/receiving/attempt';
import { ensureLedgerTable } from '../../infra/local/engine';

export async function freshTable(): Promise<{ endpoint: string; tableName: string }> {
  const endpoint = inject('dynamoEndpoint');
  const tableName = `ledger-${randomUUID()}`;
  await ensureLedgerTable(endpoint, tableName);
  return { endpoint, tableName };
}

export const TEST_KEY_RING = JSON.stringify({
  current: 'k2',
  k1: 'first-test-signing-key-0123456789abcdef',
  k2: 'second-test-signing-key-0123456789abcdef',
});

/** An attempt as the attempt feed holds it: its verdict without the history (feedRecordOf keeps only its length). */
export const asFeedHolds = (attempt: Attempt): Attempt =>
  attempt.reconciliation
    ? { ...attempt, reconciliation: { ...attempt.reconciliation, history: [] } }
    : attempt;
