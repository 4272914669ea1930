/**
 * The drainer's backoff while the ledger is down: delays that double per receive up to a cap, and a circuit that
 * stops it writing to a ledger that just answered StoreUnavailable.
 */
import type { SQSEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { StoreUnavailable } from '../../functions/ledger/ledger-store';
import { createDrainHandler } from '../../functions/receiving/buffer-drainer';
import { BUFFER_MAX_RECEIVES, redeliveryDelaySeconds } from '../../functions/runtime/hit-buffer';

const AWS = { baseSeconds: 60, maxSeconds: 7_200 };

describe('redeliveryDelaySeconds', () => {
  it('doubles from the base with every receive and stops at the cap', () => {
    expect([1, 2, 3, 4, 7, 8, 12].map((r) => redeliveryDelaySeconds(r, AWS))).toEqual([
      60, 120, 240, 480, 3_840, 7_200, 7_200,
    ]);
    expect(redeliveryDelaySeconds(0, AWS)).toBe(60);
    expect(redeliveryDelaySeconds(1_000, AWS)).toBe(7_200);
  });

  it('holds a hit through more than six hours of outage before the dead-letter queue', () => {
    let held = 0;
    for (let receive = 1; receive <= BUFFER_MAX_RECEIVES; receive++)
      held += redeliveryDelaySeconds(receive, AWS);
    expect(held).toBeGreaterThan(6 * 3600);
    expect(held).toBeLessThan(14 * 24 * 3600); // inside the queue's retention
  });
});

const body = (n: number) =>
  JSON.stringify({
    id: `req-${n}`,
    at: '2026-11-22T10:00:00.000Z',
    hit: {
      channel: 'postback',
      surveyId: '1',
      outcome: 'success',
      pid: `p${n}`,
      token: `t${n}`,
      source: 'query',
    },
  });
const event = (from: number, count: number): SQSEvent =>
  ({
    Records: Array.from({ length: count }, (_, i) => ({
      messageId: `m${from + i}`,
      receiptHandle: `r${from + i}`,
      body: body(from + i),
      attributes: { ApproximateReceiveCount: '3' },
    })),
  }) as unknown as SQSEvent;

describe('createDrainHandler', () => {
  it('after StoreUnavailable leaves the ledger alone until the circuit closes, delaying every failed hit', async () => {
    let clock = 1_000_000;
    let writes = 0;
    let ledgerUp = false;
    const delays: [string, number][] = [];
    const drain = createDrainHandler({
      store: {
        recordBufferedHit: async () => {
          writes++;
          if (!ledgerUp) throw new StoreUnavailable('the ledger store is unavailable');
          return true;
        },
      },
      redelivery: { delay: async (receipt, seconds) => void delays.push([receipt, seconds]) },
      backoff: AWS,
      circuitSeconds: 30,
      now: () => clock,
    });

    const first = await drain(event(0, 1));
    expect(first.batchItemFailures).toEqual([{ itemIdentifier: 'm0' }]);
    expect(delays).toEqual([['r0', 240]]); // third receive: 60 x 2 x 2

    const second = await drain(event(1, 5));
    expect(writes).toBe(1); // the circuit is open: no write tried
    expect(second.batchItemFailures).toHaveLength(5);
    expect(delays).toHaveLength(6);

    clock += 31_000;
    ledgerUp = true;
    const third = await drain(event(6, 3));
    expect(third.batchItemFailures).toEqual([]);
    expect(writes).toBe(4);
  });

  it('a ledger that refuses the first writes of a batch is not asked for the rest of it', async () => {
    let writes = 0;
    const drain = createDrainHandler({
      store: {
        recordBufferedHit: async () => {
          writes++;
          await new Promise((resolve) => setTimeout(resolve, 5));
          throw new StoreUnavailable('the ledger store is unavailable');
        },
      },
      redelivery: undefined,
      backoff: AWS,
      circuitSeconds: 30,
    });
    expect((await drain(event(0, 10))).batchItemFailures).toHaveLength(10);
    // The first attempts tried side by side (a few at once); none after the first refusal.
    expect(writes).toBeGreaterThan(0);
    expect(writes).toBeLessThanOrEqual(3);
  });

  it('a malformed message fails alone and does not open the circuit', async () => {
    let writes = 0;
    const drain = createDrainHandler({
      store: { recordBufferedHit: async () => ++writes > 0 },
      redelivery: undefined,
      backoff: AWS,
      circuitSeconds: 30,
    });
    const batch = event(0, 2);
    (batch.Records[0] as { body: string }).body = '{"id":"x"}';
    expect((await drain(batch)).batchItemFailures).toEqual([{ itemIdentifier: 'm0' }]);
    expect((await drain(event(5, 2))).batchItemFailures).toEqual([]);
    expect(writes).toBe(3);
  });
});
