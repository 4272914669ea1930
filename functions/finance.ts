/**
 * The finance API's Lambda: the handler of functions/finance/finance-api.ts wired once per container to the
 * ledger and the configured authentication.
 */
import { createFinanceHandler } from './finance/finance-api';
import { finance } from './finance/finance-queries';
import { createDocumentClient, createLedgerStore, createReconciliationStore } from './ledger/ledger-store';
import { PACIFIC_TIME_ZONE } from './marketplace/pacific-time';
import { readFinanceConfig } from './runtime/runtime-config';

const config = readFinanceConfig();
const client = createDocumentClient({
  region: config.region,
  endpoint: config.dynamoEndpoint,
  requestTimeoutMs: config.storeTimeoutMs,
});

export const handler = createFinanceHandler({
  queries: finance({
    attempts: createLedgerStore(client, config.tableName),
    results: createReconciliationStore(client, config.tableName),
  }),
  auth: config.auth,
  timeZone: PACIFIC_TIME_ZONE,
});
