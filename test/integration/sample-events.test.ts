/**
 * The sample events in events/ stay true: each one, invoked as Lambda would, does what its name says.
 */
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { createStreamConsumer } from '../../functions/feed/stream-consumer';
import { createFinanceHandler } from '../../functions/finance/finance-api';
import { finance } from '../../functions/finance/finance-queries';
import { type AttemptFeed, createAttemptFeed } from '../../functions/ledger/attempt-feed';
import {
  createDocumentClient,
  createHealthStore,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { DEV_KEY_RING, LOCAL_DEFAULTS } from '../../functions/runtime/local-stack-defaults';
import { type Handler, invoke, jsonBody } from '../support/api-events';
import { receivers } from '../support/handlers';
import { freshTable } from '../support/ledger';

let handlers: Record<'redirect' | 'postback', Handler>;
let store: LedgerStore;
let feed: AttemptFeed;
const event = (name: string) => JSON.parse(readFileSync(`events/apigw-v2/${name}`, 'utf8'));

beforeAll(async () => {
  const { endpoint, tableName } = await freshTable();
  handlers = await receivers({ endpoint, tableName, keyRing: DEV_KEY_RING });
  store = createLedgerStore(createDocumentClient({ endpoint }), tableName);
  feed = createAttemptFeed(createDocumentClient({ endpoint }), tableName);
});

describe('sample events', () => {
  it('postback-get.json records a success postback', async () => {
    const result = await invoke(handlers.postback, event('postback-get.json'));
    expect(jsonBody(result)).toMatchObject({ effect: 'recorded', outcome: 'success' });
    expect((await store.attemptsOf('1001', 'panel-4711'))[0]?.postback?.source).toBe('query');
  });

  it('postback-post-json.json records a fail postback from a JSON body', async () => {
    const result = await invoke(handlers.postback, event('postback-post-json.json'));
    expect(jsonBody(result)).toMatchObject({ effect: 'recorded', outcome: 'fail' });
    expect((await store.attemptsOf('1001', 'panel-4712'))[0]?.postback).toMatchObject({
      outcome: 'fail',
      source: 'json',
    });
  });

  it('postback-post-form.json records a success postback from a form body', async () => {
    const result = await invoke(handlers.postback, event('postback-post-form.json'));
    expect(result.statusCode).toBe(200);
    expect((await store.attemptsOf('1001', 'panel-4713'))[0]?.postback).toMatchObject({
      outcome: 'success',
      source: 'form',
    });
  });

  it("postback-forged.json (another survey's signature) is refused", async () => {
    const result = await invoke(handlers.postback, event('postback-forged.json'));
    expect(result.statusCode).toBe(403);
  });

  it('redirect-success.json records the redirect and answers the respondent', async () => {
    const result = await invoke(handlers.redirect, event('redirect-success.json'));
    expect(result.statusCode).toBe(200);
    expect((await store.attemptsOf('1001', 'panel-4711'))[0]?.redirect?.outcome).toBe('success');
  });

  it('redirect-forged.json answers the respondent and is kept as rejected', async () => {
    const result = await invoke(handlers.redirect, event('redirect-forged.json'));
    expect(result.statusCode).toBe(200);
    const rejected = await store.rejectedHits(new Date().toISOString().slice(0, 10));
    expect(rejected.map((r) => r.reason)).toContain('signature mismatch');
  });

  it("finance-summary.json asks the finance API for a period's figures with the local stack's token", async () => {
    const { endpoint, tableName } = await freshTable();
    const client = createDocumentClient({ endpoint });
    const queries = finance({
      attempts: createLedgerStore(client, tableName),
      results: createReconciliationStore(client, tableName),
      health: {
        registry: createSurveyRegistry(client, tableName),
        store: createHealthStore(client, tableName),
      },
    });
    const api = createFinanceHandler({
      queries,
      auth: { mode: 'bearer', token: LOCAL_DEFAULTS.FINANCE_API_TOKEN },
      timeZone: 'America/Los_Angeles',
    }) as unknown as Handler;
    const result = await invoke(api, event('finance-summary.json'));
    expect(result.statusCode).toBe(200);
    expect(jsonBody(result)).toMatchObject({
      from: '2026-11-20',
      to: '2026-11-21',
      totals: { owed: '0.00' },
    });
  });

  it('dynamodb-stream/attempt-changes.json keeps one attempt answered by both channels, and its verdict', async () => {
    const changes = JSON.parse(readFileSync('events/dynamodb-stream/attempt-changes.json', 'utf8'));
    const result = await createStreamConsumer({
      feed,
      now: () => new Date('2026-11-24T14:07:30.000Z'),
    })(changes);
    expect(result.batchItemFailures).toEqual([]);
    expect(result.consumed).toMatchObject({ changes: 3, recorded: 3, groups: 1 });
    const attempts = await feed.attemptsOfSurvey(
      '1001',
      new Date('2026-11-24T00:00:00.000Z'),
      new Date('2026-11-25T00:00:00.000Z'),
    );
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({
      pid: 'panel-4711',
      complete: 'postback-confirmed',
      redirect: { outcome: 'success', from: 'k3Xb9QmZr2Lw' },
      postback: { outcome: 'success', source: 'query' },
    });
    expect(attempts[0]?.reconciliation).toMatchObject({
      verdict: 'matched',
      day: '2026-11-24',
      detail: { status: 'Completed' },
    });
    expect(await feed.startedAt()).toBe('2026-11-24T14:07:30.000Z');
  });
});
