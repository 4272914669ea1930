/**
 * Drains the hit buffer into the ledger, each buffered hit once however often SQS delivers it. While the ledger
 * is down the drainer backs off instead of spending the queue's receives: a refused hit's next delivery waits
 * longer with every receive (60 s doubling to 2 h by default), and once the ledger answered StoreUnavailable a
 * circuit leaves it alone for a while, failing the rest of the batch without a write. One attempt's hits in a batch
 * are recorded one after another, in the order they were made, and a few attempts at once. With the queue's 12
 * receives a hit outlasts about 12 hours of outage before it reaches the dead-letter queue.
 */
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type LedgerStore, StoreUnavailable } from '../ledger/ledger-store';
import {
  type BufferedHit,
  type BufferRedelivery,
  parseBufferedHit,
  redeliveryDelaySeconds,
} from '../runtime/hit-buffer';
import { count, logger } from '../runtime/observability';
import type { DrainConfig } from '../runtime/runtime-config';
import { runBounded } from '../shared/bounded-work';

/** Attempts of a batch drained side by side (each attempt's hits one after another). */
const ATTEMPTS_AT_ONCE = 3;

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

  /** Records one buffered hit; false (the message to be delivered again) when it was not recorded. */
  async function drain(record: SQSRecord, buffered: BufferedHit | Error): Promise<boolean> {
    // The ledger refused a write of this batch or an earlier one: no more writes until the circuit closes.
    if (now() < circuitOpenUntil) return false;
    try {
      if (buffered instanceof Error) throw buffered;
      const applied = await deps.store.recordBufferedHit(buffered.hit, new Date(buffered.at), buffered.id);
      logger.debug(applied ? 'buffered hit recorded' : 'buffered hit was already recorded', {
        id: buffered.id,
      });
      return true;
    } catch (error) {
      if (error instanceof StoreUnavailable)
        circuitOpenUntil = Math.max(circuitOpenUntil, now() + deps.circuitSeconds * 1000);
      count('BufferedHitNotRecorded');
      logger.error('buffered hit not recorded', {
        messageId: record.messageId,
        receives: record.attributes.ApproximateReceiveCount,
        error: error instanceof Error ? { name: error.name, message: error.message } : { name: 'unknown' },
      });
      return false;
    }
  }

  return async (event: SQSEvent): Promise<SQSBatchResponse> => {
    const failed: SQSRecord[] = [];
    // One attempt's hits one after another, in the order they were made, as the ledger would have taken them live:
    // side by side they race to decide which outcome stands. Attempts side by side, a few at once, so that a ledger
    // refusing the first writes opens the circuit before the rest of the batch is tried.
    const byAttempt = new Map<string, { record: SQSRecord; buffered: BufferedHit | Error }[]>();
    for (const [index, record] of event.Records.entries()) {
      let buffered: BufferedHit | Error;
      try {
        buffered = parseBufferedHit(record.body);
      } catch (error) {
        buffered = error instanceof Error ? error : new Error(String(error));
      }
      const key =
        buffered instanceof Error
          ? `unread#${index}`
          : JSON.stringify([buffered.hit.surveyId, buffered.hit.pid, buffered.hit.token]);
      byAttempt.set(key, [...(byAttempt.get(key) ?? []), { record, buffered }]);
    }
    const madeAt = (b: BufferedHit | Error) => (b instanceof Error ? 0 : Date.parse(b.at) || 0);
    await runBounded(
      [...byAttempt.values()].map((hits) => async () => {
        for (const { record, buffered } of hits.sort((a, b) => madeAt(a.buffered) - madeAt(b.buffered)))
          if (!(await drain(record, buffered))) failed.push(record);
      }),
      { concurrency: ATTEMPTS_AT_ONCE },
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
