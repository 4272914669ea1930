/**
 * Scheduled reconciliation: every registered survey over the trailing window of Pacific days, against the
 * marketplace's transaction list. A run that reaches the Lambda's deadline records how far it got and invokes
 * the function again to resume at once; a scheduled invocation that finds a run in progress resumes it too. With
 * the attempt feed on, the attempts are read from it (reconciliation/feed-attempts.ts).
 */
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { createAttemptFeed } from './ledger/attempt-feed';
import { createLedgerStore, createReconciliationStore, createSurveyRegistry } from './ledger/ledger-store';
import { feedAttempts } from './reconciliation/feed-attempts';
import { createReconcileHandler } from './reconciliation/reconcile-handler';
import { reconciler } from './reconciliation/reconciler';
import { openLedger } from './runtime/aws-clients';
import { marketplaceFromEnvironment } from './runtime/marketplace-access';
import { count, logger } from './runtime/observability';
import { runDeadline } from './runtime/run-deadline';
import { readReconcileConfig } from './runtime/runtime-config';

const config = readReconcileConfig();
const calls = runDeadline();
const ledger = openLedger(config, {
  attempts: createLedgerStore,
  registry: createSurveyRegistry,
  results: createReconciliationStore,
  feed: (client: DynamoDBDocumentClient, tableName: string) =>
    createAttemptFeed(client, tableName, { stream: config.feedStream }),
});
// With the attempt feed (the stack's attemptFeed setting), a survey's attempts are read from it, bucket by bucket.
const fromFeed = config.readsFeed
  ? feedAttempts({
      feed: ledger.feed,
      items: ledger.attempts,
      feedLagMs: config.feedLagMs,
      onBehind: (touchedAt) => {
        count('AttemptFeedBehind');
        logger.warn(
          "the attempt feed's consumer has not seen its probe: attempts in the feed alone are not read",
          {
            probeTouchedAt: touchedAt,
          },
        );
      },
    })
  : undefined;
let lambda: LambdaClient | undefined;

export const handler = createReconcileHandler({
  engine: reconciler({
    marketplace: marketplaceFromEnvironment(process.env, calls),
    attempts: ledger.attempts,
    registry: ledger.registry,
    results: ledger.results,
    ...(fromFeed
      ? {
          attempts: { ...ledger.attempts, attemptsOfSurvey: fromFeed.attemptsOfSurvey },
          attemptsLagMs: fromFeed.lagMs,
          attemptsAsOf: fromFeed.asOf,
          readOrder: fromFeed.inReadOrder,
        }
      : {}),
    concurrency: config.concurrency,
    settleMs: config.settleMs,
    lookbackDays: config.lookbackDays,
    freshDays: config.freshDays,
    settledRecheckMs: config.settledRecheckMs,
    windowListHours: config.windowListHours,
    impliedMatches: config.impliedMatches,
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
