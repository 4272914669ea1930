/**
 * Rebuilds days of the attempt feed from the attempt items (`ledger rebuild-feed`): each registered survey's
 * attempts of each UTC day, through the day index and batch reads, written as feed records per day and bucket. For
 * the days before the feed began (a stream holds only changes made after it was turned on) and for a batch its
 * consumer set aside after failing too often.
 *
 * A rebuilt record carries the item as it stands and sequence number 0: a reader still takes a later change from
 * the stream over it (more hits, a later sighting), and it over any older record. Written again, a day is written
 * twice (readers fold repeats). Once every registered survey's days from the feed's start back to `from` are
 * rebuilt, the feed's start mark moves back to `from`, so readers trust the feed for those days too.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { runBounded, throwIfFailed } from '../shared/bounded-work';
import {
  createAttemptFeed,
  FEED_START_KEY,
  type FeedRecord,
  feedAttributesOf,
  feedBucket,
  feedTime,
} from './attempt-feed';
import { createLedgerStore, utcDaysBetween } from './attempt-store';
import { batchGet, send } from './document-client';
import { utcDay } from './ledger-schema';
import { createSurveyRegistry } from './survey-registry';

export interface FeedRebuildReport {
  readonly days: number;
  readonly surveys: number;
  readonly attempts: number;
  /** When the feed's start mark was before the run. */
  readonly feedStart: string;
  /** Where the run moved it back to, if it did. */
  readonly startMovedTo?: string;
}

/** Surveys read at once. */
const CONCURRENCY = 4;

export function createFeedRebuild(client: DynamoDBDocumentClient, tableName: string) {
  const store = createLedgerStore(client, tableName);
  const registry = createSurveyRegistry(client, tableName);
  const feed = createAttemptFeed(client, tableName);
  return {
    /**
     * Rebuilds the UTC days [from, to] (YYYY-MM-DD) of every registered survey (live, or ended since `from`), or of
     * the surveys named (which leaves the start mark alone). Throws before writing anything if the feed has no start
     * mark: its consumer has never run (is `attemptFeed` on?).
     */
    async run(options: {
      from: string;
      to: string;
      surveys?: readonly string[];
      dryRun?: boolean;
      now?: Date;
      onDay?: (day: string, attempts: number) => void;
    }): Promise<FeedRebuildReport> {
      const feedStart = await feed.startedAt();
      if (feedStart === undefined)
        throw new Error(
          'the attempt feed has not started: deploy with attemptFeed on and let its consumer run first',
        );
      const surveyIds =
        options.surveys && options.surveys.length > 0
          ? [...new Set(options.surveys)]
          : (await registry.list({ endedSince: `${options.from}T00:00:00.000Z` })).map((r) => r.surveyId);
      const now = (options.now ?? new Date()).toISOString();
      const days = utcDaysBetween(
        new Date(`${options.from}T00:00:00.000Z`),
        new Date(`${options.to}T23:59:59.999Z`),
      );
      let attempts = 0;
      for (const day of days) {
        const start = new Date(`${day}T00:00:00.000Z`);
        // The day's last instant: the index's days of [start, end) would take in the next midnight's day as well.
        const end = new Date(`${day}T23:59:59.999Z`);
        // By the day of each item's filing time (feedTime): the index's own, so the day listed.
        const groups = new Map<string, { day: string; bucket: number; records: FeedRecord[] }>();
        const report = await runBounded(
          surveyIds.map((surveyId) => async () => {
            const keys = await store.attemptKeysOfSurvey(surveyId, start, end);
            const items = await batchGet(
              client,
              tableName,
              keys.map((key) => ({ pk: key.pk, sk: key.sk })),
            );
            const bucket = feedBucket(surveyId);
            for (const item of items) {
              const attributes = feedAttributesOf(item);
              const at = feedTime(attributes);
              if (at === undefined) continue;
              const ofDay = utcDay(at);
              const group = groups.get(`${ofDay}#${bucket}`) ?? { day: ofDay, bucket, records: [] };
              group.records.push({ sequence: '0', attributes });
              groups.set(`${ofDay}#${bucket}`, group);
            }
          }),
          { concurrency: CONCURRENCY },
        );
        throwIfFailed(report);
        let ofDay = 0;
        for (const group of groups.values()) {
          ofDay += group.records.length;
          if (!options.dryRun) await feed.append({ ...group, newestAt: now });
        }
        attempts += ofDay;
        options.onDay?.(day, ofDay);
      }
      // The days rebuilt: the feed's probe is touched again, so a reader that found its consumer behind (a touch lost
      // with a batch set aside) reads the feed again once the consumer notes this one.
      if (!options.dryRun) await feed.touchProbe(now);
      // Every registered survey's days from `from` to the mark's day are in the feed now: readers may trust it there.
      const from = `${options.from}T00:00:00.000Z`;
      let movesStart =
        !options.dryRun && !options.surveys?.length && from < feedStart && options.to >= utcDay(feedStart);
      if (movesStart)
        await send(() =>
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
        ).catch((error: unknown) => {
          if (!(error instanceof ConditionalCheckFailedException)) throw error;
          movesStart = false;
        });
      return {
        days: days.length,
        surveys: surveyIds.length,
        attempts,
        feedStart,
        ...(movesStart ? { startMovedTo: from } : {}),
      };
    },
  };
}

export type FeedRebuild = ReturnType<typeof createFeedRebuild>;
