/**
 * Reconciliation's reads of a survey's attempts from the attempt feed (ledger/attempt-feed.ts) instead of the day
 * index and a batch read of every attempt: a survey's days come from its bucket's UTC days, each read whole once and
 * kept for the bucket's other surveys (a run takes surveys bucket by bucket, `inReadOrder`), so a scheduled run reads
 * each bucket-day of its window once where the items cost half a read unit per attempt and survey-run.
 *
 * The feed trails the table by up to its lag (the stream's batching window and a margin), and a bucket-day is kept
 * for at most `maxAgeMs`: what a survey reads is the ledger as it stood `lagMs` (both together) before the read, as
 * long as the consumer keeps up. The reconciler lets discrepancies settle that much later, and records its checks
 * as of `toleranceMs` (an hour) before the run (ReconcilerDeps.attemptsLagToleranceMs): a late hit's day is judged
 * again by the runs of the hour after it, so a consumer up to an hour behind cannot make one missed. A span that
 * starts before the feed's start mark (a feed turned on since, not rebuilt back that far) is read from the items,
 * as without a feed.
 */

import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { AttemptFeed } from '../ledger/attempt-feed';
import { FEED_CLOCK_MARGIN_MS, feedBucket, feedTime, isListed } from '../ledger/attempt-feed';
import { attemptFromItem, type LedgerStore, utcDaysBetween } from '../ledger/attempt-store';
import type { Item } from '../ledger/document-client';
import { utcDay } from '../ledger/ledger-schema';
import type { Attempt } from '../receiving/attempt';

export interface FeedAttemptsOptions {
  readonly feed: Pick<AttemptFeed, 'recordsOfBucketDay' | 'startedAt'>;
  /** The readers before the feed's start. */
  readonly items: Pick<LedgerStore, 'attemptsOfSurvey'>;
  /** How far the feed may trail the table (ATTEMPT_FEED_LAG_SECONDS). */
  readonly feedLagMs: number;
  /** How long a bucket-day (and the start mark) read once serves other surveys (default two minutes). */
  readonly maxAgeMs?: number;
  /**
   * Buckets whose days are kept at once (default 2: the run takes its surveys bucket by bucket, so the surveys in hand
   * are of one bucket or two); the least recently used bucket goes first, all its days together (a survey's window
   * touches nine UTC days, read in the same order by every survey of the bucket). A bucket-day holds a sixteenth of
   * a day's attempts, deflated: about 3 MB at the cost model's shape (500,000 attempts a day).
   */
  readonly keptBuckets?: number;
  readonly now?: () => Date;
}

/**
 * What one bucket-day read gives: each survey's records filed that day, as JSON lines of `[filing time,
 * attributes]` deflated together (a tenth of the memory the attempts would take: a bucket-day is held for all its
 * surveys, an attempt is made only for the survey that reads it), and when it was read.
 */
interface BucketDay {
  readonly readAt: number;
  readonly bySurvey: Promise<Map<string, Buffer>>;
}

/**
 * How far behind the feed may fall before reconciliation can miss a late hit: an hour, four times the
 * `attempt-feed-behind` alarm's threshold. A run records its checks as of then, so a day a late hit flagged is
 * judged by every run of the hour after the hit, the last of them reading a feed that holds it unless the consumer
 * is further behind than that (the alarm has long fired; README, The attempt feed).
 */
export const FEED_LAG_TOLERANCE_MS = 3_600_000;

