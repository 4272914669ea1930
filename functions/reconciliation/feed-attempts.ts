/**
 * Reconciliation's reads of a survey's attempts from the attempt feed (ledger/attempt-feed.ts) instead of the day
 * index and a batch read of every attempt: a survey's days come from its bucket's UTC days, each read whole once and
 * kept for the bucket's other surveys (a run takes surveys bucket by bucket, `inReadOrder`), so a scheduled run reads
 * each bucket-day of its window once where the items cost half a read unit per attempt and survey-run.
 *
 * The feed trails the table by up to its lag (the stream's batching window and a margin), and a bucket-day is kept
 * for at most `maxAgeMs`: what a survey reads is the ledger as it stood `lagMs` (both together) before the read, as
 * long as the consumer keeps up. The reconciler lets discrepancies settle that much later, and records its checks
 * as of FEED_LAG_TOLERANCE_MS (an hour) before the run (`asOf`, ReconcilerDeps.attemptsAsOf): a late hit's day is judged
 * again by the runs of the hour after it, so a consumer up to an hour behind cannot make one missed. A span that
 * starts before the feed's start mark (a feed turned on since, not rebuilt back that far) is read from the items,
 * as without a feed, up to `feedOnlyFrom` (the attempts first seen after it are in the feed alone); while the feed's
 * probe says its consumer is behind (FEED_PROBE_UNSEEN_MS), the items are read for what they hold whole, and a span
 * past that is not read: its survey's run fails and the next tries again.
 */

import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { AttemptFeed } from '../ledger/attempt-feed';
import { feedBucket, filedOn } from '../ledger/attempt-feed';
import { attemptFromItem, type LedgerStore, utcDaysBetween } from '../ledger/attempt-store';
import type { Item } from '../ledger/document-client';
import { FEED_CLOCK_MARGIN_MS, FEED_PROBE_UNSEEN_MS, feedOnlyFrom } from '../ledger/feed-keys';
import type { Attempt } from '../receiving/attempt';

export interface FeedAttemptsOptions {
  readonly feed: Pick<AttemptFeed, 'recordsOfBucketDay' | 'state' | 'touchProbe'>;
  /** The readers before the feed's start. */
  readonly items: Pick<LedgerStore, 'attemptsOfSurvey'>;
  /** How far the feed may trail the table (ATTEMPT_FEED_LAG_SECONDS). */
  readonly feedLagMs: number;
  /** How long a bucket-day (and the start mark) read once serves other surveys (default two minutes). */
  readonly maxAgeMs?: number;
  /**
   * Bucket-days kept at once (default 24), the least recently used going first, those older than `maxAgeMs` dropped:
   * every survey of a bucket reads the same nine UTC days of its window (a run takes its surveys bucket by bucket),
   * so two buckets' windows stay while a few days past the window come and go. A bucket-day holds a sixteenth of a
   * day's attempts, deflated: about 3 MB at the cost model's shape (500,000 attempts a day), so 24 hold about 70 MB.
   */
  readonly keptBucketDays?: number;
  readonly now?: () => Date;
  /** Told when the feed is found behind: its probe, touched then, not yet seen by the consumer. */
  readonly onBehind?: (touchedAt: string) => void;
}

/** The feed as a reader finds it (feedAttempts' `readable`). */
interface Readable {
  /** The feed's start mark, once its consumer has noted the probe (absent: the items are read). */
  readonly startedAt?: string;
  /** The latest probe touch the consumer noted: the feed holds every change before it (of the probe's shard). */
  readonly provenTo?: string;
  /** The latest touch, unseen for FEED_PROBE_UNSEEN_MS: the feed is behind. */
  readonly behindSince?: string;
}

/**
 * What one bucket-day read gives: each survey's records filed that day, as JSON lines of `[filing time,
 * attributes]` deflated together (a twentieth of the memory the attempts would take: a bucket-day is held for all its
 * surveys, an attempt is made only for the survey that reads it), and when it was read.
 */
interface BucketDay {
  readonly readAt: number;
  readonly bySurvey: Promise<Map<string, Buffer>>;
}

/**
 * How often the feed's probe is touched at most (a change for the consumer to note): by the reads of reconciliation's
 * runs, so once a run at the hourly schedule.
 */
