/**
 * The store failing: postbacks answer 5xx so the marketplace retries, and nothing is acknowledged that was
 * not stored; respondents still get their redirect. Faults come from aws-sdk-client-mock (exceptions as
 * the SDK raises them) and from a proxy answering the real wire protocol with throttling, 5xx and silence.
 */
import { randomUUID } from 'node:crypto';
import { ProvisionedThroughputExceededException } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createDocumentClient,
  createLedgerStore,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { type LedgerCircuit, ledgerCircuit } from '../../functions/receiving/ledger-circuit';
import type { BufferedHit } from '../../functions/runtime/hit-buffer';
import { KeyRingUnavailable, keyRingSource } from '../../functions/runtime/key-ring-source';
import { apiEvent, filledUrl, type Handler, invoke, jsonBody } from '../support/api-events';
import { type EngineProxy, startEngineProxy } from '../support/engine-proxy';
import { receivers } from '../support/handlers';
import { freshTable, TEST_KEY_RING } from '../support/ledger';

let postback: Handler;
let redirect: Handler;
let store: LedgerStore;
let proxy: EngineProxy;
let table: string;

beforeAll(async () => {
  const { endpoint, tableName } = await freshTable();
  table = tableName;
  proxy = await startEngineProxy(endpoint);
  ({ postback, redirect } = await receivers({
    endpoint: proxy.endpoint,
    tableName,
    storeTimeoutMs: 200,
    landing: { success: 'https://panel.example.com/thanks?pid={pid}' },
  }));
  store = createLedgerStore(createDocumentClient({ endpoint }), tableName);
});
afterAll(() => proxy.stop());
afterEach(() => proxy.faults(undefined));

let ids: { pid: string; token: string };
beforeEach(() => {
  ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
});
const postbackUrl = () => filledUrl(TEST_KEY_RING, 'postback', '3003', 'success', ids);
const redirectUrl = () => filledUrl(TEST_KEY_RING, 'redirect', '3003', 'success', ids);

describe('SDK-level faults (aws-sdk-client-mock)', () => {
  const dynamo = mockClient(DynamoDBDocumentClient);
  beforeEach(() => dynamo.reset());
  afterAll(() => dynamo.restore());

  it('throttling: the postback answers 503 with a request id and no internals', async () => {
    dynamo
      .on(UpdateCommand)
      .rejects(new ProvisionedThroughputExceededException({ message: 'Rate exceeded', $metadata: {} }));
    const event = apiEvent('GET', postbackUrl());
    const result = await invoke(postback, event);
    expect(result.statusCode).toBe(503);
    const body = jsonBody(result);
    expect(body).toMatchObject({ error: 'unavailable', message: 'the ledger is unavailable; retry later' });
    // API Gateway's id for the request (its access log's), not Lambda's, which the sender cannot look up.
    expect(body.requestId).toBe(event.requestContext.requestId);
    expect(result.body).not.toMatch(/Rate exceeded|Provisioned|stack/i);
    expect(dynamo.commandCalls(UpdateCommand)).toHaveLength(1);
  });

  it('an unexpected store error is a 500 naming only the request id', async () => {
    dynamo.on(UpdateCommand).rejects(new Error('ValidationException: something internal'));
    const event = apiEvent('GET', postbackUrl());
    const result = await invoke(postback, event);
    expect(result.statusCode).toBe(500);
    expect(jsonBody(result)).toEqual({
      error: 'internal',
      message: 'internal error',
      requestId: event.requestContext.requestId,
    });
  });

  it('the respondent is redirected even when the store throws', async () => {
    dynamo
      .on(UpdateCommand)
      .rejects(new ProvisionedThroughputExceededException({ message: 'Rate exceeded', $metadata: {} }));
    const result = await invoke(redirect, apiEvent('GET', redirectUrl()));
    expect(result.statusCode).toBe(302);
    expect(result.headers?.location).toBe(`https://panel.example.com/thanks?pid=${ids.pid}`);
  });
});

