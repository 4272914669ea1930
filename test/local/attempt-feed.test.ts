/**
 * The attempt feed kept from the table's stream, on the whole local stack (LOCAL_ATTEMPT_FEED=on: the engine behind
 * the stream's stand-in, the deployed consumer's entry reading it): real hits through the API, and what the feed
 * gives a reader equals what the table holds (a verdict's history aside), whatever the consumer's writes went through.
 */
import { randomUUID } from 'node:crypto';
import { PutCommand, ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { healthCheck } from '../../functions/health/health-check';
import { DEFAULT_HEALTH_SETTINGS } from '../../functions/health/health-rules';
import { type AttemptFeed, createAttemptFeed } from '../../functions/ledger/attempt-feed';
import { FEED_PARTITION_PREFIX, FEED_START_KEY } from '../../functions/ledger/feed-keys';
import { attemptKey } from '../../functions/ledger/ledger-schema';
import {
  createDocumentClient,
  createHealthStore,
  createLedgerStore,
  createSurveyRegistry,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import type { LocalStack } from '../../infra/local/stack';
import { filledUrl } from '../support/api-events';
import type { EngineProxy } from '../support/engine-proxy';
import { asFeedHolds, TEST_KEY_RING } from '../support/ledger';
import { startTestStack } from '../support/local-stack';

let stack: LocalStack;
let ledger: LedgerStore;
let proxy: EngineProxy;
let feed: AttemptFeed;
let client: ReturnType<typeof createDocumentClient>;
let tableName: string;
const startedAt = new Date(Date.now() - 60_000);

beforeAll(async () => {
  const started = await startTestStack(
    { LOCAL_ATTEMPT_FEED: 'on', LOCAL_FEED_CONSUMER: 'manual', LOCAL_DRAINER: 'manual' },
    { proxy: true },
  );
  ({ stack, ledger, tableName } = started);
  proxy = started.proxy as EngineProxy;
  client = createDocumentClient({ endpoint: started.endpoint });
  feed = createAttemptFeed(client, tableName);
}, 60_000);
afterAll(async () => {
  await stack.stop();
  await proxy.stop();
});
beforeEach(() => proxy.faults(undefined));

const hit = async (
  channel: 'redirect' | 'postback',
  surveyId: string,
  ids: { pid: string; token: string },
  outcome: 'success' | 'fail' | 'overquota' = 'success',
) => {
  const url = filledUrl(TEST_KEY_RING, channel, surveyId, outcome, ids).replace(
    'https://hits.test',
    stack.apiUrl,
  );
  const response = await fetch(url, { redirect: 'manual' });
  expect(response.status).toBeLessThan(400);
};

async function expectFeedEqualsTable(surveys: readonly string[]) {
  const to = new Date(Date.now() + 60_000);
  for (const surveyId of surveys) {
    const fromTable = (await ledger.attemptsOfSurvey(surveyId, startedAt, to)).map(asFeedHolds);
    const fromFeed = await feed.attemptsOfSurvey(surveyId, startedAt, to);
    expect(fromTable.length).toBeGreaterThan(0);
    expect(fromFeed).toEqual(fromTable);
  }
}

const feedItems = async () =>
  (
    await client.send(
      new ScanCommand({
        TableName: tableName,
        FilterExpression: 'begins_with(pk, :feed)',
        ExpressionAttributeValues: { ':feed': FEED_PARTITION_PREFIX },
      }),
    )
  ).Items?.filter((item) => item.kind === 'attempt-feed') ?? [];

const ids = () => ({ pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() });

describe('the attempt feed on the local stack', () => {
  it("gives each survey's attempts as the table holds them: channels, repeats, contradictions", async () => {
    const surveys = ['7101', '7102', '7103'];
    for (const surveyId of surveys) {
      for (let n = 0; n < 4; n++) {
        const attempt = ids();
        await hit('redirect', surveyId, attempt, n === 3 ? 'overquota' : 'success');
        if (n < 3) await hit('postback', surveyId, attempt, n === 2 ? 'fail' : 'success');
        if (n === 0) await hit('postback', surveyId, attempt);
      }
    }
    await stack.drainFeed?.();
    await expectFeedEqualsTable(surveys);
    // The changes of one drain are packed: an item per batch, day and bucket, not one per change.
    const items = await feedItems();
    const records = items.reduce((sum, item) => sum + Number(item.count), 0);
    expect(items.length).toBeLessThan(records);
  });

  it('keeps a verdict written on an attempt, as reconciliation reads it back', async () => {
    const attempt = ids();
    await hit('redirect', '7104', attempt);
    await hit('postback', '7104', attempt);
    await stack.drainFeed?.();
    const before = (await feedItems()).length;
    const stackClient = createDocumentClient({ endpoint: stack.dynamoEndpoint });
    const at = new Date().toISOString();
    await stackClient.send(
      new UpdateCommand({
        TableName: tableName,
        Key: attemptKey('7104', attempt.pid, attempt.token),
        UpdateExpression:
          'SET verdict = :v, verdictDay = :d, verdictAt = :at, verdictDetail = :detail, verdictHistory = :history',
        ExpressionAttributeValues: {
          ':v': 'matched',
          ':d': at.slice(0, 10),
          ':at': at,
          ':detail': { status: 'Completed' },
          ':history': [{ verdict: 'matched', day: at.slice(0, 10), at }],
        },
      }),
    );
    await stack.drainFeed?.();
    expect((await feedItems()).length).toBe(before + 1);
    await expectFeedEqualsTable(['7104']);
    const [read] = await feed.attemptsOfSurvey('7104', startedAt, new Date(Date.now() + 60_000));
    expect(read?.reconciliation).toMatchObject({ verdict: 'matched', detail: { status: 'Completed' } });
  });

  it('loses nothing when the feed cannot be written: the batch is sent again from its earliest change', async () => {
    const surveys = ['7105', '7106'];
    for (const surveyId of surveys)
      for (let n = 0; n < 3; n++) {
        const attempt = ids();
        await hit('redirect', surveyId, attempt);
        await hit('postback', surveyId, attempt);
      }
    // Every write of the consumer's first delivery fails past the client's retries.
    let failures = 0;
    proxy.faults((operation) => (operation === 'PutItem' && ++failures ? 'server-error' : undefined));
    await stack.drainFeed?.();
    expect(failures).toBeGreaterThanOrEqual(3);
    proxy.faults(undefined);
    await stack.drainFeed?.();
    await expectFeedEqualsTable(surveys);
  });

  it('gives the health check the same verdicts as the attempt items, with no attempt read by key', async () => {
    // 7107: redirects alone; 7108: most success redirects lack their success postback; 7109: healthy.
    for (let n = 0; n < 6; n++) await hit('redirect', '7107', ids());
    for (let n = 0; n < 12; n++) {
      const attempt = ids();
      await hit('redirect', '7108', attempt);
      if (n % 4 === 0) await hit('postback', '7108', attempt);
      const healthy = ids();
      await hit('redirect', '7109', healthy);
      await hit('postback', '7109', healthy);
    }
    await stack.drainFeed?.();
    const stackClient = createDocumentClient({ endpoint: stack.dynamoEndpoint });
    const check = (withFeed: boolean) =>
      healthCheck({
        attempts: createLedgerStore(stackClient, tableName),
        registry: createSurveyRegistry(stackClient, tableName),
        health: createHealthStore(stackClient, tableName),
        settings: DEFAULT_HEALTH_SETTINGS,
        concurrency: 2,
        ...(withFeed ? { feed: createAttemptFeed(stackClient, tableName) } : {}),
      });
    // Late enough that every hit is past the grace period, early enough that they are all in the span.
    const at = new Date(Date.now() + 12 * 60_000);
    const surveys = ['7107', '7108', '7109'];
    const batchReads = () => proxy.operations.filter((o) => o === 'BatchGetItem').length;
    let before = batchReads();
    const fromTable = await check(false).evaluate(at, { surveys });
    const tableBatchReads = batchReads() - before;
    // The feed began (its consumer marked it on its first batch) after this window's start: the table is read.
    expect(await createAttemptFeed(stackClient, tableName).startedAt()).toBeDefined();
    before = batchReads();
    const beforeTheFeed = await check(true).evaluate(at, { surveys });
    expect(batchReads() - before).toBe(tableBatchReads + 1);
    expect(beforeTheFeed.surveys).toEqual(fromTable.surveys);
    // A feed running since well before the window: read instead of the attempt items.
    await stackClient.send(
      new PutCommand({
        TableName: tableName,
        Item: { ...FEED_START_KEY, kind: 'attempt-feed-start', at: '2026-01-01T00:00:00.000Z' },
      }),
    );
    // And proven: its consumer has noted a touch of the probe (until then the items are read).
    await createAttemptFeed(stackClient, tableName).touchProbe(new Date().toISOString());
    await stack.drainFeed?.();
    expect((await createAttemptFeed(stackClient, tableName).state()).seenAt).toBeDefined();
    before = batchReads();
    const fromFeed = await check(true).evaluate(at, { surveys });
    const feedBatchReads = batchReads() - before;
    const states = (report: typeof fromTable) =>
      report.surveys.map((r) => [r.surveyId, r.evaluation.state, r.evaluation.reasons.map((x) => x.code)]);
    // Every sender here is one address, whose success claims count three at most: warnings, not failures.
    expect(states(fromTable)).toEqual([
      ['7107', 'warning', ['success_without_postback']],
      ['7108', 'warning', ['success_without_postback']],
      ['7109', 'ok', []],
    ]);
    expect(fromFeed.surveys).toEqual(fromTable.surveys);
    // The table's way reads the surveys' attempts by key; the feed's reads none (its batch reads are the stored
    // health and the registry's).
    expect(feedBatchReads).toBeLessThan(tableBatchReads);
  });
});
