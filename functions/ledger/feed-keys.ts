/**
 * The attempt feed's fixed keys and the rules every writer and reader of the ledger shares about it, in a module of
 * its own: the receivers ask whether the feed covers their hits (feed-coverage.ts) without bundling the feed itself
 * (attempt-feed.ts).
 */
import { ATTEMPT_PARTITION_PREFIX } from './ledger-schema';

/** What every feed item's partition key starts with. */
export const FEED_PARTITION_PREFIX = 'FEED#';

/**
 * The feed's format, in its keys: the first release's records held no verdicts and left reconciliation's own items
 * out, so a feed it kept is read by no reader of this one. Turned on again, the consumer begins this format's feed
 * and marks its start anew; the older items stay (a few dozen bytes an attempt) until deleted by hand.
 */
export const FEED_FORMAT = 'v2';

/**
 * The item that says since when the feed holds every change: the time the consumer first wrote (every change after
 * it reaches this format's feed; one before it may have reached only an earlier release's), and the stream it came
 * from. A reader of a span that starts before it reads the attempt items instead. A stream turned off and on again
 * is another stream, whose first batch marks the start anew: the changes in between are in no feed.
 */
export const FEED_START_KEY = { pk: `${FEED_PARTITION_PREFIX}START`, sk: `START#${FEED_FORMAT}` } as const;

/**
 * The feed's probe: an item in the attempts' key space (the stream's filter lets its changes through, and no survey
 * is keyed so) that a reader touches now and then (`touchedAt`), and the consumer's note of the latest touch it has
 * written past (`FEED_PROBE_SEEN_KEY`). A touch long unseen says the consumer is behind or stopped whatever the
 * traffic: a consumer that keeps up with nothing to deliver is as silent as one that stopped.
 */
export const FEED_PROBE_KEY = { pk: `${ATTEMPT_PARTITION_PREFIX}~feed-probe`, sk: 'PROBE' } as const;
export const FEED_PROBE_SEEN_KEY = {
  pk: `${FEED_PARTITION_PREFIX}PROBE`,
  sk: `SEEN#${FEED_FORMAT}`,
} as const;

/**
 * How much earlier than a span a feed read starts, or the feed's start mark must be: a feed item is keyed by the
 * stream's time of its newest change (rounded down, DynamoDB's clock), an attempt's first sighting by the
 * receiver's clock. Minutes, not seconds: the read costs a few more batches' records, and the stream's time has been
 * seen rounded to the minute.
 */
export const FEED_CLOCK_MARGIN_MS = 5 * 60_000;

/**
 * How long after the feed's start an attempt's first sighting must be for its hit to leave it out of the day index
 * (`feedOnlyFrom`): readers take a span's attempts first seen before then from the day index, which holds every one
 * of them, and those after it from the feed. An hour, not the clock margin: the health check reads a half-hour
 * window wholly from the items or wholly from the feed (the feed once it began before the window), and the items'
 * reading is complete only for spans that end before it.
 */
export const FEED_ONLY_AFTER_MS = 3_600_000;

/** From when (epoch milliseconds) attempts may be in the feed alone, for a feed that started at `startedAt`. */
export const feedOnlyFrom = (startedAt: string): number => Date.parse(startedAt) + FEED_ONLY_AFTER_MS;

/**
 * Whether the probe's note `seen` belongs to the feed that `start` marks: noted by a consumer of the same stream. A
 * note an earlier release wrote (no stream) is taken as the start's stream's only if it was made after the start was
 * marked (a stream turned on again since marks a later start); a mark without a stream (a test) takes any note.
 */
export const isNoteOf = (
  seen: Record<string, unknown> | undefined,
  start: Record<string, unknown> | undefined,
): boolean => {
  if (seen === undefined) return false;
  if (typeof start?.stream !== 'string') return true;
  if (typeof seen.stream === 'string') return seen.stream === start.stream;
  return typeof start.at === 'string' && typeof seen.seen === 'string' && start.at <= seen.seen;
};

/**
 * A probe touch the consumer has not noted for this long: the feed is behind (or its consumer stopped), and it is
 * not read until it catches up (reconciliation reads the items for what they hold whole, feed-attempts.ts; the
 * health check judges no survey). The reconciliation runs before that judge as of the last touch it noted (`asOf`),
 * so a late hit they may not see keeps its flag for a run that reads it.
 */
export const FEED_PROBE_UNSEEN_MS = 30 * 60_000;

/**
 * How far the feed may trail the table by default, in seconds: the stack's batching window of the stream (five
 * minutes) and a margin (two). The readers judge as of that long ago (ATTEMPT_FEED_LAG_SECONDS; the stack sets it).
 */
export const DEFAULT_FEED_LAG_SECONDS = 420;
