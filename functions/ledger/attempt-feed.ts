/**
 * The attempt feed: what the table's stream says happened to attempts, kept compact, so that a reader can have
 * every attempt of a UTC day for a group of surveys in a few Query pages instead of one half read unit per attempt
 * (the keys-only day index, then BatchGetItem). The stream consumer (feed/stream-consumer.ts) writes it; DynamoDB
 * does not bill a Lambda consumer's reads of a stream.
 *
 * | item         | pk                                 | sk                                        |
 * |--------------|------------------------------------|-------------------------------------------|
 * | attempt feed | FEED#v2#<utc day filed by>#<bucket> | <newest change, UTC second>#<first seq>#<last seq>[#<digest>] |
 * | its start    | FEED#START                         | START#v2                                  |
 * | its probe    | ATTEMPT#~feed-probe / FEED#PROBE    | PROBE / SEEN#v2 (touched / noted)         |
 *
 * One item per stream batch, UTC day and bucket of surveys (`feedBucket`, a hash of the survey id): at the cost
 * model's shape a batch carries about one change per survey, so an item per survey would pay a whole write unit
 * for each change, while a bucket packs about fifty. Its `records` attribute holds the batch's changes of those
 * attempts, one JSON line each (`[sequence number, attributes]`), brotli-compressed: the attributes are the
 * attempt item's own (`FEED_ATTRIBUTES`: its sightings and its verdict, not the verdict's history), so
 * `attemptFromItem` reads a record as it reads the item, plus two the record adds (`feedRecordOf`): how many times
 * its verdict changed (`verdictChanges`, the history's length) and, for an item the day index files by another
 * time than its first sighting (one reconciliation made for a transaction, filed by its click), that time
 * (`placedAt`). A record is filed under the UTC day of that time, as the day index files the item.
 *
 * Records arrive at least once and a batch's retry may split differently: a reader keeps, of all the records of
 * one attempt, the latest (`isLaterRecord`). The sort key starts with the newest change's time, so the changes since
 * a moment are a key range (`since`). An attempt whose filing time moved to an earlier day (a hit drained from the
 * buffer) is recorded under both days; a reader of the day it left drops it by that time.
 */
import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Attempt } from '../receiving/attempt';
import { OUTCOMES, POSTBACK_OUTCOMES } from '../receiving/outcome';
import { attemptFromItem, utcDaysBetween } from './attempt-store';
import { batchGet, conditionally, type Item, queryAll, send } from './document-client';
import {
  FEED_FORMAT,
  FEED_PARTITION_PREFIX,
  FEED_PROBE_KEY,
  FEED_PROBE_SEEN_KEY,
  FEED_START_KEY,
  isNoteOf,
} from './feed-keys';
import { fnv1a, utcDay } from './ledger-schema';

/**
 * Buckets of surveys per day. More buckets make each reader's Query smaller and each batch's writes more numerous
 * (at least one write unit per bucket a batch touches); changing it re-keys the feed, so it is fixed like the
 * day index's shards.
 */
export const FEED_BUCKETS = 16;

/** The bucket of a survey (a hash of its id): every writer and reader finds the same. */
export const feedBucket = (surveyId: string): number => fnv1a(surveyId) % FEED_BUCKETS;

export const feedPartition = (day: string, bucket: number) =>
  `${FEED_PARTITION_PREFIX}${FEED_FORMAT}#${day}#${bucket}`;

/**
 * The attempt item's attributes a record keeps: what the readers judge an attempt by (its sightings, its verdict),
 * not the verdict's history, which only grows.
 */
export const FEED_ATTRIBUTES: readonly string[] = [
  'surveyId',
  'pid',
  'token',
  'firstSeenAt',
  'lastSeenAt',
  'redirectOutcome',
  'postbackOutcome',
  ...OUTCOMES.flatMap((o) => [`redirect_${o}_at`, `redirect_${o}_hits`]),
  ...POSTBACK_OUTCOMES.flatMap((o) => [`postback_${o}_at`, `postback_${o}_hits`]),
  'redirectFrom',
  'postbackSource',
  'arrivedAs',
  'arrivedAt',
  'drainedAt',
  'verdict',
  'verdictDay',
  'verdictAt',
  'verdictDetail',
  'marketplace',
];

/**
 * The time the day index files an item by (its `gsi1sk`, an ISO instant, once prefixed with the survey id), when
 * there is one: the first sighting, moved back with it, or the click of a transaction reconciliation made an item
 * for, kept when a hit reaches that item later.
 */
