/**
 * Keeps the attempt feed from the ledger table's stream. The Lambda entry: wires the stream consumer
 * (feed/stream-consumer.ts) to the ledger the configuration names, once per container.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { createStreamConsumer } from './feed/stream-consumer';
import { createAttemptFeed } from './ledger/attempt-feed';
import { openLedger } from './runtime/aws-clients';
import { logger } from './runtime/observability';
import { readFeedConfig } from './runtime/runtime-config';

const config = readFeedConfig();
const consume = createStreamConsumer({
  feed: openLedger(config, { feed: createAttemptFeed }).feed,
  onFailedGroup: (group, error) =>
    logger.warn('feed group not written; the batch is sent again from its earliest change', {
      ...group,
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    }),
  onFailedProbe: (error) =>
    logger.warn("the feed probe's touch was not noted; the batch is sent again from it", {
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    }),
});

export const handler = middy<DynamoDBStreamEvent, DynamoDBBatchResponse>()
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .handler(async (event) => {
    const { batchItemFailures, consumed } = await consume(event);
    logger.debug('feed batch', { ...consumed });
    return { batchItemFailures };
  });
