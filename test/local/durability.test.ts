/**
 * Never lose an acknowledged hit: the whole local stack with the store failing (throttling, 5xx, silence) from
 * a proxy in front of the engine. Every postback answered 2xx is in the ledger once the drainer has run, exactly
 * once however often it was delivered; every respondent got their redirect; with the buffer down too, postbacks
 * answer 503 so the marketplace retries.
 */
import { randomUUID } from 'node:crypto';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDocumentClient,
  createLedgerStore,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { createDrainHandler } from '../../functions/receiving/buffer-drainer';
import type { LocalStack } from '../../infra/local/stack';
import { filledUrl } from '../support/api-events';
import type { EngineProxy, Fault } from '../support/engine-proxy';
import { TEST_KEY_RING } from '../support/ledger';
import { startTestStack } from '../support/local-stack';

let stack: LocalStack;
let proxy: EngineProxy;
let ledger: LedgerStore;

beforeAll(async () => {
  const started = await startTestStack(
    {
      STORE_TIMEOUT_MS: '150',
      LOCAL_DRAINER: 'manual',
      LANDING_URL_SUCCESS: 'https://panel.example.com/thanks?pid={pid}',
    },
    { proxy: true },
  );
  ({ stack, ledger } = started);
  proxy = started.proxy as EngineProxy;
}, 60_000);
afterAll(async () => {
  await stack.stop();
  await proxy.stop();
});

const url = (
  channel: 'postback' | 'redirect',
  ids: { pid: string; token: string },
  outcome: 'success' | 'fail' = 'success',
) => filledUrl(TEST_KEY_RING, channel, '6006', outcome, ids).replace('https://hits.test', stack.apiUrl);

/**
 * Receives the buffer's next message without deleting it (visible again at once) and returns a function that
 * hands it to the drainer, as SQS redelivering it would; it resolves with the batch's failures.
 */
async function takeBufferedMessage(): Promise<() => Promise<unknown[]>> {
  const drain = createDrainHandler({
    store: createLedgerStore(createDocumentClient({ endpoint: stack.dynamoEndpoint }), stack.tableName),
    redelivery: undefined,
    backoff: { baseSeconds: 1, maxSeconds: 2 },
    circuitSeconds: 0,
  });
  const response = await fetch(stack.buffer.endpoint, {
    method: 'POST',
    headers: { 'x-amz-target': 'AmazonSQS.ReceiveMessage', 'content-type': 'application/x-amz-json-1.0' },
    body: JSON.stringify({ QueueUrl: stack.buffer.queueUrl, MaxNumberOfMessages: 1, VisibilityTimeout: 0 }),
  });
  const [message] = ((await response.json()) as { Messages: { MessageId: string; Body: string }[] }).Messages;
  const event = {
    Records: [
      { messageId: message?.MessageId, body: message?.Body, attributes: { ApproximateReceiveCount: '1' } },
    ],
  };
  return async () => (await drain(event as SQSEvent)).batchItemFailures;
}