const indexedTime = (sortKey: unknown): string | undefined =>
  typeof sortKey === 'string' ? sortKey.slice(sortKey.lastIndexOf('#') + 1) || undefined : undefined;

/**
 * A feed record's attributes from an attempt item's: its `FEED_ATTRIBUTES`, how many times its verdict changed
 * (`verdictChanges`: entries of its history, which every verdict, retirement and clearing appends to) and the time
 * the day index files it by when that is not its first sighting (`placedAt`).
 */
export function feedRecordOf(item: Item, verdictChanges: number): Item {
  const record: Item = Object.fromEntries(
    FEED_ATTRIBUTES.filter((name) => item[name] !== undefined).map((name) => [name, item[name]]),
  );
  const placed = indexedTime(item.gsi1sk);
  if (placed !== undefined && placed !== item.firstSeenAt) record.placedAt = placed;
  if (verdictChanges > 0) record.verdictChanges = verdictChanges;
  return record;
}

/**
 * The time a record files its attempt by: where the day index has it, else its first sighting, else (an item
 * retired since: no index entry) the click of its transaction. Undefined: nothing to file it by.
 */
export function feedTime(attributes: Item): string | undefined {
  if (typeof attributes.placedAt === 'string') return attributes.placedAt;
  if (typeof attributes.firstSeenAt === 'string') return attributes.firstSeenAt;
  const clicked = (attributes.marketplace as { clickedAt?: unknown } | undefined)?.clickedAt;
  return typeof clicked === 'string' ? clicked : undefined;
}

/**
 * Whether a record's attempt is one the readers list: something arrived for it, or reconciliation holds a verdict
 * on it (an item it made for a transaction, until retired).
 */
export const isListed = (attributes: Item): boolean =>
  typeof attributes.lastSeenAt === 'string' || typeof attributes.verdict === 'string';

/** One change of an attempt: its stream sequence number (digits) and its attributes after the change. */
export interface FeedRecord {
  readonly sequence: string;
  readonly attributes: Item;
}

/** Whether sequence number `a` comes after `b` (decimal strings of any length). */
export const isLaterSequence = (a: string, b: string): boolean =>
  a.length !== b.length ? a.length > b.length : a > b;

/** Every hit an attempt has counted, on either channel: only ever added to. */
const hitsOf = (attributes: Item): number =>
  Object.entries(attributes).reduce(
    (sum, [name, value]) => (name.endsWith('_hits') && typeof value === 'number' ? sum + value : sum),
    0,
  );

/**
 * Whether record `a` holds a later image of its attempt than `b`. Every hit adds to a counter, and the updates a
 * drained hit makes without one move `lastSeenAt` past the image they read (attempt-store.ts); every verdict
 * written, retired or cleared adds to its history (`verdictChanges`), and a verdict refreshed with newer facts
 * moves `verdictAt`, and reconciliation's pointer to where a transaction's attempt arrived (`arrivedAs`) moves
 * `arrivedAt`: none of them ever goes back, so the image ahead on the first that differs is the later, whatever
 * shard of the stream either came from, and an image `ledger rebuild-feed` read from the item (sequence 0)
 * outranks a stream image from before it. Only a change that moves none of them falls back to the stream's order
 * of one item's changes, its sequence number.
 */
export function isLaterRecord(a: FeedRecord, b: FeedRecord): boolean {
  const hits = hitsOf(a.attributes) - hitsOf(b.attributes);
  if (hits !== 0) return hits > 0;
  const seenA = String(a.attributes.lastSeenAt ?? '');
  const seenB = String(b.attributes.lastSeenAt ?? '');
  if (seenA !== seenB) return seenA > seenB;
  const changes = Number(a.attributes.verdictChanges ?? 0) - Number(b.attributes.verdictChanges ?? 0);
  if (changes !== 0) return changes > 0;
  const judgedA = String(a.attributes.verdictAt ?? '');
  const judgedB = String(b.attributes.verdictAt ?? '');
  if (judgedA !== judgedB) return judgedA > judgedB;
  const pointedA = String(a.attributes.arrivedAt ?? '');
  const pointedB = String(b.attributes.arrivedAt ?? '');
  if (pointedA !== pointedB) return pointedA > pointedB;
  return isLaterSequence(a.sequence, b.sequence);
}

