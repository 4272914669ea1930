/**
 * The attempt feed's store and its stream consumer, against the engine: stream records built from the items a first
 * hit and a second hit really write, in the typed JSON a Lambda event carries.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { DeleteCommand, GetCommand, PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue, DynamoDBRecord } from 'aws-lambda';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createStreamConsumer,
  groupChanges,
  LEDGER_DOWN_WAIT_MS,
} from '../../functions/feed/stream-consumer';
import { type HealthCheckReport, healthCheck } from '../../functions/health/health-check';
import { DEFAULT_HEALTH_SETTINGS } from '../../functions/health/health-rules';
import { feedWindow } from '../../functions/health/health-window';
import {
  type AttemptFeed,
  createAttemptFeed,
  decodeRecords,
  encodeRecords,
  type FeedGroup,
  type FeedRecord,
  feedBucket,
  feedPartition,
  isLaterRecord,
  isLaterSequence,
  latestOfEach,
  MAX_RECORDS_BYTES,
} from '../../functions/ledger/attempt-feed';
import { StoreUnavailable } from '../../functions/ledger/document-client';
import { FEED_PROBE_KEY, FEED_PROBE_SEEN_KEY, FEED_START_KEY } from '../../functions/ledger/feed-keys';
import { attemptDayKey, attemptKey } from '../../functions/ledger/ledger-schema';
import {
  attemptFromItem,
  createDocumentClient,
  createHealthStore,
  createLedgerStore,
  createSurveyRegistry,
  firstHitItem,
  type Item,
} from '../../functions/ledger/ledger-store';
import type { Hit } from '../../functions/receiving/hit-request';
import { freshTable } from '../support/ledger';

let feed: AttemptFeed;
let client: ReturnType<typeof createDocumentClient>;
let tableName: string;

beforeAll(async () => {
  const table = await freshTable();
  tableName = table.tableName;
  client = createDocumentClient({ endpoint: table.endpoint });
  feed = createAttemptFeed(client, tableName);
});

const hitOf = (
  surveyId: string,
  channel: Hit['channel'] = 'redirect',
  pid = `p-${randomUUID().slice(0, 6)}`,
): Hit => ({
  channel,
  surveyId,
  outcome: 'success',
  pid,
  token: randomUUID(),
  source: 'query',
});

let sequence = 1_000;
/** A stream record of an attempt item changing from `before` to `after`. */
function change(after: Item | undefined, before?: Item, at = Date.now()): DynamoDBRecord {
  const image = (item: Item) =>
    marshall(item, { removeUndefinedValues: true }) as Record<string, AttributeValue>;
  const key = after ?? before ?? {};
  sequence += 1;
  return {
    eventName: !after ? 'REMOVE' : before ? 'MODIFY' : 'INSERT',
    dynamodb: {
      ApproximateCreationDateTime: Math.floor(at / 1000),
      Keys: image({ pk: key.pk, sk: key.sk }),
      ...(after ? { NewImage: image(after) } : {}),
      ...(before ? { OldImage: image(before) } : {}),
      SequenceNumber: String(sequence),
      StreamViewType: 'NEW_AND_OLD_IMAGES',
    },
  };
}

/** The item after a success postback reached the attempt a first redirect made. */
const withPostback = (item: Item, at: string): Item => ({
  ...item,
  lastSeenAt: at,
  postbackOutcome: 'success',
  postback_success_at: at,
  postback_success_hits: 1,
  postbackSource: 'query',
});

const feedItemsOf = async (day: string, bucket: number) =>
  (
    await client.send(
      new ScanCommand({
        TableName: tableName,
        FilterExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': feedPartition(day, bucket) },
      }),
    )
  ).Items ?? [];

