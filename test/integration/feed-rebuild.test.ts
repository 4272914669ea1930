/**
 * `ledger rebuild-feed`: days of the attempt feed written from the attempt items (found by a Scan: the day index
 * does not hold those the feed covers), for the days before the feed began. Against the engine: what the feed gives
 * afterwards equals the items, and the feed's start moves back only once every survey's days up to it are in.
 */
import { GetCommand, PutCommand, ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import {
  type AttemptFeed,
  createAttemptFeed,
  feedBucket,
  feedRecordOf,
} from '../../functions/ledger/attempt-feed';
import { FEED_PARTITION_PREFIX } from '../../functions/ledger/feed-keys';
import { createFeedRebuild, type FeedRebuild } from '../../functions/ledger/feed-rebuild';
import { attemptDayKey, attemptKey } from '../../functions/ledger/ledger-schema';
import {
  createDocumentClient,
  createLedgerStore,
  createSurveyRegistry,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import type { Hit } from '../../functions/receiving/hit-request';
import { asFeedHolds, freshTable } from '../support/ledger';

let client: ReturnType<typeof createDocumentClient>;
let tableName: string;
let ledger: LedgerStore;
let feed: AttemptFeed;
let rebuild: FeedRebuild;

const SURVEYS = ['8301', '8302'];
/** The attempts of two surveys over three UTC days, some answered; the third day an unregistered survey's too. */
const DAYS = ['2026-11-20', '2026-11-21', '2026-11-22'];

async function seeded() {
  const table = await freshTable();
  tableName = table.tableName;
  client = createDocumentClient({ endpoint: table.endpoint });
  ledger = createLedgerStore(client, tableName);
  feed = createAttemptFeed(client, tableName);
  rebuild = createFeedRebuild(client, tableName);
  const registry = createSurveyRegistry(client, tableName);
  for (const surveyId of SURVEYS)
    await registry.put({
      surveyId,
      state: 'active',
      verified: true,
      failures: 0,
      updatedAt: '2026-11-01T00:00:00.000Z',
    });
  for (const [d, day] of DAYS.entries())
    for (const surveyId of [...SURVEYS, ...(d === 2 ? ['8399'] : [])])
      for (let n = 0; n < 3; n++) {
        const hit: Hit = {
          channel: 'redirect',
          surveyId,
          outcome: 'success',
          pid: `p${d}${n}`,
          token: `t-${surveyId}-${d}-${n}`,
          source: 'query',
        };
        const at = new Date(`${day}T1${n}:00:00.000Z`);
        await ledger.recordHit(hit, at);
        if (n !== 1) await ledger.recordHit({ ...hit, channel: 'postback' }, new Date(at.getTime() + 60_000));
      }
}

const span = (from: string, to: string) =>
  [new Date(`${from}T00:00:00.000Z`), new Date(Date.parse(`${to}T00:00:00.000Z`) + 86_400_000)] as const;

/** The feed's consumer has run, its first batch's earliest change that morning: its start is marked then. */
const feedStartedOn = (day: string) =>
  feed.markStart(`${day}T09:00:00.000Z`, 'arn:aws:dynamodb:us-east-1:123456789012:table/ledger/stream/1');

const feedItemCount = async () =>
  (
    await client.send(
      new ScanCommand({
        TableName: tableName,
        FilterExpression: 'begins_with(pk, :feed) AND kind = :kind',
        ExpressionAttributeValues: { ':feed': FEED_PARTITION_PREFIX, ':kind': 'attempt-feed' },
      }),
    )
  ).Items?.length ?? 0;

describe('rebuilding the attempt feed from the items', () => {
  it('refuses while the feed has never started (its consumer has not run)', async () => {
    await seeded();
    await expect(rebuild.run({ from: DAYS[0] as string, to: DAYS[2] as string })).rejects.toThrow(
      /attempt feed has not started/,
    );
  });

  it("writes every survey's days as the items hold them (an unregistered one's too), and moves the feed's start back to the first", async () => {
    await seeded();
    await feedStartedOn(DAYS[2] as string);
    // Small Scan pages: each segment's paging, and a day's records written over several items.
    const report = await rebuild.run({ from: DAYS[0] as string, to: DAYS[2] as string, pageSize: 4 });
    expect(report).toMatchObject({
      days: 3,
      surveys: 3,
      attempts: 21,
      startMovedTo: `${DAYS[0]}T00:00:00.000Z`,
    });
    expect(await feed.startedAt()).toBe(`${DAYS[0]}T00:00:00.000Z`);
    const [from, to] = span(DAYS[0] as string, DAYS[2] as string);
    for (const surveyId of [...SURVEYS, '8399']) {
      const fromItems = (await ledger.attemptsOfSurvey(surveyId, from, to)).map(asFeedHolds);
      expect(fromItems).toHaveLength(surveyId === '8399' ? 3 : 9);
      expect(await feed.attemptsOfSurvey(surveyId, from, to)).toEqual(fromItems);
    }
    // Again: the same attempts (readers fold the repeats); the start stays.
    await rebuild.run({ from: DAYS[0] as string, to: DAYS[2] as string });
    expect(await feed.attemptsOfSurvey('8301', from, to)).toHaveLength(9);
  });

  it('leaves the start alone for named surveys, days short of it, and a dry run (which writes nothing)', async () => {
    await seeded();
    await feedStartedOn(DAYS[2] as string);
    const started = await feed.startedAt();
    expect(await rebuild.run({ from: DAYS[0] as string, to: DAYS[2] as string, dryRun: true })).toMatchObject(
      { attempts: 21 },
    );
    expect(await feedItemCount()).toBe(0);
    expect((await feed.state()).touchedAt).toBeUndefined();
    await rebuild.run({ from: DAYS[0] as string, to: DAYS[2] as string, surveys: ['8301'] });
    expect(await feed.startedAt()).toBe(started);
    // Days rebuilt: the probe touched again, for readers that found the consumer behind.
    expect((await feed.state()).touchedAt).toBeDefined();
    // Up to the day before the start: the start's own day before the mark is not in.
    await rebuild.run({ from: DAYS[0] as string, to: DAYS[1] as string });
    expect(await feed.startedAt()).toBe(started);
    expect(await feedItemCount()).toBeGreaterThan(0);
  });

  it('finds attempts the day index does not hold (their hits came after the feed covered them)', async () => {
    await seeded();
    await feedStartedOn(DAYS[0] as string);
    const unindexed = createLedgerStore(client, tableName, undefined, { indexFree: () => true });
    const hit: Hit = {
      channel: 'postback',
      surveyId: '8302',
      outcome: 'success',
      pid: 'p-free',
      token: 't-free',
      source: 'query',
    };
    await unindexed.recordHit(hit, new Date(`${DAYS[1]}T15:00:00.000Z`));
    const [from, to] = span(DAYS[1] as string, DAYS[1] as string);
    expect((await ledger.attemptsOfSurvey('8302', from, to)).map((a) => a.token)).not.toContain('t-free');
    expect(
      await rebuild.run({ from: DAYS[1] as string, to: DAYS[1] as string, surveys: ['8302'] }),
    ).toMatchObject({ attempts: 4, surveys: 1 });
    expect((await feed.attemptsOfSurvey('8302', from, to)).map((a) => a.token)).toContain('t-free');
  });

  it("rebuilds a pid pointer set before pointers kept their time so that it outranks the stream's image from before it", async () => {
    await seeded();
    await feedStartedOn(DAYS[0] as string);
    const [from, to] = span(DAYS[1] as string, DAYS[1] as string);
    const [before] = (await ledger.attemptsOfSurvey('8301', from, to)).filter(
      (a) => a.token === 't-8301-1-0',
    );
    const key = attemptKey('8301', 'p10', 't-8301-1-0');
    // The stream's image without the pointer, then the pointer set by an earlier release (no arrivedAt), its batch
    // set aside.
    const { Item } = await client.send(new GetCommand({ TableName: tableName, Key: key }));
    await feed.append({
      day: DAYS[1] as string,
      bucket: feedBucket('8301'),
      newestAt: `${DAYS[1]}T12:00:00.000Z`,
      records: [{ sequence: '900', attributes: feedRecordOf(Item ?? {}, 0) }],
    });
    await client.send(
      new UpdateCommand({
        TableName: tableName,
        Key: key,
        UpdateExpression: 'SET arrivedAs = :as',
        ExpressionAttributeValues: { ':as': 'P10' },
      }),
    );
    expect(before?.arrivedAs).toBeUndefined();
    await rebuild.run({ from: DAYS[1] as string, to: DAYS[1] as string, surveys: ['8301'] });
    const [rebuilt] = (await feed.attemptsOfSurvey('8301', from, to)).filter((a) => a.token === 't-8301-1-0');
    expect(rebuilt?.arrivedAs).toBe('P10');
  });

  it('puts an attempt the index lists by another day than its first sighting (placed by its click) where the index has it', async () => {
    await seeded();
    await feedStartedOn(DAYS[2] as string);
    // An item reconciliation made for a transaction clicked at 23:50, which a postback then reached after midnight.
    const key = attemptKey('8301', 'p-late', 't-late');
    await client.send(
      new PutCommand({
        TableName: tableName,
        Item: {
          ...key,
          ...attemptDayKey('8301', key.sk, `${DAYS[0]}T23:50:00.000Z`),
          kind: 'attempt',
          surveyId: '8301',
          pid: 'p-late',
          token: 't-late',
          firstSeenAt: `${DAYS[1]}T00:10:00.000Z`,
          lastSeenAt: `${DAYS[1]}T00:10:00.000Z`,
          postbackOutcome: 'success',
          postback_success_at: `${DAYS[1]}T00:10:00.000Z`,
          postback_success_hits: 1,
        },
      }),
    );
    await rebuild.run({ from: DAYS[0] as string, to: DAYS[0] as string, surveys: ['8301'] });
    const [from, to] = span(DAYS[0] as string, DAYS[0] as string);
    expect((await feed.attemptsOfSurvey('8301', from, to)).map((a) => a.token)).toContain('t-late');
    expect((await feed.attemptsOfSurvey('8301', from, to)).map(asFeedHolds)).toEqual(
      (await ledger.attemptsOfSurvey('8301', from, to)).map(asFeedHolds),
    );
    const [nextFrom, nextTo] = span(DAYS[1] as string, DAYS[1] as string);
    expect((await feed.attemptsOfSurvey('8301', nextFrom, nextTo)).map((a) => a.token)).not.toContain(
      't-late',
    );
  });
});