describe('the signing key ring unavailable', () => {
  it('a postback answers 503 (retry), not 500 and not a refusal; the respondent goes on to the landing page', async () => {
    const { endpoint, tableName } = await freshTable();
    const unavailable = await receivers({
      endpoint,
      tableName,
      keyRingSource: async () => {
        throw new KeyRingUnavailable('the signing key ring cannot be read (down)');
      },
      landing: { success: 'https://panel.example.com/thanks?pid={pid}' },
    });
    const answered = await invoke(unavailable.postback, apiEvent('GET', postbackUrl()));
    expect(answered.statusCode).toBe(503);
    expect(jsonBody(answered)).toMatchObject({
      error: 'unavailable',
      message: 'the signing keys cannot be read right now; retry later',
    });
    const respondent = await invoke(unavailable.redirect, apiEvent('GET', redirectUrl()));
    expect(respondent.statusCode).toBe(302);
    expect(respondent.headers?.location).toBe(`https://panel.example.com/thanks?pid=${ids.pid}`);
    // Nothing stored, and nothing counted as refused (no forgery was seen).
    const local = createLedgerStore(createDocumentClient({ endpoint }), tableName);
    expect(await local.attemptsOf('3003', ids.pid)).toEqual([]);
    expect(await local.rejectedHits(new Date().toISOString().slice(0, 10))).toEqual([]);
  });
});

/** Receivers through the proxy whose store client waits 2 s a try, that give up on it after `budgetMs`. */
async function withBudget(budgetMs: number, keyRingDelayMs = 0, circuit?: LedgerCircuit) {
  const buffered: BufferedHit[] = [];
  const ring = keyRingSource({ inline: TEST_KEY_RING });
  const slow = await receivers({
    endpoint: proxy.endpoint,
    tableName: table,
    storeTimeoutMs: 2_000,
    storeBudgetMs: budgetMs,
    // A cold container's key ring fetch, as slow as it may be before it is given up.
    keyRingSource: async () => {
      await new Promise((resolve) => setTimeout(resolve, keyRingDelayMs));
      return ring();
    },
    buffer: {
      put: async (hit, at, id) => {
        const entry = { id, at: at.toISOString(), hit };
        buffered.push(entry);
        return entry;
      },
    },
    landing: { success: 'https://panel.example.com/thanks?pid={pid}' },
    ...(circuit ? { circuit } : {}),
  });
  return { slow, buffered };
}