describe('records', () => {
  it('read back as written, the latest of each attempt by sequence number of any length', () => {
    const item = firstHitItem(hitOf('8101'), new Date('2026-11-20T10:00:00.000Z'));
    const later = withPostback(item, '2026-11-20T10:05:00.000Z');
    const records = [
      { sequence: '99', attributes: item },
      { sequence: '100', attributes: later },
    ];
    expect(decodeRecords(encodeRecords(records))).toEqual(records);
    expect(isLaterSequence('100', '99')).toBe(true);
    expect(latestOfEach(records)).toEqual([records[1]]);
    expect(latestOfEach([...records].reverse())).toEqual([records[1]]);
  });

  it("take an attempt's latest image by its hits and sightings, whatever order the stream's shards numbered them in", () => {
    const item = firstHitItem(hitOf('8100'), new Date('2026-11-20T10:00:00.000Z'));
    const answered = withPostback(item, '2026-11-20T10:05:00.000Z');
    // A drained hit's outcome put back to when it was made: no hit more, a later last sighting.
    const settled = {
      ...answered,
      lastSeenAt: '2026-11-20T10:05:00.001Z',
      postback_success_at: '2026-11-20T10:04:00.000Z',
    };
    // A child shard's numbers below its parent's: the images still say which is later.
    const records = [
      { sequence: '900', attributes: item },
      { sequence: '120', attributes: answered },
      { sequence: '110', attributes: settled },
    ];
    expect(latestOfEach(records)).toEqual([records[2]]);
    expect(latestOfEach([...records].reverse())).toEqual([records[2]]);
    // Alike in hits and sightings (a pid pairing set by reconciliation): by when it was set.
    const paired = {
      sequence: '901',
      attributes: { ...item, arrivedAs: 'p-other', arrivedAt: '2026-11-21T09:00:00.000Z' },
    };
    expect(latestOfEach([records[0] as (typeof records)[0], paired])).toEqual([paired]);
    // The image `ledger rebuild-feed` reads from the item (sequence 0) after a batch holding the pairing was set
    // aside outranks the stream's image from before it; a pairing set again since outranks the rebuilt image.
    const rebuilt = { sequence: '0', attributes: paired.attributes };
    expect(latestOfEach([records[0] as (typeof records)[0], rebuilt])).toEqual([rebuilt]);
    const repaired = {
      sequence: '950',
      attributes: { ...item, arrivedAs: 'P-OTHER', arrivedAt: '2026-11-21T10:00:00.000Z' },
    };
    expect(latestOfEach([repaired, rebuilt])).toEqual([repaired]);
    expect(latestOfEach([rebuilt, repaired])).toEqual([repaired]);
  });
});

describe('the feed store', () => {
  const day = '2026-11-20';
  const group = (surveyId: string, items: Item[], newestAt = `${day}T10:00:00.000Z`): FeedGroup => ({
    day,
    bucket: feedBucket(surveyId),
    newestAt,
    records: items.map((attributes, n) => ({ sequence: String(5_000 + n), attributes })),
  });

  it('writes a batch again as the same item, and keeps apart another batch under the same key', async () => {
    const surveyId = '8102';
    const first = firstHitItem(hitOf(surveyId), new Date(`${day}T09:00:00.000Z`));
    const second = firstHitItem(hitOf(surveyId), new Date(`${day}T09:01:00.000Z`));
    await feed.append(group(surveyId, [first]));
    await feed.append(group(surveyId, [first]));
    expect(await feedItemsOf(day, feedBucket(surveyId))).toHaveLength(1);
    // Same time, same sequence numbers, other records: both kept.
    await feed.append(group(surveyId, [second]));
    expect(await feedItemsOf(day, feedBucket(surveyId))).toHaveLength(2);
    const read = await feed.attemptsOfSurvey(
      surveyId,
      new Date(`${day}T00:00:00.000Z`),
      new Date(`${day}T23:59:59.000Z`),
    );
    expect(read.map((a) => a.token)).toEqual([first.token, second.token]);
  });

  it('splits a batch too large for one item, and a reader gets every record', async () => {
    const surveyId = '8103';
    const items = Array.from({ length: 4_000 }, (_, n) =>
      firstHitItem(
        // Incompressible ids, so the records take more than one item.
        { ...hitOf(surveyId), pid: randomBytes(60).toString('base64url') },
        new Date(Date.parse(`${day}T11:00:00.000Z`) + n),
      ),
    );
    expect(encodeRecords(latestOfEach(group(surveyId, items).records)).length).toBeGreaterThan(
      MAX_RECORDS_BYTES,
    );
    await feed.append(group(surveyId, items));
    expect((await feedItemsOf(day, feedBucket(surveyId))).length).toBeGreaterThan(1);
    const read = await feed.recordsOfBucketDay(day, feedBucket(surveyId));
    expect(read.filter((r) => r.attributes.surveyId === surveyId)).toHaveLength(4_000);
  });

  it('reads the changes since a moment as a key range', async () => {
    const surveyId = '8104';
    const early = firstHitItem(hitOf(surveyId), new Date(`${day}T12:00:00.000Z`));
    const late = firstHitItem(hitOf(surveyId), new Date(`${day}T13:00:00.000Z`));
    await feed.append(group(surveyId, [early], `${day}T12:00:03.000Z`));
    await feed.append(group(surveyId, [late], `${day}T13:00:03.000Z`));
    const since = await feed.recordsOfBucketDay(day, feedBucket(surveyId), `${day}T12:30:00.000Z`);
    expect(since.filter((r) => r.attributes.surveyId === surveyId).map((r) => r.attributes.token)).toEqual([
      late.token,
    ]);
  });
});

