/**
 * The ledger table in DynamoDB: the only code that speaks to it. Attempts and refused hits, the survey registry
 * and checkpoints, reconciliation results and survey health each have a module here; they share one client and
 * its plumbing.
 */
export * from './attempt-store';
export * from './day-index-backfill';
export * from './document-client';
export * from './health-store';
export * from './reconciliation-store';
export * from './survey-registry';
