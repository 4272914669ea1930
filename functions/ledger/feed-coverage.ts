/**
 * Whether the attempt feed covers a hit, so that its attempt may stay out of the day index: the day index's entry
 * is a second write unit on an attempt's first hit (a third of the hit path's writes), and with the feed on every
 * reader of a span's attempts takes those first seen after `feedOnlyFrom` from the feed (reconciliation's
 * feed-attempts.ts, the health check, the CLI's and finance's look-ups through attempt-lookup.ts).
 *
 * The feed covers hits once it has a start mark and its consumer has noted the probe once (`FEED_PROBE_SEEN_KEY`):
 * before that, reconciliation reads the items (feed-attempts.ts), so every attempt must be indexed. The receivers
 * read both once per container without holding up a hit (the container's first hits are indexed while the read is
 * under way), again every `recheckMs` while the feed does not cover them yet or the read failed, and keep a found
 * start for the container's life: for one stream the mark only moves back (`ledger rebuild-feed`), and a container
 * that keeps an older, later start indexes a few attempts more than it needs to. A feed turned off and on again is
 * another stream, whose consumer marks the start anew: only a mark and a note of the table's stream as deployed
 * (`stream`, the receivers' ATTEMPT_FEED_STREAM) cover, so a container started before the new consumer's first
 * batch does not take the earlier stream's start for this one's.
 */
import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { send } from './document-client';
import { FEED_PROBE_SEEN_KEY, FEED_START_KEY, feedOnlyFrom, isNoteOf } from './feed-keys';

export interface FeedCoverage {
  /** Whether an attempt first seen at `at` may stay out of the day index. */
  covers(at: Date): boolean;
  /** The read under way (tests, and a caller that would rather wait). */
  settled(): Promise<void>;
}

export function feedCoverage(
  client: DynamoDBDocumentClient,
  tableName: string,
  options: {
    now?: () => Date;
    recheckMs?: number;
    /** The table's stream ARN (ATTEMPT_FEED_STREAM): only a feed marked for it covers. */
    stream?: string | undefined;
  } = {},
): FeedCoverage {
  const now = options.now ?? (() => new Date());
  const recheckMs = options.recheckMs ?? 10 * 60_000;
  let from: number | undefined;
  let readAt = Number.NEGATIVE_INFINITY;
  let reading: Promise<void> = Promise.resolve();

  const read = async () => {
    const get = (Key: { pk: string; sk: string }) =>
      send(() => client.send(new GetCommand({ TableName: tableName, Key }))).then(({ Item }) => Item);
    const [start, seen] = await Promise.all([get(FEED_START_KEY), get(FEED_PROBE_SEEN_KEY)]);
    // This stream's feed (the table's, as deployed): a mark or note an earlier stream left (the feed turned off and
    // on again) covers nothing until this stream's consumer has marked and noted its own.
    const ours = options.stream === undefined || start?.stream === options.stream;
    if (
      ours &&
      typeof start?.at === 'string' &&
      !Number.isNaN(Date.parse(start.at)) &&
      typeof seen?.seen === 'string' &&
      isNoteOf(seen, start)
    )
      from = feedOnlyFrom(start.at);
  };
  const check = () => {
    const at = now().getTime();
    if (at - readAt < recheckMs) return;
    readAt = at;
    // A failed read leaves every hit indexed until the next one.
    reading = read().catch(() => undefined);
  };
  check();

  return {
    covers(at) {
      if (from === undefined) check();
      return from !== undefined && at.getTime() >= from;
    },
    settled: () => reading,
  };
}