describe('wire-level faults (proxy in front of the engine)', () => {
  it.each([
    ['throttling', 'throttle'],
    ['5xx', 'server-error'],
    ['timeouts', 'hang'],
  ] as const)(
    '%s beyond the SDK retries: 503, nothing stored; the retried postback is stored once',
    async (_, fault) => {
      proxy.faults(() => fault);
      const refused = await invoke(postback, apiEvent('GET', postbackUrl()));
      expect(refused.statusCode).toBe(503);
      expect(await store.attemptsOf('3003', ids.pid)).toEqual([]);

      proxy.faults(undefined);
      const retried = await invoke(postback, apiEvent('GET', postbackUrl()));
      expect(retried.statusCode).toBe(200);
      expect(jsonBody(retried).effect).toBe('recorded');
      expect((await store.attemptsOf('3003', ids.pid))[0]?.postback?.hits).toBe(1);
    },
  );

  it('an answer applied and cut short on the way (200, a body that does not parse): 503 like any store fault, not a 500', async () => {
    const start = proxy.operations.length;
    proxy.faults((operation, index) =>
      index === start && operation === 'UpdateItem' ? 'garbled' : undefined,
    );
    const garbled = await invoke(postback, apiEvent('GET', postbackUrl()));
    expect(garbled.statusCode).toBe(503);
    expect(JSON.stringify(jsonBody(garbled))).not.toMatch(/Deserialization|SyntaxError|\$response/);
    proxy.faults(undefined);
    const retried = await invoke(postback, apiEvent('GET', postbackUrl()));
    expect(retried.statusCode).toBe(200);
    // The first write was applied (its answer unreadable): the outcome as it was, the tally one high, as after
    // any answer lost with the write applied and its sender's retry under another request id.
    expect((await store.attemptsOf('3003', ids.pid))[0]?.postback).toMatchObject({
      outcome: 'success',
      hits: 2,
    });
  });

  it('a fault the SDK retries through is invisible to the sender', async () => {
    const start = proxy.operations.length;
    proxy.faults((_, index) => (index === start ? 'throttle' : undefined));
    const result = await invoke(postback, apiEvent('GET', postbackUrl()));
    expect(result.statusCode).toBe(200);
    expect(proxy.operations.slice(start)).toEqual(['UpdateItem', 'UpdateItem']);
    expect((await store.attemptsOf('3003', ids.pid))[0]?.postback?.hits).toBe(1);
  });

  it('a write applied whose answer was lost is not counted again when the SDK retries it, and says what it did', async () => {
    const start = proxy.operations.length;
    proxy.faults((_, index) => (index === start ? 'lost-answer' : undefined));
    const result = await invoke(postback, apiEvent('GET', postbackUrl()));
    expect(result.statusCode).toBe(200);
    // As the lost answer would have said: the first sighting recorded, not a duplicate.
    expect(jsonBody(result)).toMatchObject({ effect: 'recorded' });
    expect(proxy.operations.slice(start)[0]).toBe('UpdateItem');
    expect(proxy.operations.length - start).toBeGreaterThanOrEqual(2);
    expect((await store.attemptsOf('3003', ids.pid))[0]?.postback?.hits).toBe(1);
    // A contradicting postback whose answer is lost the same way is still a conflict.
    const failing = proxy.operations.length;
    proxy.faults((_, index) => (index === failing ? 'lost-answer' : undefined));
    const contradiction = await invoke(
      postback,
      apiEvent('GET', filledUrl(TEST_KEY_RING, 'postback', '3003', 'fail', ids)),
    );
    expect(jsonBody(contradiction)).toMatchObject({ effect: 'conflict', outcome: 'success' });
  });

  it('respondent and sender wait for the ledger no longer than the budget: the hit goes to the buffer', async () => {
    // The store's own patience, three tries of 2 s, would keep the respondent 6 s.
    const { slow, buffered } = await withBudget(300);
    proxy.faults(() => 'hang');
    const started = Date.now();
    const result = await invoke(slow.redirect, apiEvent('GET', redirectUrl()));
    expect(result.statusCode).toBe(302);
    expect(Date.now() - started).toBeLessThan(1_500);
    // The marketplace's server likewise: answered 200 buffered well inside a 5-second callback timeout.
    const sent = Date.now();
    const answered = await invoke(slow.postback, apiEvent('GET', postbackUrl()));
    expect(answered.statusCode).toBe(200);
    expect(jsonBody(answered)).toMatchObject({ effect: 'buffered' });
    expect(Date.now() - sent).toBeLessThan(1_500);
    expect(buffered.map((b) => [b.hit.channel, b.hit.outcome, b.hit.pid])).toEqual([
      ['redirect', 'success', ids.pid],
      ['postback', 'success', ids.pid],
    ]);
  });

  it('once the ledger failed a hit, the next ones go straight to the buffer for a while; then one tries it again', async () => {
    let clock = 0;
    const { slow, buffered } = await withBudget(
      300,
      0,
      ledgerCircuit(5_000, () => clock),
    );
    proxy.faults(() => 'hang');
    const timed = async (handler: Handler, url: string) => {
      const sent = Date.now();
      const result = await invoke(handler, apiEvent('GET', url));
      return { result, took: Date.now() - sent };
    };
    // The first waits out its budget; the next, of either channel, are buffered without a try of the ledger (the
    // proxy sees no request).
    expect((await timed(slow.postback, postbackUrl())).took).toBeGreaterThanOrEqual(300);
    const tries = proxy.operations.length;
    for (let i = 0; i < 5; i++) {
      ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
      const postbackHit = await timed(slow.postback, postbackUrl());
      expect(jsonBody(postbackHit.result)).toMatchObject({ effect: 'buffered' });
      const redirectHit = await timed(slow.redirect, redirectUrl());
      expect(redirectHit.result.statusCode).toBe(302);
    }
    expect(proxy.operations.length).toBe(tries);
    expect(buffered).toHaveLength(11);
    // The pause over, one hit tries the ledger: back, it is recorded, and so are the hits after it.
    clock += 5_000;
    proxy.faults(undefined);
    ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
    expect(jsonBody((await timed(slow.postback, postbackUrl())).result)).toMatchObject({
      effect: 'recorded',
    });
    ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
    await invoke(slow.redirect, apiEvent('GET', redirectUrl()));
    expect((await store.attemptsOf('3003', ids.pid))[0]?.redirect?.hits).toBe(1);
    expect(buffered).toHaveLength(11);
  });

  it('the ledger paused and the buffer failing too: a redirect tries each once, the buffer not again after the ledger', async () => {
    let puts = 0;
    const both = await receivers({
      endpoint: proxy.endpoint,
      tableName: table,
      storeTimeoutMs: 2_000,
      storeBudgetMs: 300,
      buffer: {
        put: async () => {
          puts++;
          await new Promise((resolve) => setTimeout(resolve, 200));
          throw new Error('injected: the queue does not answer');
        },
      },
      landing: { success: 'https://panel.example.com/thanks?pid={pid}' },
      circuit: ledgerCircuit(60_000),
    });
    proxy.faults(() => 'hang');
    // The first opens the circuit (the ledger, then the buffer); the next find it open.
    await invoke(both.redirect, apiEvent('GET', redirectUrl()));
    puts = 0;
    ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
    const sent = Date.now();
    const result = await invoke(both.redirect, apiEvent('GET', redirectUrl()));
    expect(result.statusCode).toBe(302);
    expect(puts).toBe(1);
    // Buffer (200 ms) and ledger (300 ms) once each, not the buffer a second time.
    expect(Date.now() - sent).toBeLessThan(700);
  });

  it('a slow key ring fetch comes off the ledger budget: a postback is answered inside 5 s with both slow', async () => {
    // The deployed budget (2 s) and a key ring that takes 1.8 s (its fetch is given up at 2 s): 3.8 s before the
    // buffer's tries, without the deadline.
    const { slow, buffered } = await withBudget(2_000, 1_800);
    proxy.faults(() => 'hang');
    const sent = Date.now();
    const answered = await invoke(slow.postback, apiEvent('GET', postbackUrl()));
    const took = Date.now() - sent;
    expect(jsonBody(answered)).toMatchObject({ effect: 'buffered' });
    expect(buffered.map((b) => b.hit.pid)).toEqual([ids.pid]);
    expect(took).toBeGreaterThanOrEqual(1_800);
    expect(took).toBeLessThan(3_000);
  });

  it('a write given up on that lands after all is counted once with its buffered copy', async () => {
    const { slow, buffered } = await withBudget(200);
    // The engine applies the write; its answer never comes back, and the budget runs out first.
    const start = proxy.operations.length;
    proxy.faults((_, index) => (index === start ? 'lost-answer' : undefined));
    const answered = await invoke(slow.postback, apiEvent('GET', postbackUrl()));
    expect(jsonBody(answered)).toMatchObject({ effect: 'buffered' });
    expect((await store.attemptsOf('3003', ids.pid))[0]?.postback?.hits).toBe(1);
    // The drainer's write of the buffered copy carries the same request id: refused, nothing counted again.
    const [entry] = buffered;
    if (!entry) throw new Error('nothing buffered');
    expect(await store.recordBufferedHit(entry.hit, new Date(entry.at), entry.id)).toBe(false);
    expect((await store.attemptsOf('3003', ids.pid))[0]?.postback?.hits).toBe(1);
  });

  it('a write given up on is aborted with its retries: it does not land after the hit went to the buffer', async () => {
    const { slow, buffered } = await withBudget(300);
    // The first try hangs; without the abort the client would try again after its 2 s timeout, and that try lands.
    const start = proxy.operations.length;
    proxy.faults((_, index) => (index === start ? 'hang' : undefined));
    const answered = await invoke(slow.postback, apiEvent('GET', postbackUrl()));
    expect(jsonBody(answered)).toMatchObject({ effect: 'buffered' });
    await new Promise((resolve) => setTimeout(resolve, 2_600));
    expect(proxy.operations.slice(start)).toEqual(['UpdateItem']);
    expect(await store.attemptsOf('3003', ids.pid)).toEqual([]);
    // The buffered copy is the one that counts.
    const [entry] = buffered;
    if (!entry) throw new Error('nothing buffered');
    expect(await store.recordBufferedHit(entry.hit, new Date(entry.at), entry.id)).toBe(true);
    expect((await store.attemptsOf('3003', ids.pid))[0]?.postback?.hits).toBe(1);
  }, 10_000);

  it("a refusal's count given up on at its wait is aborted with its retries: nothing left to run when the container thaws", async () => {
    const { postback: refusing } = await receivers({
      endpoint: proxy.endpoint,
      tableName: table,
      storeTimeoutMs: 2_000,
      refusals: { perSecond: 100, waitMs: 200 },
    });
    const start = proxy.operations.length;
    proxy.faults((_, index) => (index === start ? 'hang' : undefined));
    const forged = postbackUrl().replace(/sig=[^&]+/, `sig=${'A'.repeat(43)}`);
    expect((await invoke(refusing, apiEvent('GET', forged))).statusCode).toBe(403);
    // Without the abort the client would try again after its 2 s timeout, and that try would count it.
    await new Promise((resolve) => setTimeout(resolve, 2_600));
    expect(proxy.operations.slice(start)).toEqual(['UpdateItem']);
  }, 10_000);

  it('the respondent is redirected promptly while the store hangs', async () => {
    proxy.faults(() => 'hang');
    const started = Date.now();
    const result = await invoke(redirect, apiEvent('GET', redirectUrl()));
    expect(result.statusCode).toBe(302);
    // Bounded by the configured store timeout and retries, not by the store.
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
