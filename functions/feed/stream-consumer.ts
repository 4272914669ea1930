/**
 * Keeps the attempt feed (ledger/attempt-feed.ts) from the ledger table's stream: each batch's changes of attempts
 * grouped by the UTC day of their first sighting and their survey's bucket, one feed item per group.
 *
 * A change that leaves the feed's attributes as they were (a repeated request id remembered) is left out; a verdict
 * written is kept, as the readers judge attempts by their verdicts too. A group whose write fails makes
 * the batch report its earliest change as failed, so Lambda sends the batch again from there; the groups written
 * meanwhile are written again (the feed keeps an attempt's latest record, whatever repeats).
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import {
  type AttemptFeed,
  FEED_ATTRIBUTES,
  type FeedRecord,
  feedBucket,
  feedRecordOf,
  feedTime,
  isLaterSequence,
} from '../ledger/attempt-feed';
import { type Item, StoreUnavailable } from '../ledger/document-client';
import { FEED_PROBE_KEY } from '../ledger/feed-keys';
import { ATTEMPT_PARTITION_PREFIX, utcDay } from '../ledger/ledger-schema';
import { runBounded } from '../shared/bounded-work';

export interface StreamConsumerDependencies {
  readonly feed: Pick<AttemptFeed, 'append' | 'markStart' | 'probeSeen'>;
  /** Groups written at once. */
  readonly concurrency?: number;
  /** The consumer's clock (the feed's start is marked at its time). */
  readonly now?: () => Date;
  /** Told when the probe's touch could not be noted (the batch is sent again from the touch). */
  readonly onFailedProbe?: (error: unknown) => void;
  /** Told of each group whose write failed (the batch is sent again from its earliest change). */
  readonly onFailedGroup?: (group: { day: string; bucket: number; records: number }, error: unknown) => void;
  /** How the consumer waits out a ledger that is down before the batch is sent again (default: a timer). */
  readonly sleep?: (ms: number) => Promise<void>;
}

/**
 * How long a batch whose writes all failed for the ledger being unavailable waits before it is handed back: Lambda
 * sends a failed batch again at once, so without a wait its retries (FEED_RETRY_ATTEMPTS) would be spent in minutes
 * of an outage and the batch set aside, its attempts then in no reader's view until `ledger rebuild-feed`. Within
 * the function's 60 s.
 */
export const LEDGER_DOWN_WAIT_MS = 30_000;
const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** What a batch did: for the function's log and metrics. */
export interface ConsumedBatch {
  readonly changes: number;
  readonly recorded: number;
  readonly groups: number;
  readonly failedGroups: number;
}

/** What a record takes from an image besides `FEED_ATTRIBUTES`: the day index's filing time (feedRecordOf). */
const IMAGE_ATTRIBUTES = [...FEED_ATTRIBUTES, 'gsi1sk'];

/**
 * A feed record's attributes of a stream record's image (the event's images are in DynamoDB's typed JSON). Only
 * those are converted, and the verdict's history only counted: an attribute the feed does not keep can never fail
 * the batch.
 */
function imageOf(image: Record<string, unknown> | undefined): Item | undefined {
  if (!image) return undefined;
  const kept: Record<string, AttributeValue> = {};
  for (const name of IMAGE_ATTRIBUTES)
    if (image[name] !== undefined) kept[name] = image[name] as AttributeValue;
  const history = (image.verdictHistory as { L?: unknown } | undefined)?.L;
  return feedRecordOf(unmarshall(kept) as Item, Array.isArray(history) ? history.length : 0);
}

const sameAttributes = (a: Item, b: Item) => JSON.stringify(a) === JSON.stringify(b);

interface Grouped {
  day: string;
  bucket: number;
  newestAt: number;
  records: FeedRecord[];
  /** The earliest change assigned to the group, kept or folded away: where a retry must start. */
  earliest: string;
}

/** The changes of a batch that the feed keeps, grouped by day and bucket. */
export function groupChanges(records: readonly DynamoDBRecord[]): Grouped[] {
  const groups = new Map<string, Grouped>();
  for (const record of records) {
    const change = record.dynamodb;
    const sequence = change?.SequenceNumber;
    const pk = change?.Keys?.pk?.S;
    if (!change || !sequence || !pk?.startsWith(ATTEMPT_PARTITION_PREFIX) || record.eventName === 'REMOVE')
      continue;
    const after = imageOf(change.NewImage);
    if (!after) continue;
    const attributes = after;
    const previous = imageOf(change.OldImage);
    if (previous && sameAttributes(previous, attributes)) continue;
    // Filed where the day index files the item, and where it was filed before if that moved (a first sighting
    // moved back by a drained hit; an item retired, no longer indexed): the day it left learns so too. An item with
    // no time to file it by was never listed by any reader.
    const days = new Set(
      [feedTime(attributes), previous && feedTime(previous)]
        .filter((at): at is string => at !== undefined)
        .map(utcDay),
    );
    if (days.size === 0 || typeof attributes.surveyId !== 'string') continue;
    const bucket = feedBucket(attributes.surveyId);
    const at = (change.ApproximateCreationDateTime ?? 0) * 1000;
    for (const day of days) {
      const key = `${day}#${bucket}`;
      const group = groups.get(key) ?? { day, bucket, newestAt: at, records: [], earliest: sequence };
      group.records.push({ sequence, attributes });
      group.newestAt = Math.max(group.newestAt, at);
      if (isLaterSequence(group.earliest, sequence)) group.earliest = sequence;
      groups.set(key, group);
    }
  }
  return [...groups.values()];
}