describe('the stream consumer', () => {
  it('keeps attempts and their verdicts, filed as the day index files them; not a removal, another item, or a change the feed does not hold', () => {
    const item = firstHitItem(hitOf('8105'), new Date('2026-11-21T08:00:00.000Z'));
    const judged = {
      ...item,
      verdict: 'matched',
      verdictDay: '2026-11-21',
      verdictAt: '2026-11-21T09:00:00.000Z',
      verdictHistory: [{ verdict: 'matched', day: '2026-11-21', at: '2026-11-21T09:00:00.000Z' }],
    };
    // A repeated request id remembered: nothing the feed holds moved.
    const remembered = { ...judged, redirectId0: 'abcdefgh' };
    // An item reconciliation made for a transaction clicked the evening before, nothing arrived for.
    const {
      firstSeenAt: _,
      lastSeenAt: __,
      ...made
    }: Item = {
      ...item,
      sk: 'TOKEN#other',
      token: 'other',
      gsi1sk: '2026-11-20T23:30:00.000Z',
      verdict: 'not_seen_here',
      verdictDay: '2026-11-20',
      verdictAt: '2026-11-21T09:00:00.000Z',
      marketplace: { clickedAt: '2026-11-20T23:30:00.000Z' },
      verdictHistory: [{ verdict: 'not_seen_here', day: '2026-11-20', at: '2026-11-21T09:00:00.000Z' }],
    };
    // Without any time to file it by (no sighting, no index entry, no click): no reader ever listed it.
    const {
      gsi1sk: ___,
      marketplace: ____,
      ...untimed
    }: Item = { ...made, sk: 'TOKEN#untimed', token: 'untimed' };
    const registry = { pk: 'SURVEY#8105', sk: 'REDIRECTS', surveyId: '8105' };
    const groups = groupChanges([
      change(item),
      change(judged, item),
      change(remembered, judged),
      change(undefined, judged),
      change(made),
      change(untimed),
      change(registry),
    ]);
    expect(groups.map((g) => g.day).sort()).toEqual(['2026-11-20', '2026-11-21']);
    const on = (day: string) => groups.find((g) => g.day === day)?.records.map((r) => r.attributes);
    expect(on('2026-11-21')?.map((r) => [r.token, r.verdict, r.verdictChanges])).toEqual([
      [item.token, undefined, undefined],
      [item.token, 'matched', 1],
    ]);
    expect(on('2026-11-21')?.[1]).not.toHaveProperty('verdictHistory');
    expect(on('2026-11-20')).toEqual([
      expect.objectContaining({ token: 'other', placedAt: '2026-11-20T23:30:00.000Z', verdictChanges: 1 }),
    ]);
  });

  it("orders an attempt's images by its hits, then its verdict's changes, then when it was judged", () => {
    const item = firstHitItem(hitOf('8105'), new Date('2026-11-21T08:00:00.000Z'));
    const judged = { ...item, verdict: 'matched', verdictAt: '2026-11-21T09:00:00.000Z', verdictChanges: 1 };
    const refreshed = { ...judged, verdictAt: '2026-11-21T10:00:00.000Z' };
    const cleared = { ...item, verdictChanges: 2 };
    const later = { ...withPostback(cleared, '2026-11-21T11:00:00.000Z') };
    // Sequence numbers that say the opposite (records of two shards): the images decide.
    const images = [later, cleared, refreshed, judged, item].map((attributes, n) => ({
      sequence: String(9_000 + n),
      attributes,
    }));
    for (let n = 0; n < images.length - 1; n++)
      expect(isLaterRecord(images[n] as FeedRecord, images[n + 1] as FeedRecord)).toBe(true);
    expect(latestOfEach([...images].reverse())[0]?.attributes).toBe(later);
    expect(latestOfEach(images.slice(1))[0]?.attributes).toBe(cleared);
  });

  it('records an attempt whose first sighting moved to an earlier day under both days; the day it left drops it', async () => {
    const surveyId = '8106';
    const item = firstHitItem(hitOf(surveyId), new Date('2026-11-22T00:10:00.000Z'));
    // As the store moves it: the first sighting and its index entry.
    const movedBack = {
      ...withPostback(item, '2026-11-22T00:10:00.000Z'),
      ...attemptDayKey(surveyId, item.sk as string, '2026-11-21T23:50:00.000Z'),
      firstSeenAt: '2026-11-21T23:50:00.000Z',
    };
    const consume = createStreamConsumer({ feed });
    await consume({ Records: [change(item)] });
    await consume({ Records: [change(movedBack, item)] });
    expect(groupChanges([change(movedBack, item)]).map((g) => g.day)).toEqual(['2026-11-21', '2026-11-22']);
    const on = (d: string) =>
      feed.attemptsOfSurvey(surveyId, new Date(`${d}T00:00:00.000Z`), new Date(`${d}T23:59:59.999Z`));
    expect(await on('2026-11-22')).toEqual([]);
    expect(await on('2026-11-21')).toEqual([attemptFromItem(movedBack)]);
  });

  it("reports a failed group's earliest change, folded or not, so the retry starts there", async () => {
    const inA = '8107';
    // A survey of another bucket.
    const inB = ['8108', '8109', '8110', '8111'].find((s) => feedBucket(s) !== feedBucket(inA)) as string;
    const a = firstHitItem(hitOf(inA), new Date('2026-11-23T10:00:00.000Z'));
    const b = firstHitItem(hitOf(inB), new Date('2026-11-23T10:00:00.000Z'));
    const records = [change(a), change(b), change(withPostback(a, '2026-11-23T10:01:00.000Z'), a)];
    const appended: string[] = [];
    const consume = createStreamConsumer({
      feed: {
        markStart: async () => {},
        probeSeen: async () => {},
        append: async (group) => {
          if (group.bucket === feedBucket(inA)) throw new Error('injected');
          appended.push(...group.records.map((r) => r.sequence));
        },
      },
    });
    const result = await consume({ Records: records });
    expect(result.batchItemFailures).toEqual([{ itemIdentifier: records[0]?.dynamodb?.SequenceNumber }]);
    expect(appended).toEqual([records[1]?.dynamodb?.SequenceNumber]);
    expect(result.consumed).toMatchObject({ changes: 3, groups: 2, failedGroups: 1 });
  });
});

