/**
 * Drains the hit buffer into the ledger. The Lambda entry: wires the drainer (receiving/buffer-drainer.ts) to the
 * ledger and the queue the configuration names, once per container.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { createLedgerStore } from './ledger/ledger-store';
import { createDrainHandler } from './receiving/buffer-drainer';
import { feedCoveredStore, openLedger } from './runtime/aws-clients';
import { sqsRedelivery } from './runtime/hit-buffer';
import { logger } from './runtime/observability';
import { readDrainConfig } from './runtime/runtime-config';

const config = readDrainConfig();

export const handler = middy<SQSEvent, SQSBatchResponse>()
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .handler(
    createDrainHandler({
      store: openLedger(config, {
        store: config.attemptFeed ? feedCoveredStore(config.feedStream) : createLedgerStore,
      }).store,
      redelivery: config.queueUrl
        ? sqsRedelivery(config.queueUrl, { endpoint: config.sqsEndpoint, region: config.region })
        : undefined,
      backoff: config.backoff,
      circuitSeconds: config.circuitSeconds,
    }),
  );
