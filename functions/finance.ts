/**
 * The finance API's Lambda: the handler of functions/finance/finance-api.ts wired once per container to the
 * ledger and the configured authentication.
 */
import { createFinanceHandler } from './finance/finance-api';
import { finance } from './finance/finance-queries';
import { createAttemptFeed } from './ledger/attempt-feed';
import { feedAwareLookups } from './ledger/attempt-lookup';
import {
  createHealthStore,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
} from './ledger/ledger-store';
import { PACIFIC_TIME_ZONE } from './marketplace/pacific-time';
import { openLedger } from './runtime/aws-clients';
import { readFinanceConfig } from './runtime/runtime-config';

const config = readFinanceConfig();

const ledger = openLedger(config, {
  attempts: createLedgerStore,
  feed: createAttemptFeed,
  results: createReconciliationStore,
  registry: createSurveyRegistry,
  health: createHealthStore,
});

export const handler = createFinanceHandler({
  queries: finance({
    // A table whose receivers leave attempts the attempt feed covers out of the day index is looked up in both.
    attempts: { ...ledger.attempts, ...feedAwareLookups(ledger.attempts, ledger.feed) },
    results: ledger.results,
    health: { registry: ledger.registry, store: ledger.health },
  }),
  auth: config.auth,
  // Finance's days are the marketplace's: Pacific calendar days, as the transactions it pays by.
  timeZone: PACIFIC_TIME_ZONE,
});