/** A record's attempt, for folding: survey, pid and token, which key the attempt item too. */
const attemptOf = (attributes: Item) =>
  `${String(attributes.surveyId)}\n${String(attributes.pid)}\n${String(attributes.token)}`;

/** Of the records given, the latest of each attempt, in the order of their attempts' first record. */
export function latestOfEach(records: Iterable<FeedRecord>): FeedRecord[] {
  const latest = new Map<string, FeedRecord>();
  for (const record of records) {
    const key = attemptOf(record.attributes);
    const held = latest.get(key);
    if (!held || isLaterRecord(record, held)) latest.set(key, record);
  }
  return [...latest.values()];
}

/** A batch's records as one item holds them. */
export function encodeRecords(records: readonly FeedRecord[]): Uint8Array {
  const lines = records.map((r) => JSON.stringify([r.sequence, r.attributes])).join('\n');
  const text = Buffer.from(lines, 'utf8');
  return brotliCompressSync(text, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: 9,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: text.length,
    },
  });
}

export function decodeRecords(encoded: Uint8Array): FeedRecord[] {
  const text = brotliDecompressSync(encoded).toString('utf8');
  if (text === '') return [];
  return text.split('\n').map((line) => {
    const [sequence, attributes] = JSON.parse(line) as [string, Item];
    return { sequence, attributes };
  });
}

/**
 * The most a feed item's records may take, compressed: DynamoDB's items hold 400 KB, and a batch that compresses
 * to more is written as several items.
 */
export const MAX_RECORDS_BYTES = 300_000;

/** One group of a batch: the changes of one UTC day and bucket. */
export interface FeedGroup {
  readonly day: string;
  readonly bucket: number;
  /** The newest change's time in the group (from the stream), ISO-8601. */
  readonly newestAt: string;
  readonly records: readonly FeedRecord[] /** Ends the item's sort key: a rebuild's chunks share a time and sequence numbers (0), so each names itself. */;
  readonly label?: string;
}

/** What a reader asks before trusting the feed: since when it is complete, and its probe's last touch and sighting. */
export interface FeedState {
  readonly startedAt?: string;
  readonly touchedAt?: string;
  /**
   * The latest touch the consumer of the stream that marked the start has noted (`isNoteOf`): a note left by the
   * stream of a feed turned off since, and on again, is not this feed's.
   */
  readonly seenAt?: string;
}

export interface AttemptFeed {
  /** Marks when the feed began, unless it is marked already for the same stream (its ARN). */
  markStart(at: string, stream: string): Promise<void>;
  /** When the feed began holding every change (absent: not yet). */
  startedAt(): Promise<string | undefined>;
  /** The start mark and the probe's touch and sighting, in one read. */
  state(): Promise<FeedState>;
  /** Touches the probe (a change the consumer will see). */
  touchProbe(at: string): Promise<void>;
  /**
   * Notes that the consumer of `stream` has written past the probe's touch at `touchedAt` (never moving the note
   * back for the same stream).
   */
  probeSeen(touchedAt: string, stream?: string): Promise<void>;
  /**
   * Writes one group as one item (more if it is large). Idempotent: the same records again write nothing new; other
   * records under the same key (two shards' batches alike in time and sequence numbers) go beside it.
   */
  append(group: FeedGroup): Promise<void>;
  /**
   * The latest record of each attempt the feed holds for a UTC day and bucket, from the items whose newest change
   * is at or after `since` (all of them without it).
   */
  recordsOfBucketDay(day: string, bucket: number, since?: string): Promise<FeedRecord[]>;
  /**
   * A survey's attempts filed in [from, to), oldest first, as the day index lists them (first seen then, or an
   * item reconciliation made for a transaction clicked then): its bucket's days, its own attempts kept.
   */
  attemptsOfSurvey(surveyId: string, from: Date, to: Date): Promise<Attempt[]>;
}

const digestOf = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('base64url').slice(0, 16);

/** A group's records in parts that each compress to at most MAX_RECORDS_BYTES. */
function encodedParts(records: readonly FeedRecord[]): Uint8Array[] {
  const encoded = encodeRecords(records);
  if (encoded.length <= MAX_RECORDS_BYTES || records.length === 1) return [encoded];
  const half = Math.ceil(records.length / 2);
  return [...encodedParts(records.slice(0, half)), ...encodedParts(records.slice(half))];
}

/** The `stream` of a table that keeps none (the attempt feed turned off): no start mark is its feed's. */
export const NO_STREAM = '';