export const FEED_PROBE_EVERY_MS = 10 * 60_000;

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
  const kept = options.keptBucketDays ?? 24;
  /** The bucket-days read, by `<day>#<bucket>`, the most recently used last. */
  const bucketDays = new Map<string, BucketDay>();
  let state: { readAt: number; read: Promise<Readable> } | undefined;

  /**
   * The feed as a reader finds it, read once per `maxAgeMs`: since when it can be read (undefined: not at all, the
   * items are read), and up to when its probe proves it complete (the latest touch the consumer noted). Not read
   * until the consumer has noted a touch once, nor while the latest touch has gone unseen for FEED_PROBE_UNSEEN_MS
   * (behind, stopped, or the touch lost with a set-aside batch: `ledger rebuild-feed` touches it again). The probe
   * is touched again once its touch is noted, every FEED_PROBE_EVERY_MS at most.
   */
  const readable = () => {
    const at = now().getTime();
    if (!state || at - state.readAt > maxAgeMs) {
      const read = options.feed.state().then(async ({ startedAt, touchedAt, seenAt }): Promise<Readable> => {
        const seen = touchedAt !== undefined && (seenAt ?? '') >= touchedAt;
        const touched = touchedAt === undefined ? undefined : Date.parse(touchedAt);
        // A touch that fails is made by a later read: the feed is judged by the touches it has. Until this stream's
        // consumer has noted one (a feed just turned on, or on again), every read touches it.
        if (touched === undefined || seenAt === undefined || (seen && at - touched > FEED_PROBE_EVERY_MS))
          await options.feed.touchProbe(new Date(at).toISOString()).catch(() => undefined);
        const behind = touched !== undefined && !seen && at - touched > FEED_PROBE_UNSEEN_MS;
        if (behind) options.onBehind?.(touchedAt as string);
        return {
          ...(startedAt !== undefined && seenAt !== undefined ? { startedAt } : {}),
          ...(seenAt !== undefined ? { provenTo: seenAt } : {}),
          ...(behind ? { behindSince: touchedAt } : {}),
        };
      });
      state = { readAt: at, read };
      read.catch(() => {
        if (state?.read === read) state = undefined;
      });
    }
    return state.read;
  };

  /** A bucket's UTC day, each of its surveys' records filed that day: read once, kept while fresh. */
  const bucketDay = (bucket: number, day: string): Promise<Map<string, Buffer>> => {
    const key = `${day}#${bucket}`;
    const at = now().getTime();
    for (const [held, { readAt }] of bucketDays) if (at - readAt > maxAgeMs) bucketDays.delete(held);
    const held = bucketDays.get(key);
    if (held) {
      // Most recently used last.
      bucketDays.delete(key);
      bucketDays.set(key, held);
      return held.bySurvey;
    }
    const bySurvey = options.feed.recordsOfBucketDay(day, bucket).then((records) => {
      const grouped = new Map<string, string[]>();
      for (const { attributes } of records) {
        const filed = filedOn(attributes, day);
        if (filed === undefined) continue;
        const surveyId = String(attributes.surveyId);
        const lines = grouped.get(surveyId) ?? [];
        lines.push(JSON.stringify([filed, attributes]));
        grouped.set(surveyId, lines);
      }
      return new Map(
        [...grouped].map(([surveyId, lines]) => [surveyId, deflateRawSync(lines.join('\n'), { level: 1 })]),
      );
    });
    bucketDays.set(key, { readAt: at, bySurvey });
    while (bucketDays.size > kept) bucketDays.delete(bucketDays.keys().next().value as string);
    // A read that fails is not kept: the next survey reads again.
    bySurvey.catch(() => {
      if (bucketDays.get(key)?.bySurvey === bySurvey) bucketDays.delete(key);
    });
    return bySurvey;
  };

  return {
    /** How far behind the table what a survey reads is: the feed's lag and the longest a bucket-day is kept. */
    lagMs: options.feedLagMs + maxAgeMs,
    /**
     * As of when what a survey reads at `at` is taken to be complete (ReconcilerDeps.attemptsAsOf): the tolerated
     * lag back, or the last touch of the probe the consumer noted if that is earlier (a consumer that stopped since).
     */
    async asOf(at: Date): Promise<Date> {
      // How far behind it may fall before a late hit can be missed: FEED_LAG_TOLERANCE_MS, and a bucket-day's age.
      const tolerated = at.getTime() - Math.max(FEED_LAG_TOLERANCE_MS, options.feedLagMs) - maxAgeMs;
      const { provenTo } = await readable();
      return new Date(provenTo === undefined ? tolerated : Math.min(tolerated, Date.parse(provenTo)));
    },

    /**
     * A survey's attempts filed in [from, to), oldest first, as the day index lists them: from the feed when it
     * began before the span and keeps up, else from the items. The items alone are complete only up to
     * `feedOnlyFrom` (the receivers leave the attempts the feed covers out of the day index: feed-coverage.ts), so
     * a span that reaches past it takes the rest from the feed, and, the feed behind, is not read at all: the
     * survey's run fails (and is retried by the next) rather than judge without attempts it cannot see.
     */
    async attemptsOfSurvey(surveyId: string, from: Date, to: Date): Promise<Attempt[]> {
      const { startedAt, behindSince } = await readable();
      if (startedAt === undefined) return options.items.attemptsOfSurvey(surveyId, from, to);
      if (behindSince === undefined && Date.parse(startedAt) <= from.getTime() - FEED_CLOCK_MARGIN_MS)
        return fromFeed(surveyId, from, to);
      const cut = feedOnlyFrom(startedAt);
      if (to.getTime() <= cut) return options.items.attemptsOfSurvey(surveyId, from, to);
      if (behindSince !== undefined)
        throw new Error(
          `the attempt feed is behind (its probe, touched at ${behindSince}, is not yet noted by its consumer), and attempts first seen since ${new Date(cut).toISOString()} are in it alone: not judged until it catches up`,
        );
      const [before, after] = await Promise.all([
        options.items.attemptsOfSurvey(surveyId, from, new Date(cut)),
        fromFeed(surveyId, new Date(cut), to),
      ]);
      return [...before, ...after];
    },

    /** Surveys in the order that reads each bucket-day once: by bucket, otherwise as given. */
    inReadOrder(surveys: readonly string[]): string[] {
      return surveys
        .map((surveyId, index) => ({ surveyId, index, bucket: feedBucket(surveyId) }))
        .sort((a, b) => a.bucket - b.bucket || a.index - b.index)
        .map((s) => s.surveyId);
    },
  };

  /** A survey's attempts filed in [from, to), oldest first, from the bucket-days kept. */
  async function fromFeed(surveyId: string, from: Date, to: Date): Promise<Attempt[]> {
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
  }
}

export type FeedAttempts = ReturnType<typeof feedAttempts>;
