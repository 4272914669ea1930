/**
 * Scheduled reconciliation: every registered survey over the trailing window of Pacific days, against the
 * marketplace's transaction list. A run that reaches the Lambda's deadline records how far it got and invokes
 * the function again to resume at once; a scheduled invocation that finds a run in progress resumes it too.
 */
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { createLedgerStore, createReconciliationStore, createSurveyRegistry } from './ledger/ledger-store';
import { createReconcileHandler } from './reconciliation/reconcile-handler';
import { reconciler } from './reconciliation/reconciler';
import { openLedger } from './runtime/aws-clients';
import { marketplaceFromEnvironment } from './runtime/marketplace-access';
import { runDeadline } from './runtime/run-deadline';
import { readReconcileConfig } from './runtime/runtime-config';

const config = readReconcileConfig();
const calls = runDeadline();
const ledger = openLedger(config, {
  attempts: createLedgerStore,
  registry: createSurveyRegistry,
  results: createReconciliationStore,
});
let lambda: LambdaClient | undefined;

export const handler = createReconcileHandler({
  engine: reconciler({
    marketplace: marketplaceFromEnvironment(process.env, calls),
    ...ledger,
    concurrency: config.concurrency,
    settleMs: config.settleMs,
    lookbackDays: config.lookbackDays,
    freshDays: config.freshDays,
    settledRecheckMs: config.settledRecheckMs,
    windowListHours: config.windowListHours,
  }),
  windowDays: config.windowDays,
  calls,
  resume: config.continueSelf
    ? async (functionArn, runId) => {
        lambda ??= new LambdaClient({});
        await lambda.send(
          new InvokeCommand({
            FunctionName: functionArn,
            InvocationType: 'Event',
            Payload: JSON.stringify({ resume: runId }),
          }),
        );
      }
    : undefined,
});