/**
 * The feed probe's latest touch among a batch's changes (FEED_PROBE_KEY) that comes before `before` (a sequence
 * number: the batch's retry starts there, so everything before it is written), with its sequence number.
 */
function latestProbeTouch(records: readonly DynamoDBRecord[], before?: string) {
  let latest: { touchedAt: string; sequence: string } | undefined;
  for (const record of records) {
    const change = record.dynamodb;
    const touchedAt = change?.NewImage?.touchedAt?.S;
    const sequence = change?.SequenceNumber;
    if (change?.Keys?.pk?.S !== FEED_PROBE_KEY.pk || !touchedAt || !sequence) continue;
    if (before !== undefined && !isLaterSequence(before, sequence)) continue;
    if (!latest || touchedAt > latest.touchedAt) latest = { touchedAt, sequence };
  }
  return latest;
}

export function createStreamConsumer(deps: StreamConsumerDependencies) {
  // Once a container has seen the feed's start marked for its stream (or marked it), it does not try again.
  let startMarked = false;
  return async (event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse & { consumed: ConsumedBatch }> => {
    const groups = groupChanges(event.Records);
    // Any batch marks it, one that holds only the probe's touch too: a feed turned on again has readers touching the
    // probe before the first attempt changes.
    const sleep = deps.sleep ?? wait;
    if (!startMarked && (groups.length > 0 || latestProbeTouch(event.Records) !== undefined)) {
      // Before any of the batch is written: a reader trusts the feed only from the mark on. Marked at this
      // invocation's time, not its first change's: a change of another shard that an earlier release's consumer
      // took (into its own format's keys) was made before it, whatever this batch holds. A failure fails the batch,
      // which Lambda sends again.
      await deps.feed
        .markStart((deps.now?.() ?? new Date()).toISOString(), event.Records[0]?.eventSourceARN ?? '')
        .catch(async (error: unknown) => {
          if (error instanceof StoreUnavailable) await sleep(LEDGER_DOWN_WAIT_MS);
          throw error;
        });
      startMarked = true;
    }
    const report = await runBounded(
      groups.map(
        (group) => () =>
          deps.feed.append({
            day: group.day,
            bucket: group.bucket,
            newestAt: new Date(group.newestAt).toISOString(),
            records: group.records,
          }),
      ),
      { concurrency: deps.concurrency ?? 8 },
    );
    let retryFrom: string | undefined;
    report.results.forEach((result, index) => {
      if (result.status === 'done') return;
      const group = groups[index] as Grouped;
      deps.onFailedGroup?.(
        { day: group.day, bucket: group.bucket, records: group.records.length },
        result.status === 'failed' ? result.error : new Error('not started'),
      );
      if (retryFrom === undefined || isLaterSequence(retryFrom, group.earliest)) retryFrom = group.earliest;
    });
    // The probe's latest touch before where the batch is sent again (Lambda keeps everything before the earliest
    // failure as done, so a touch there is never sent again): the changes before it on its shard are in the feed.
    // A note that fails sends the batch again from the touch.
    // Every write refused for the ledger being down: waited out a while, not handed straight back.
    const failed = report.results.flatMap((result) => (result.status === 'failed' ? [result.error] : []));
    if (
      failed.length > 0 &&
      report.results.every((result) => result.status !== 'done') &&
      failed.every((error) => error instanceof StoreUnavailable)
    )
      await sleep(LEDGER_DOWN_WAIT_MS);
    const probe = latestProbeTouch(event.Records, retryFrom);
    if (probe)
      await deps.feed.probeSeen(probe.touchedAt, event.Records[0]?.eventSourceARN).catch((error: unknown) => {
        deps.onFailedProbe?.(error);
        if (retryFrom === undefined || isLaterSequence(retryFrom, probe.sequence)) retryFrom = probe.sequence;
      });
    return {
      batchItemFailures: retryFrom === undefined ? [] : [{ itemIdentifier: retryFrom }],
      consumed: {
        changes: event.Records.length,
        recorded: groups.reduce((sum, g) => sum + g.records.length, 0),
        groups: groups.length,
        failedGroups: report.results.filter((r) => r.status !== 'done').length,
      },
    };
  };
}
