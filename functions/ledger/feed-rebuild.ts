/**
 * Rebuilds days of the attempt feed from the attempt items (`ledger rebuild-feed`): every attempt item filed on the
 * UTC days asked for, found by a parallel Scan of the table (the day index does not hold the attempts the feed
 * covers: feed-coverage.ts; attempt-scan.ts), written as feed records per day and bucket. For the days before the
 * feed began (a stream holds only changes made after it was turned on) and for a batch its consumer set aside after
 * failing too often.
 *
 * A rebuilt record carries the item as it stands and sequence number 0: a reader still takes a later change from
 * the stream over it (more hits, a later sighting), and it over any older record. Written again, a day is written
 * twice (readers fold repeats). Once every survey's days from the feed's start back to `from` are rebuilt, the
 * feed's start mark moves back to `from`, so readers trust the feed for those days too.
 */
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { createAttemptFeed, type FeedRecord, feedAttributesOf, feedBucket, feedTime } from './attempt-feed';
import { scanAttemptItems } from './attempt-scan';
import { utcDaysBetween } from './attempt-store';
import { conditionally, type Item } from './document-client';
import { FEED_START_KEY } from './feed-keys';
import { utcDay } from './ledger-schema';

export interface FeedRebuildReport {
  readonly days: number;
  readonly surveys: number;
  readonly attempts: number;
  /** When the feed's start mark was before the run. */
  readonly feedStart: string;
  /** Where the run moved it back to, if it did. */
  readonly startMovedTo?: string;
}

/**
 * Records gathered per day and bucket before they are written as one item (about 20 KB compressed, 0.1 write units
 * a record); what is held at once is bounded by that times the days and buckets asked for.
 */
const RECORDS_PER_ITEM = 200;

export function createFeedRebuild(client: DynamoDBDocumentClient, tableName: string) {
  const feed = createAttemptFeed(client, tableName);
  return {
    /**
     * Rebuilds the UTC days [from, to] (YYYY-MM-DD) of every survey's attempts, or of the surveys named (which
     * leaves the start mark alone). Throws before writing anything if the feed has no start mark: its consumer has
     * never run (is `attemptFeed` on?).
     */
    async run(options: {
      from: string;
      to: string;
      surveys?: readonly string[];
      dryRun?: boolean;
      now?: Date;
      onDay?: (day: string, attempts: number) => void;
      /** Items read per Scan page (tests; default DynamoDB's 1 MB page). */
      pageSize?: number;
    }): Promise<FeedRebuildReport> {
      const feedStart = await feed.startedAt();
      if (feedStart === undefined)
        throw new Error(
          'the attempt feed has not started: deploy with attemptFeed on and let its consumer run first',
        );
      const named = options.surveys && options.surveys.length > 0 ? new Set(options.surveys) : undefined;
      const now = (options.now ?? new Date()).toISOString();
      const perDay = new Map<string, number>();
      const surveys = new Set<string>();
      /**
       * The attempts of the days asked for, by the day of their filing time (feedTime) and bucket, gathered across
       * the Scan's pages and written a group at a time once it holds RECORDS_PER_ITEM (the rest at the end): a page
       * spreads over every day and bucket, and an item per page and group would pay a write unit for about one record.
       */
      const groups = new Map<string, { day: string; bucket: number; records: FeedRecord[] }>();
      let chunks = 0;
      const write = async (key: string) => {
        const group = groups.get(key);
        groups.delete(key);
        // Each chunk its own sort key: they share the run's time and sequence numbers (0).
        if (group && !options.dryRun) await feed.append({ ...group, newestAt: now, label: `r${++chunks}` });
      };
      const rebuildPage = async (items: readonly Item[]) => {
        const full: string[] = [];
        for (const item of items) {
          if (typeof item.surveyId !== 'string' || (named && !named.has(item.surveyId))) continue;
          const read = feedAttributesOf(item);
          // A pid pointer set before pointers kept their time: dated by this read, so that the image read from the
          // item outranks a stream image from before it (attempt-feed.ts `isLaterRecord`).
          const attributes =
            typeof read.arrivedAs === 'string' && read.arrivedAt === undefined
              ? { ...read, arrivedAt: now }
              : read;
          const at = feedTime(attributes);
          if (at === undefined) continue;
          const day = utcDay(at);
          if (day < options.from || day > options.to) continue;
          const bucket = feedBucket(item.surveyId);
          const key = `${day}#${bucket}`;
          const group = groups.get(key) ?? { day, bucket, records: [] };
          group.records.push({ sequence: '0', attributes });
          groups.set(key, group);
          if (group.records.length === RECORDS_PER_ITEM) full.push(key);
          perDay.set(day, (perDay.get(day) ?? 0) + 1);
          surveys.add(item.surveyId);
        }
        for (const key of full) await write(key);
      };
      await scanAttemptItems(
        client,
        tableName,
        rebuildPage,
        options.pageSize ? { pageSize: options.pageSize } : {},
      );
      for (const key of [...groups.keys()]) await write(key);
      const days = utcDaysBetween(
        new Date(`${options.from}T00:00:00.000Z`),
        new Date(`${options.to}T23:59:59.999Z`),
      );
      for (const day of days) options.onDay?.(day, perDay.get(day) ?? 0);
      const attempts = [...perDay.values()].reduce((sum, n) => sum + n, 0);
      // The days rebuilt: the feed's probe is touched again, so a reader that found its consumer behind (a touch lost
      // with a batch set aside) reads the feed again once the consumer notes this one.
      if (!options.dryRun) await feed.touchProbe(now);
      // Every survey's days from `from` to the mark's day are in the feed now: readers may trust it there.
      const from = `${options.from}T00:00:00.000Z`;
      const movesStart =
        !options.dryRun &&
        !named &&
        from < feedStart &&
        options.to >= utcDay(feedStart) &&
        (await conditionally(() =>
          client.send(
            new UpdateCommand({
              TableName: tableName,
              Key: FEED_START_KEY,
              // The same stream's mark: one a new stream set meanwhile (the feed turned off and on) is left alone.
              UpdateExpression: 'SET #at = :from, rebuiltAt = :now',
              ConditionExpression: '#at = :was',
              ExpressionAttributeNames: { '#at': 'at' },
              ExpressionAttributeValues: { ':from': from, ':now': now, ':was': feedStart },
            }),
          ),
        ));
      return {
        days: days.length,
        surveys: surveys.size,
        attempts,
        feedStart,
        ...(movesStart ? { startMovedTo: from } : {}),
      };
    },
  };
}

export type FeedRebuild = ReturnType<typeof createFeedRebuild>;
