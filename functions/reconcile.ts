/**
 * Scheduled reconciliation: every registered survey over the trailing window of Pacific days, against the
 * marketplace's transaction list. A run that reaches the Lambda's deadline records how far it got and invokes
 * the function again to resume at once; a scheduled invocation that finds a run in progress resumes it too.
 */

import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
} from './ledger/ledger-store';
import { type RunReport, reconciler, totals } from './reconciliation/reconciler';
import { VERDICT_KINDS } from './reconciliation/verdict-kinds';
import { marketplaceFromEnvironment } from './runtime/marketplace-access';
import { count, logger, publish } from './runtime/observability';
import { readReconcileConfig } from './runtime/runtime-config';

/** Stop taking up surveys this long before the deadline, to finish the ones in hand and save the cursor. */
const DEADLINE_MARGIN_MS = 60_000;

const config = readReconcileConfig();
const client = createDocumentClient({
  region: config.region,
  endpoint: config.dynamoEndpoint,
  requestTimeoutMs: config.storeTimeoutMs,
});
const engine = reconciler({
  marketplace: marketplaceFromEnvironment(),
  attempts: createLedgerStore(client, config.tableName),
  registry: createSurveyRegistry(client, config.tableName),
  results: createReconciliationStore(client, config.tableName),
  concurrency: config.concurrency,
  settleMs: config.settleMs,
  lookbackDays: config.lookbackDays,
});
let lambda: LambdaClient | undefined;

export type ReconcileSummary = ReturnType<typeof summarize> | { busy: true };

export function summarize(report: RunReport) {
  const sum = totals(report.outcomes);
  return {
    runId: report.runId,
    days: report.days,
    complete: report.complete,
    ...sum,
    failures: report.outcomes
      .filter((o) => o.status === 'failed')
      .map((o) => ({ surveyId: o.surveyId, error: o.error ?? '' })),
  };
}

export const handler = middy<unknown, ReconcileSummary>()
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .handler(async (_event: unknown, context: Context) => {
    const deadline = new Date(Date.now() + context.getRemainingTimeInMillis() - DEADLINE_MARGIN_MS);
    const report = await engine.scheduled(config.windowDays, { deadline });
    if (!report) {
      logger.info('another invocation is working on the reconciliation run');
      return { busy: true };
    }
    const summary = summarize(report);
    publish('ReconciledSurveys', summary.reconciled, {});
    publish('ReconcileFailedSurveys', summary.failed, {});
    publish('ReconciledTransactions', summary.transactions, {});
    publish('VerdictChanges', summary.changed + summary.new, {});
    for (const kind of VERDICT_KINDS) publish('Verdicts', summary.verdicts[kind] ?? 0, { verdict: kind });
    if (summary.failed > 0) {
      count('ReconcileFailures');
      logger.warn('reconciliation run finished with failed surveys', { ...summary });
    } else {
      logger.info('reconciliation run finished', { ...summary });
    }
    if (!report.complete && config.continueSelf) {
      lambda ??= new LambdaClient({});
      await lambda.send(
        new InvokeCommand({
          FunctionName: context.invokedFunctionArn,
          InvocationType: 'Event',
          Payload: JSON.stringify({ resume: report.runId }),
        }),
      );
    }
    return summary;
  });
