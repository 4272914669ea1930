/**
 * Scheduled survey health check: every active survey judged against its recent traffic, what changed stored,
 * one notice per survey turning failing and one when it recovers (to ALARM_TOPIC_ARN in AWS), and aggregate
 * figures published.
 */

import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { healthCheck } from './health/health-check';
import { createHealthHandler } from './health/health-handler';
import { sightingsCache } from './health/health-window';
import { createAttemptFeed } from './ledger/attempt-feed';
import { createHealthStore, createLedgerStore, createSurveyRegistry } from './ledger/ledger-store';
import { openLedger } from './runtime/aws-clients';
import { healthNotifier } from './runtime/health-notifiers';
import { readHealthConfig } from './runtime/runtime-config';

const config = readHealthConfig();
const ledger = openLedger(config, {
  attempts: createLedgerStore,
  registry: createSurveyRegistry,
  health: createHealthStore,
  feed: (client: DynamoDBDocumentClient, tableName: string) =>
    createAttemptFeed(client, tableName, { stream: config.feedStream }),
});

export const handler = createHealthHandler({
  check: healthCheck({
    ...ledger,
    settings: config.settings,
    concurrency: config.concurrency,
    // Lives as long as the container: a warm one reads only the attempts still waiting for a channel.
    cache: sightingsCache(),
    // With the attempt feed (the stack's attemptFeed setting), a run reads it instead of the attempt items.
    feed: config.readsFeed ? ledger.feed : undefined,
    feedLagMs: config.feedLagMs,
  }),
  store: ledger.health,
  notifier: healthNotifier(config),
});