/**
 * @param options.stream the table's stream ARN, where the deployment knows it (ATTEMPT_FEED_STREAM), or how to find
 *   it (the CLI asks the table), read once: a start mark of another stream (the feed turned off and on again, the
 *   new stream's consumer yet to mark its own) is no start; `NO_STREAM` (the table keeps none: the feed turned off)
 *   takes no mark for a start.
 */
export function createAttemptFeed(
  client: DynamoDBDocumentClient,
  tableName: string,
  options: { stream?: string | (() => Promise<string | undefined>) | undefined } = {},
): AttemptFeed {
  let stream: Promise<string | undefined> | undefined;
  /** The start mark if it is this feed's. */
  const ours = async (start: Item | undefined) => {
    stream ??= typeof options.stream === 'function' ? options.stream() : Promise.resolve(options.stream);
    const of = await stream;
    return start !== undefined && (of === undefined || start.stream === of) ? start : undefined;
  };
  const put = async (pk: string, sk: string, records: Uint8Array, count: number) => {
    const digest = digestOf(records);
    const item = { pk, kind: 'attempt-feed', records, count, digest };
    try {
      await send(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: { ...item, sk },
            // The same records again (a retried batch) change nothing; others keep theirs.
            ConditionExpression: 'attribute_not_exists(pk) OR digest = :digest',
            ExpressionAttributeValues: { ':digest': digest },
          }),
        ),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      await send(() =>
        client.send(new PutCommand({ TableName: tableName, Item: { ...item, sk: `${sk}#${digest}` } })),
      );
    }
  };

  const feed: AttemptFeed = {
    async markStart(at, stream) {
      await conditionally(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: { ...FEED_START_KEY, kind: 'attempt-feed-start', at, stream },
            ConditionExpression:
              'attribute_not_exists(pk) OR attribute_not_exists(#stream) OR #stream <> :stream',
            ExpressionAttributeNames: { '#stream': 'stream' },
            ExpressionAttributeValues: { ':stream': stream },
          }),
        ),
      );
    },

    async state() {
      const items = await batchGet(client, tableName, [FEED_START_KEY, FEED_PROBE_KEY, FEED_PROBE_SEEN_KEY]);
      const of = (key: { pk: string; sk: string }, name: string) => {
        const value = items.find((item) => item.pk === key.pk && item.sk === key.sk)?.[name];
        return typeof value === 'string' ? value : undefined;
      };
      const item = (key: { pk: string; sk: string }) => items.find((i) => i.pk === key.pk && i.sk === key.sk);
      const start = await ours(item(FEED_START_KEY));
      const startedAt = start && typeof start.at === 'string' ? start.at : undefined;
      const touchedAt = of(FEED_PROBE_KEY, 'touchedAt');
      const seenAt =
        start && isNoteOf(item(FEED_PROBE_SEEN_KEY), start) ? of(FEED_PROBE_SEEN_KEY, 'seen') : undefined;
      return {
        ...(startedAt ? { startedAt } : {}),
        ...(touchedAt ? { touchedAt } : {}),
        ...(seenAt ? { seenAt } : {}),
      };
    },

    async touchProbe(at) {
      await send(() =>
        client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: FEED_PROBE_KEY,
            UpdateExpression: 'SET kind = :kind, touchedAt = :at',
            ExpressionAttributeValues: { ':kind': 'attempt-feed-probe', ':at': at },
          }),
        ),
      );
    },

    async probeSeen(touchedAt, stream) {
      await conditionally(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              ...FEED_PROBE_SEEN_KEY,
              kind: 'attempt-feed-probe-seen',
              seen: touchedAt,
              ...(stream ? { stream } : {}),
            },
            // A note of another stream (the feed turned off and on since) is replaced whatever its time.
            ConditionExpression: stream
              ? 'attribute_not_exists(pk) OR seen < :seen OR attribute_not_exists(#stream) OR #stream <> :stream'
              : 'attribute_not_exists(pk) OR seen < :seen',
            ...(stream ? { ExpressionAttributeNames: { '#stream': 'stream' } } : {}),
            ExpressionAttributeValues: { ':seen': touchedAt, ...(stream ? { ':stream': stream } : {}) },
          }),
        ),
      );
    },

    async startedAt() {
      const [item] = await batchGet(client, tableName, [FEED_START_KEY]);
      const start = await ours(item);
      return typeof start?.at === 'string' ? start.at : undefined;
    },

    async append(group) {
      if (group.records.length === 0) return;
      const sequences = group.records.map((r) => r.sequence);
      const first = sequences.reduce((a, b) => (isLaterSequence(a, b) ? b : a));
      const last = sequences.reduce((a, b) => (isLaterSequence(a, b) ? a : b));
      const sk = `${group.newestAt.slice(0, 19)}Z#${first}#${last}${group.label ? `#${group.label}` : ''}`;
      const pk = feedPartition(group.day, group.bucket);
      const records = latestOfEach(group.records);
      const parts = encodedParts(records);
      if (parts.length === 1) await put(pk, sk, parts[0] as Uint8Array, records.length);
      else for (const [n, part] of parts.entries()) await put(pk, `${sk}#p${n}`, part, records.length);
    },

    async recordsOfBucketDay(day, bucket, since) {
      const items = await queryAll(client, {
        TableName: tableName,
        KeyConditionExpression: since ? 'pk = :pk AND sk >= :since' : 'pk = :pk',
        ExpressionAttributeValues: {
          ':pk': feedPartition(day, bucket),
          ...(since ? { ':since': since.slice(0, 19) } : {}),
        },
      });
      // Folded item by item: a day's records are held one item's at a time, the latest of each attempt kept.
      return latestOfEach(
        (function* () {
          for (const item of items) yield* decodeRecords(item.records as Uint8Array);
        })(),
      );
    },

    async attemptsOfSurvey(surveyId, from, to) {
      return (await attemptsOfBucketSpan(feed, feedBucket(surveyId), from, to)).filter(
        (attempt) => attempt.surveyId === surveyId,
      );
    },
  };
  return feed;
}