describe('the consumer while the ledger is down', () => {
  it('waits a while before handing back a batch none of whose writes the ledger took, so an outage does not spend its retries in minutes', async () => {
    const inA = '8112';
    const inB = ['8113', '8114', '8115', '8116'].find((s) => feedBucket(s) !== feedBucket(inA)) as string;
    const records = [
      change(firstHitItem(hitOf(inA), new Date('2026-11-23T10:00:00.000Z'))),
      change(firstHitItem(hitOf(inB), new Date('2026-11-23T10:00:00.000Z'))),
    ];
    const consumerFailing = (fails: (bucket: number) => Error | undefined) => {
      const waits: number[] = [];
      const consume = createStreamConsumer({
        feed: {
          markStart: async () => {},
          probeSeen: async () => {},
          append: async (group) => {
            const error = fails(group.bucket);
            if (error) throw error;
          },
        },
        sleep: async (ms) => {
          waits.push(ms);
        },
      });
      return { consume, waits };
    };
    const down = consumerFailing(() => new StoreUnavailable('the ledger did not answer within 2000 ms'));
    expect((await down.consume({ Records: records })).batchItemFailures).toHaveLength(1);
    expect(down.waits).toEqual([LEDGER_DOWN_WAIT_MS]);
    // A write refused for another reason, or the ledger taking some of the batch: handed back at once.
    for (const fails of [
      () => new Error('ValidationException'),
      (bucket: number) => (bucket === feedBucket(inA) ? new StoreUnavailable('throttled') : undefined),
    ]) {
      const other = consumerFailing(fails);
      expect((await other.consume({ Records: records })).batchItemFailures).toHaveLength(1);
      expect(other.waits).toEqual([]);
    }
    // The feed's start mark refused the same way: waited out, then the batch fails as before.
    const waits: number[] = [];
    const unmarked = createStreamConsumer({
      feed: {
        markStart: async () => {
          throw new StoreUnavailable('the ledger is unavailable');
        },
        probeSeen: async () => {},
        append: async () => {},
      },
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
    await expect(unmarked({ Records: records })).rejects.toBeInstanceOf(StoreUnavailable);
    expect(waits).toEqual([LEDGER_DOWN_WAIT_MS]);
  });
});

describe("the health check's window from the feed", () => {
  const day = '2026-11-25';
  it("reads each bucket's day once a run, whatever the number of its surveys", async () => {
    // Surveys that share a bucket.
    const candidates = Array.from({ length: 80 }, (_, n) => String(8_200 + n));
    const same = candidates.filter((s) => feedBucket(s) === feedBucket(candidates[0] as string));
    expect(same.length).toBeGreaterThan(1);
    for (const surveyId of same)
      await feed.append({
        day,
        bucket: feedBucket(surveyId),
        newestAt: `${day}T10:00:00.000Z`,
        records: [
          { sequence: '7000', attributes: firstHitItem(hitOf(surveyId), new Date(`${day}T09:59:00.000Z`)) },
        ],
      });
    let reads = 0;
    const window = feedWindow(
      {
        recordsOfBucketDay: (...args) => {
          reads += 1;
          return feed.recordsOfBucketDay(...args);
        },
      },
      new Date(`${day}T09:30:00.000Z`),
      new Date(`${day}T10:30:00.000Z`),
    );
    for (const surveyId of same) expect(await window.attemptsOf(surveyId)).toHaveLength(1);
    expect(reads).toBe(1);
  });

  it("finds an attempt whose receiver's clock ran ahead of the stream's, and leaves out one first seen before", async () => {
    const surveyId = '8140';
    const from = new Date(`${day}T12:00:00.000Z`);
    const ahead = firstHitItem(hitOf(surveyId), new Date(from.getTime() + 400));
    const before = firstHitItem(hitOf(surveyId), new Date(from.getTime() - 5_000));
    await feed.append({
      day,
      bucket: feedBucket(surveyId),
      // The stream dated the change half a second before the receiver did.
      newestAt: new Date(from.getTime() - 100).toISOString(),
      records: [
        { sequence: '7100', attributes: ahead },
        { sequence: '7101', attributes: before },
      ],
    });
    const window = feedWindow(feed, from, new Date(from.getTime() + 3_600_000));
    expect((await window.attemptsOf(surveyId)).map((a) => a.token)).toEqual([ahead.token]);
  });

  it("judges as of the feed's lag: a postback the feed has not yet is not held against its survey", async () => {
    const surveyId = '8150';
    const T = Date.parse('2026-11-25T15:00:00.000Z');
    const iso = (ms: number) => new Date(ms).toISOString();
    const store = createLedgerStore(client, tableName);
    // 25 success redirects 20 to 12 minutes before T, each answered 9 minutes later; the feed is 5 minutes behind.
    const records: FeedRecord[] = [];
    for (let n = 0; n < 25; n++) {
      const redirectAt = T - 20 * 60_000 + n * 20_000;
      const postbackAt = redirectAt + 9 * 60_000;
      const redirect = hitOf(surveyId);
      const postback: Hit = { ...redirect, channel: 'postback' };
      await store.recordHit(redirect, new Date(redirectAt));
      await store.recordHit(postback, new Date(postbackAt));
      const item = firstHitItem(redirect, new Date(redirectAt));
      records.push({ sequence: String(20_000 + 2 * n), attributes: item });
      if (postbackAt <= T - 5 * 60_000)
        records.push({ sequence: String(20_001 + 2 * n), attributes: withPostback(item, iso(postbackAt)) });
    }
    await feed.append({ day, bucket: feedBucket(surveyId), newestAt: iso(T - 5 * 60_000), records });
    await client.send(
      new PutCommand({ TableName: tableName, Item: { ...FEED_START_KEY, at: '2026-11-01T00:00:00.000Z' } }),
    );
    // Its consumer marked the start and has not noted a touch of the probe yet (stuck since its first batch): the
    // items are read, which hold every attempt until the feed is proven (the receivers index them all till then).
    await client.send(new DeleteCommand({ TableName: tableName, Key: FEED_PROBE_SEEN_KEY }));
    await feed.touchProbe(iso(T - 2 * 3_600_000));
    const check = (feedLagMs?: number) =>
      healthCheck({
        attempts: store,
        registry: createSurveyRegistry(client, tableName),
        health: createHealthStore(client, tableName),
        settings: DEFAULT_HEALTH_SETTINGS,
        concurrency: 1,
        ...(feedLagMs === undefined ? {} : { feed, feedLagMs }),
      });
    const judged = async (report: Promise<HealthCheckReport>) => {
      const { surveys, evaluatedAt } = await report;
      return { evaluatedAt, evaluation: surveys[0]?.evaluation };
    };
    const surveys = { surveys: [surveyId] };
    const fromTable = await judged(check().evaluate(new Date(T), surveys));
    expect(fromTable.evaluation?.state).toBe('ok');
    expect(await judged(check(0).evaluate(new Date(T), surveys))).toEqual(fromTable);
    await feed.probeSeen(iso(T - 2 * 3_600_000));
    // Seven minutes back, the feed says what the attempt items said then.
    const fromFeed = await judged(check(7 * 60_000).evaluate(new Date(T), surveys));
    expect(fromFeed).toEqual(await judged(check().evaluate(new Date(T - 7 * 60_000), surveys)));
    expect(fromFeed.evaluation?.state).toBe('ok');
    // Judged at T from the feed, the postbacks it has not yet would look missing.
    const unlagged = await judged(check(0).evaluate(new Date(T), surveys));
    expect(unlagged.evaluation?.reasons.map((r) => r.code)).toEqual(['success_without_postback']);
    // A feed begun after the span's start: the items are read, judged at the same lagged time (a run that switches
    // between the two does not move the evaluation back and forth).
    await client.send(new PutCommand({ TableName: tableName, Item: { ...FEED_START_KEY, at: iso(T) } }));
    const beforeTheFeed = await judged(check(7 * 60_000).evaluate(new Date(T), surveys));
    expect(beforeTheFeed).toEqual(fromFeed);
    // Its consumer behind: reconciliation's probe touched 40 minutes before and not noted since. No survey is judged
    // from a window that lacks the traffic since (each would look as if its postbacks stopped).
    await feed.probeSeen(iso(T - 60 * 60_000));
    await feed.touchProbe(iso(T - 40 * 60_000));
    const behind = await check(7 * 60_000).evaluate(new Date(T), surveys);
    expect(behind.surveys).toEqual([]);
    expect(behind.failed.map((f) => [f.surveyId, String(f.error)])).toEqual([
      [surveyId, expect.stringMatching(/attempt feed is behind \(its probe, touched at .*not yet noted/)],
    ]);
    // Noted: judged again.
    await feed.probeSeen(iso(T - 40 * 60_000));
    expect(await judged(check(7 * 60_000).evaluate(new Date(T), surveys))).toEqual(fromFeed);
  });

  it('looks back at surveys failing for stopped postbacks in a lull from one read of each bucket a run, not one per survey', async () => {
    const other = await freshTable();
    const otherClient = createDocumentClient({ endpoint: other.endpoint });
    const otherFeed = createAttemptFeed(otherClient, other.tableName);
    const health = createHealthStore(otherClient, other.tableName);
    const registry = createSurveyRegistry(otherClient, other.tableName);
    const T = Date.parse('2026-11-25T15:00:00.000Z');
    const iso = (ms: number) => new Date(ms).toISOString();
    const candidates = Array.from({ length: 80 }, (_, n) => String(8_300 + n));
    const surveys = candidates
      .filter((s) => feedBucket(s) === feedBucket(candidates[0] as string))
      .slice(0, 4);
    expect(surveys.length).toBe(4);
    // Their postbacks stopped: failing, and in a half hour without redirects, those of an hour before unanswered.
    const records: FeedRecord[] = [];
    for (const surveyId of surveys) {
      await registry.put({
        surveyId,
        state: 'active',
        verified: true,
        failures: 0,
        updatedAt: iso(T - 86_400_000),
      });
      await health.put({
        surveyId,
        state: 'failing',
        since: iso(T - 2 * 3_600_000),
        reasons: [{ code: 'postbacks_stopped', severity: 'failing', detail: 'stopped' }],
        history: [],
        updatedAt: iso(T - 2 * 3_600_000),
        revision: 1,
      });
      for (let n = 0; n < 3; n++)
        records.push({
          sequence: String(30_000 + records.length),
          attributes: {
            ...firstHitItem(hitOf(surveyId), new Date(T - 60 * 60_000 + n * 60_000)),
            redirectFrom: `sender-${n}`,
          },
        });
    }
    await otherFeed.append({
      day: '2026-11-25',
      bucket: feedBucket(surveys[0] as string),
      newestAt: iso(T - 57 * 60_000),
      records,
    });
    await otherFeed.markStart(
      '2026-11-01T00:00:00.000Z',
      'arn:aws:dynamodb:us-east-1:123456789012:table/l/stream/9',
    );
    await otherFeed.touchProbe(iso(T - 60_000));
    await otherFeed.probeSeen(iso(T - 60_000));
    let reads = 0;
    const counted = {
      ...otherFeed,
      recordsOfBucketDay: (...args: Parameters<typeof otherFeed.recordsOfBucketDay>) => {
        reads += 1;
        return otherFeed.recordsOfBucketDay(...args);
      },
    };
    const report = await healthCheck({
      attempts: createLedgerStore(otherClient, other.tableName),
      registry,
      health,
      settings: DEFAULT_HEALTH_SETTINGS,
      concurrency: 2,
      feed: counted,
      feedLagMs: 0,
    }).evaluate(new Date(T), { surveys });
    expect(report.surveys.map((r) => r.evaluation.reasons.map((x) => x.code))).toEqual(
      surveys.map(() => ['postbacks_stopped']),
    );
    // The window's read and the look back's: one of the bucket's day each, whatever the number of its surveys.
    expect(reads).toBe(2);
  });

  it("marks it on a batch that holds only the probe's touch: a feed turned on again, read before any attempt changes", async () => {
    const other = await freshTable();
    const otherFeed = createAttemptFeed(createDocumentClient({ endpoint: other.endpoint }), other.tableName);
    const touch = { ...FEED_PROBE_KEY, kind: 'attempt-feed-probe', touchedAt: '2026-11-24T11:59:00.000Z' };
    const ofStream = { ...change(touch), eventSourceARN: 'arn:aws:dynamodb:::table/l/stream/3' };
    const consumed = await createStreamConsumer({
      feed: otherFeed,
      now: () => new Date('2026-11-24T12:00:00.000Z'),
    })({ Records: [ofStream] });
    expect(consumed.batchItemFailures).toEqual([]);
    expect(await otherFeed.state()).toMatchObject({
      startedAt: '2026-11-24T12:00:00.000Z',
      seenAt: '2026-11-24T11:59:00.000Z',
    });
    // A reader that knows the table's stream takes no other stream's start for it.
    expect(
      await createAttemptFeed(createDocumentClient({ endpoint: other.endpoint }), other.tableName, {
        stream: 'arn:aws:dynamodb:::table/l/stream/4',
      }).state(),
    ).toEqual({});
  });

  it('marks when the feed began, once, at the time of the first batch it writes', async () => {
    const other = await freshTable();
    const otherFeed = createAttemptFeed(createDocumentClient({ endpoint: other.endpoint }), other.tableName);
    expect(await otherFeed.startedAt()).toBeUndefined();
    const registry = { pk: 'SURVEY#8160', sk: 'REDIRECTS', surveyId: '8160' };
    await createStreamConsumer({ feed: otherFeed })({ Records: [change(registry)] });
    expect(await otherFeed.startedAt()).toBeUndefined();
    const at = (time: string) => Date.parse(`2026-11-24T${time}Z`);
    const consumerAt = (time: string) =>
      createStreamConsumer({ feed: otherFeed, now: () => new Date(at(time)) });
    const first = firstHitItem(hitOf('8160'), new Date(at('08:00:30')));
    const second = firstHitItem(hitOf('8160'), new Date(at('08:00:10')));
    // Its first batch, delivered at 08:05: the changes before it may have gone to an earlier release's feed.
    await consumerAt('08:05:00')({
      Records: [change(first, undefined, at('08:00:30')), change(second, undefined, at('08:00:10'))],
    });
    expect(await otherFeed.startedAt()).toBe('2026-11-24T08:05:00.000Z');
    // Another container, a later batch: the mark stays.
    await consumerAt('09:05:00')({
      Records: [change(firstHitItem(hitOf('8160'), new Date(at('09:00:00'))), undefined, at('09:00:00'))],
    });
    expect(await otherFeed.startedAt()).toBe('2026-11-24T08:05:00.000Z');
    // The feed turned off and on again: a new stream, whose first batch marks the start anew (the changes in between
    // reached no feed); its later batches leave it.
    const ofStream = (record: DynamoDBRecord) => ({
      ...record,
      eventSourceARN: 'arn:aws:dynamodb:::table/l/stream/2',
    });
    await consumerAt('11:00:00')({
      Records: [
        ofStream(change(firstHitItem(hitOf('8160'), new Date(at('11:00:00'))), undefined, at('11:00:00'))),
      ],
    });
    expect(await otherFeed.startedAt()).toBe('2026-11-24T11:00:00.000Z');
    await consumerAt('12:00:00')({
      Records: [
        ofStream(change(firstHitItem(hitOf('8160'), new Date(at('12:00:00'))), undefined, at('12:00:00'))),
      ],
    });
    expect(await otherFeed.startedAt()).toBe('2026-11-24T11:00:00.000Z');
  });

  it("keeps an attempt's last sighting growing when a live hit lands inside a drained hit's follow-up, so the fold takes the table's image", async () => {
    const ids = { surveyId: '8170', pid: 'p-race', token: 'tok-race', source: 'query' } as const;
    const key = attemptKey(ids.surveyId, ids.pid, ids.token);
    const T0 = Date.parse('2026-11-25T10:00:00.000Z');
    const drainerClock = T0 + 30 * 60_000;
    const live = createLedgerStore(client, tableName);
    const images: FeedRecord[] = [];
    const snapshot = async () => {
      const { Item } = await client.send(
        new GetCommand({ TableName: tableName, Key: key, ConsistentRead: true }),
      );
      images.push({ sequence: String(500 + images.length), attributes: Item ?? {} });
    };
    await live.recordHit({ ...ids, channel: 'redirect', outcome: 'success' }, new Date(T0));
    await snapshot();
    await live.recordHit({ ...ids, channel: 'postback', outcome: 'fail' }, new Date(T0 + 5 * 60_000));
    await snapshot();
    // A live repeat of the redirect, its container's clock ahead of the drainer's, lands just before the drained
    // hit's follow-up (the update that makes its earlier outcome stand).
    let raced = false;
    const racing = {
      send: async (command: { input?: { UpdateExpression?: string } }, ...rest: unknown[]) => {
        const expression = command.input?.UpdateExpression ?? '';
        if (!raced && !expression.includes('ADD') && expression.includes('lastSeenAt = :seen')) {
          raced = true;
          await live.recordHit(
            { ...ids, channel: 'redirect', outcome: 'success' },
            new Date(drainerClock + 20),
          );
          await snapshot();
        }
        return (client.send as (...args: unknown[]) => Promise<unknown>)(command, ...rest);
      },
    };
    const drainer = createLedgerStore(
      racing as unknown as typeof client,
      tableName,
      () => new Date(drainerClock),
    );
    await drainer.recordBufferedHit(
      { ...ids, channel: 'postback', outcome: 'success' },
      new Date(T0 + 60_000),
      'b-1',
    );
    await snapshot();
    expect(raced).toBe(true);
    const seen = images.map((image) => String(image.attributes.lastSeenAt));
    expect(seen).toEqual([...seen].sort());
    const { Item } = await client.send(
      new GetCommand({ TableName: tableName, Key: key, ConsistentRead: true }),
    );
    expect(Item?.postbackOutcome).toBe('success');
    // Whatever order the stream numbered them in.
    const [latest] = latestOfEach(
      [...images].reverse().map((image, n) => ({ ...image, sequence: String(n) })),
    );
    expect(latest?.attributes.postbackOutcome).toBe('success');
  });
});
