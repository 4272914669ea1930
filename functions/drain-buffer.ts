/**
 * Drains the hit buffer into the ledger, each buffered hit once however often SQS delivers it. A hit the store
 * still cannot take is reported as a batch item failure and retried; after five receives SQS moves it to the
 * dead-letter queue, where an alarm waits.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { createDocumentClient, createLedgerStore } from './core/store';
import { readDrainConfig } from './lambda/config';
import { parseBufferedHit } from './lambda/hit-buffer';
import { count, logger } from './lambda/observability';

const config = readDrainConfig();
const store = createLedgerStore(
  createDocumentClient({
    region: config.region,
    endpoint: config.dynamoEndpoint,
    requestTimeoutMs: config.storeTimeoutMs,
  }),
  config.tableName,
);

export const handler = middy<SQSEvent, SQSBatchResponse>()
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .handler(async (event) => {
    const batchItemFailures: SQSBatchResponse['batchItemFailures'] = [];
    await Promise.all(
      event.Records.map(async (record) => {
        try {
          const buffered = parseBufferedHit(record.body);
          const applied = await store.recordBufferedHit(buffered.hit, new Date(buffered.at), buffered.id);
          logger.debug(applied ? 'buffered hit recorded' : 'buffered hit was already recorded', {
            id: buffered.id,
          });
        } catch (error) {
          count('BufferedHitNotRecorded');
          logger.error('buffered hit not recorded', {
            messageId: record.messageId,
            receives: record.attributes.ApproximateReceiveCount,
            error:
              error instanceof Error ? { name: error.name, message: error.message } : { name: 'unknown' },
          });
          batchItemFailures.push({ itemIdentifier: record.messageId });
        }
      }),
    );
    return { batchItemFailures };
  });