/** An attempt as a reader of the feed has it, with the time it is filed by (`feedTime`). */
export interface FiledAttempt {
  readonly at: string;
  readonly attempt: Attempt;
}

/**
 * The time a record of a UTC day's item files its attempt by, if it is that day's attempt: a record under a day its
 * attempt left (its filing time moved back) is not, nor an item no reader lists (retired).
 */
export function filedOn(attributes: Item, day: string): string | undefined {
  const at = feedTime(attributes);
  return at !== undefined && utcDay(at) === day && isListed(attributes) ? at : undefined;
}

/**
 * Every attempt of a bucket filed on a UTC day (`filedOn`), from that day's records (those of items changed since
 * `since`, if given): a record under a day its attempt left (its filing time moved back) is not that day's, and an
 * item no reader lists (retired) is left out. Unsorted.
 */
export async function filedAttemptsOfBucketDay(
  feed: Pick<AttemptFeed, 'recordsOfBucketDay'>,
  day: string,
  bucket: number,
  since?: string,
): Promise<FiledAttempt[]> {
  const filed: FiledAttempt[] = [];
  for (const { attributes } of await feed.recordsOfBucketDay(day, bucket, since)) {
    const at = filedOn(attributes, day);
    if (at !== undefined) filed.push({ at, attempt: attemptFromItem(attributes) });
  }
  return filed;
}

/** Every attempt of a bucket filed in [from, to), oldest first: `filedAttemptsOfBucketDay` of each UTC day. */
export async function filedAttemptsOfBucketSpan(
  feed: Pick<AttemptFeed, 'recordsOfBucketDay'>,
  bucket: number,
  from: Date,
  to: Date,
  since?: string,
): Promise<FiledAttempt[]> {
  const fromIso = from.toISOString();
  const toIso = to.toISOString();
  const filed: FiledAttempt[] = [];
  for (const day of utcDaysBetween(from, to))
    for (const f of await filedAttemptsOfBucketDay(feed, day, bucket, since))
      if (f.at >= fromIso && f.at < toIso) filed.push(f);
  return filed.sort((a, b) => a.at.localeCompare(b.at));
}

/** `filedAttemptsOfBucketSpan`'s attempts alone. */
export const attemptsOfBucketSpan = async (
  ...args: Parameters<typeof filedAttemptsOfBucketSpan>
): Promise<Attempt[]> => (await filedAttemptsOfBucketSpan(...args)).map((f) => f.attempt);

/** An attempt item as a feed record keeps it (`feedRecordOf`, its history counted). */
export const feedAttributesOf = (item: Item): Item =>
  feedRecordOf(item, Array.isArray(item.verdictHistory) ? item.verdictHistory.length : 0);
