/**
 * Drains the hit buffer into the ledger, each buffered hit once however often SQS delivers it. While the ledger
 * is down the drainer backs off instead of spending the queue's receives: a refused hit's next delivery waits
 * longer with every receive (60 s doubling to 2 h by default), and once the ledger answered StoreUnavailable a
 * circuit leaves it alone for a while, failing the rest of the batch without a write. With the queue's 12
 * receives a hit outlasts about 12 hours of outage before it reaches the dead-letter queue.
 */
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type LedgerStore, StoreUnavailable } from '../ledger/ledger-store';
import { type BufferRedelivery, parseBufferedHit, redeliveryDelaySeconds } from '../runtime/hit-buffer';
import { count, logger } from '../runtime/observability';
import type { DrainConfig } from '../runtime/runtime-config';

export interface DrainDependencies {
  readonly store: Pick<LedgerStore, 'recordBufferedHit'>;
  /** Unset: a failed message comes back after the queue's own visibility timeout. */
  readonly redelivery: BufferRedelivery | undefined;
  readonly backoff: DrainConfig['backoff'];
  readonly circuitSeconds: number;
  readonly now?: () => number;
}

/** The drainer's handler, from its dependencies; the circuit's state lives as long as the handler. */
export function createDrainHandler(deps: DrainDependencies) {
  const now = deps.now ?? Date.now;
  let circuitOpenUntil = 0;

  async function retryLater(record: SQSRecord): Promise<void> {
    if (!deps.redelivery) return;
    const receives = Number(record.attributes.ApproximateReceiveCount) || 1;
    try {
      await deps.redelivery.delay(record.receiptHandle, redeliveryDelaySeconds(receives, deps.backoff));
    } catch (error) {
      // The message still comes back after the queue's own timeout; only the backoff is lost.
      logger.warn('buffered hit redelivery not delayed', {
        messageId: record.messageId,
        error: error instanceof Error ? { name: error.name } : { name: 'unknown' },
      });
    }
  }

  return async (event: SQSEvent): Promise<SQSBatchResponse> => {
    const failed: SQSRecord[] = [];
    await Promise.all(
      event.Records.map(async (record) => {
        if (now() < circuitOpenUntil) {
          failed.push(record);
          return;
        }
        try {
          const buffered = parseBufferedHit(record.body);
          const applied = await deps.store.recordBufferedHit(
            buffered.hit,
            new Date(buffered.at),
            buffered.id,
          );
          logger.debug(applied ? 'buffered hit recorded' : 'buffered hit was already recorded', {
            id: buffered.id,
          });
        } catch (error) {
          if (error instanceof StoreUnavailable)
            circuitOpenUntil = Math.max(circuitOpenUntil, now() + deps.circuitSeconds * 1000);
          count('BufferedHitNotRecorded');
          logger.error('buffered hit not recorded', {
            messageId: record.messageId,
            receives: record.attributes.ApproximateReceiveCount,
            error:
              error instanceof Error ? { name: error.name, message: error.message } : { name: 'unknown' },
          });
          failed.push(record);
        }
      }),
    );
    if (failed.length > 0 && now() < circuitOpenUntil)
      logger.warn('ledger unavailable: drainer backing off', {
        deferred: failed.length,
        circuitOpenSeconds: Math.ceil((circuitOpenUntil - now()) / 1000),
      });
    await Promise.all(failed.map(retryLater));
    return { batchItemFailures: failed.map((record) => ({ itemIdentifier: record.messageId })) };
  };
}