export function feedAttempts(options: FeedAttemptsOptions) {
  const now = options.now ?? (() => new Date());
  const maxAgeMs = options.maxAgeMs ?? 120_000;
  const kept = options.keptBuckets ?? 2;
  /** Each bucket's days read, the most recently used bucket last. */
  const buckets = new Map<number, Map<string, BucketDay>>();
  let start: { readAt: number; at: Promise<string | undefined> } | undefined;

  const startedAt = () => {
    const at = now().getTime();
    if (!start || at - start.readAt > maxAgeMs) {
      const read = options.feed.startedAt();
      start = { readAt: at, at: read };
      read.catch(() => {
        if (start?.at === read) start = undefined;
      });
    }
    return start.at;
  };

  /** A bucket's UTC day, each of its surveys' records filed that day: read once, kept while fresh. */
  const bucketDay = (bucket: number, day: string): Promise<Map<string, Buffer>> => {
    const at = now().getTime();
    const days = buckets.get(bucket) ?? new Map<string, BucketDay>();
    // Most recently used last; the least recently used buckets beyond `kept` go, with all their days.
    buckets.delete(bucket);
    buckets.set(bucket, days);
    while (buckets.size > kept) buckets.delete(buckets.keys().next().value as number);
    const held = days.get(day);
    if (held && at - held.readAt <= maxAgeMs) return held.bySurvey;
    const bySurvey = options.feed.recordsOfBucketDay(day, bucket).then((records) => {
      const grouped = new Map<string, string[]>();
      for (const { attributes } of records) {
        const filed = feedTime(attributes);
        // Kept as attemptsOfBucketSpan keeps them: filed this day, an attempt a reader lists.
        if (filed === undefined || utcDay(filed) !== day || !isListed(attributes)) continue;
        const surveyId = String(attributes.surveyId);
        const lines = grouped.get(surveyId) ?? [];
        lines.push(JSON.stringify([filed, attributes]));
        grouped.set(surveyId, lines);
      }
      return new Map(
        [...grouped].map(([surveyId, lines]) => [surveyId, deflateRawSync(lines.join('\n'), { level: 1 })]),
      );
    });
    days.set(day, { readAt: at, bySurvey });
    // A read that fails is not kept: the next survey reads again.
    bySurvey.catch(() => {
      if (days.get(day)?.bySurvey === bySurvey) days.delete(day);
    });
    return bySurvey;
  };

  return {
    /** How far behind the table what a survey reads is: the feed's lag and the longest a bucket-day is kept. */
    lagMs: options.feedLagMs + maxAgeMs,
    /** How far behind it may fall before a late hit can be missed (FEED_LAG_TOLERANCE_MS, or the lag if longer). */
    toleranceMs: Math.max(FEED_LAG_TOLERANCE_MS, options.feedLagMs + maxAgeMs),

    /**
     * A survey's attempts filed in [from, to), oldest first, as the day index lists them: from the feed when it
     * began before the span, else from the items.
     */
    async attemptsOfSurvey(surveyId: string, from: Date, to: Date): Promise<Attempt[]> {
      const started = await startedAt();
      if (started === undefined || Date.parse(started) > from.getTime() - FEED_CLOCK_MARGIN_MS)
        return options.items.attemptsOfSurvey(surveyId, from, to);
      const bucket = feedBucket(surveyId);
      const fromIso = from.toISOString();
      const toIso = to.toISOString();
      const days = await Promise.all(utcDaysBetween(from, to).map((day) => bucketDay(bucket, day)));
      return days
        .flatMap((bySurvey) => {
          const held = bySurvey.get(surveyId);
          return held ? inflateRawSync(held).toString('utf8').split('\n') : [];
        })
        .map((line) => JSON.parse(line) as [string, Item])
        .filter(([at]) => at >= fromIso && at < toIso)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([, attributes]) => attemptFromItem(attributes));
    },

    /** Surveys in the order that reads each bucket-day once: by bucket, otherwise as given. */
    inReadOrder(surveys: readonly string[]): string[] {
      return surveys
        .map((surveyId, index) => ({ surveyId, index, bucket: feedBucket(surveyId) }))
        .sort((a, b) => a.bucket - b.bucket || a.index - b.index)
        .map((s) => s.surveyId);
    },
  };
}

export type FeedAttempts = ReturnType<typeof feedAttempts>;