describe('with the store failing', () => {
  it.each(['throttle', 'server-error', 'hang'] as Fault[])(
    '(%s) every acknowledged hit reaches the ledger once the drainer runs, exactly once',
    async (fault) => {
      proxy.faults(() => fault);
      const sent = Array.from({ length: 12 }, () => ({
        pid: `p-${randomUUID().slice(0, 8)}`,
        token: randomUUID(),
      }));
      const answers = await Promise.all(
        sent.flatMap((ids) => [
          fetch(url('postback', ids)).then(async (r) => ({
            kind: 'postback',
            status: r.status,
            body: (await r.json()) as { effect?: string },
          })),
          // The same postback again: a retry by the marketplace while the ledger is down.
          fetch(url('postback', ids)).then(async (r) => ({
            kind: 'postback',
            status: r.status,
            body: (await r.json()) as { effect?: string },
          })),
          fetch(url('redirect', ids), { redirect: 'manual' }).then(async (r) => ({
            kind: 'redirect',
            status: r.status,
            location: r.headers.get('location'),
          })),
        ]),
      );
      for (const answer of answers) {
        if (answer.kind === 'postback') {
          expect(answer.status).toBe(200);
          expect((answer as { body: { effect?: string } }).body.effect).toBe('buffered');
        } else {
          expect(answer.status).toBe(302);
          expect((answer as { location: string | null }).location).toMatch(
            /^https:\/\/panel\.example\.com\/thanks\?pid=p-/,
          );
        }
      }
      expect(stack.buffer.depth().waiting).toBe(36);

      proxy.faults(undefined);
      await stack.drainBuffer();
      expect(stack.buffer.depth()).toEqual({ waiting: 0, deadLetters: 0 });
      for (const ids of sent) {
        const [attempt] = await ledger.attemptsOf('6006', ids.pid);
        // Two buffered postbacks and one buffered redirect: each counted once, as they were sent.
        expect(attempt?.postback).toMatchObject({ outcome: 'success', hits: 2 });
        expect(attempt?.redirect).toMatchObject({ outcome: 'success', hits: 1 });
      }
    },
    60_000,
  );

  it('a buffered hit delivered twice by the queue is recorded once', async () => {
    const ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
    proxy.faults(() => 'throttle');
    expect((await fetch(url('postback', ids))).status).toBe(200);
    proxy.faults(undefined);
    // Read the message without deleting it, deliver it twice, then let the poller deliver it a third time.
    const deliver = await takeBufferedMessage();
    expect(await deliver()).toEqual([]);
    expect(await deliver()).toEqual([]);
    await stack.drainBuffer();
    expect((await ledger.attemptsOf('6006', ids.pid))[0]?.postback?.hits).toBe(1);
  });

  it('a buffered redirect A, a live redirect B, then A replayed: counted twice, not three times', async () => {
    const ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
    proxy.faults(() => 'throttle');
    expect((await fetch(url('redirect', ids), { redirect: 'manual' })).status).toBe(302);
    proxy.faults(undefined);
    const deliver = await takeBufferedMessage();
    expect(await deliver()).toEqual([]);
    // B: the respondent reloads the redirect while the store is up.
    expect((await fetch(url('redirect', ids), { redirect: 'manual' })).status).toBe(302);
    // A again: the queue delivers it once more (and the poller may too).
    expect(await deliver()).toEqual([]);
    await stack.drainBuffer();
    expect((await ledger.attemptsOf('6006', ids.pid))[0]?.redirect?.hits).toBe(2);
  });

  it('an outage ten times the visibility timeout: the drainer backs off, nothing is dead-lettered, each hit once', async () => {
    // Locally the queue's visibility is 1 s and the backoff 1 s doubling to 2 s over 12 receives (60 s doubling
    // to 2 h in AWS): before the backoff, five receives a second apart parked these hits after about 5 s.
    const sent = Array.from({ length: 10 }, () => ({
      pid: `p-${randomUUID().slice(0, 8)}`,
      token: randomUUID(),
    }));
    proxy.faults(() => 'server-error');
    for (const ids of sent) {
      expect((await fetch(url('postback', ids))).status).toBe(200);
      expect((await fetch(url('redirect', ids), { redirect: 'manual' })).status).toBe(302);
    }
    const outageEnds = Date.now() + 10_000;
    while (Date.now() < outageEnds) {
      await stack.drainBuffer(); // what the poller does, as often as it would
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(stack.buffer.depth()).toEqual({ waiting: 20, deadLetters: 0 });
    proxy.faults(undefined);
    for (let i = 0; i < 40 && stack.buffer.depth().waiting > 0; i++) {
      await stack.drainBuffer();
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(stack.buffer.depth()).toEqual({ waiting: 0, deadLetters: 0 });
    for (const ids of sent) {
      const [attempt] = await ledger.attemptsOf('6006', ids.pid);
      expect(attempt?.postback).toMatchObject({ outcome: 'success', hits: 1 });
      expect(attempt?.redirect).toMatchObject({ outcome: 'success', hits: 1 });
    }
  }, 60_000);

  it('a buffered hit the store still refuses past every receive is dead-lettered, never dropped', async () => {
    const ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
    proxy.faults(() => 'server-error');
    expect((await fetch(url('postback', ids))).status).toBe(200);
    // 12 receives with the local backoff (1 s doubling to 2 s) take about 23 s; a busy machine may need longer.
    const giveUp = Date.now() + 70_000;
    while (stack.buffer.depth().deadLetters === 0 && Date.now() < giveUp) {
      await stack.drainBuffer();
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    proxy.faults(undefined);
    expect(stack.buffer.depth()).toEqual({ waiting: 0, deadLetters: 1 });
    expect(JSON.parse(stack.buffer.deadLetters()[0] as string).hit).toMatchObject({
      pid: ids.pid,
      token: ids.token,
    });
  }, 90_000);

  it('with the buffer down as well, a postback is not acknowledged: 503, so the marketplace retries', async () => {
    const saved = process.env.HIT_BUFFER_QUEUE_URL;
    proxy.faults(() => 'throttle');
    await stack.buffer.stop();
    try {
      const response = await fetch(url('postback', { pid: 'p-nobuffer', token: randomUUID() }));
      expect(response.status).toBe(503);
      expect(await response.json()).toMatchObject({ error: 'unavailable' });
      // The respondent still gets their redirect.
      const redirect = await fetch(url('redirect', { pid: 'p-nobuffer', token: randomUUID() }), {
        redirect: 'manual',
      });
      expect(redirect.status).toBe(302);
    } finally {
      proxy.faults(undefined);
      process.env.HIT_BUFFER_QUEUE_URL = saved;
    }
  });
});
