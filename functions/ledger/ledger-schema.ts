/**
 * The single-table layout of the ledger: key attributes, the index, and how each kind of item is keyed.
 * Shared by the store, the CDK stack and the local engine so the three cannot drift apart.
 *
 * | item            | pk                       | sk                           | gsi1pk                        | gsi1sk                   |
 * |-----------------|--------------------------|------------------------------|-------------------------------|--------------------------|
 * | attempt         | ATTEMPT#<surveyId>#<pid> | TOKEN#<token>                | ATTEMPTS#<utc day>#<surveyId>[#<shard>] | <firstSeenAt>  |
 * | rejected hits   | REJECTED#<utc day>       | <utc minute>#<code>#<source> | -                       | -                        |
 * | refused postbacks | REJECTED#<utc day>     | <utc minute>#postback#<code>#<surveyId>#<source> | -   | -                        |
 * | survey registry | SURVEY#<surveyId>        | REDIRECTS                    | SURVEYS                 | <surveyId>               |
 * |  (closed/removed)|                          |                              | SURVEYS#ENDED           | <ended at>#<surveyId>    |
 * | checkpoint      | CHECKPOINT#<name>        | CHECKPOINT                   | -                       | -                        |
 * | day summary     | SUMMARY#<surveyId>       | DAY#<pacific day>            | SUMMARIES#<pacific day> | <surveyId>               |
 * | flagged days    | SUMMARY#<surveyId>       | FLAGS                        | -                       | -                        |
 * | reconciliation  | SURVEY#<surveyId>        | RECONCILIATION               | -                       | -                        |
 * | run state       | RUN#<name>               | STATE                        | -                       | -                        |
 * | finished run    | RUN#<name>               | FINISHED                     | -                       | -                        |
 * | run's surveys   | RUN#<name>               | SURVEYS#<runId>#<n>          | -                       | -                        |
 * | survey health   | HEALTH#<surveyId>        | STATE                        | -                       | -                        |
 * | notice claim    | HEALTH#<surveyId>        | NOTICE#<revision>            | -                       | -                        |
 * | attempt feed    | FEED#v2#<utc day>#<bucket> | <newest change>#<first seq>#<last seq> | -           | -                        |
 *
 * `<pid>` and `<token>` in keys are `keyPart`-escaped (`%` and `#` percent-escaped; nothing else changes); one too long
 * for its key is keyed by its digest instead (`keyId`).
 *
 * Refused hits are counted: one item per source address, refusal code and UTC minute (`YYYY-MM-DDTHH:MM`), holding
 * the first hit as a sample and a `hits` counter. Items written before that have sk `<at>#<request id>`, one hit
 * each; they are read the same way and expire like the rest. Refused postbacks are counted the same way with the
 * survey they claimed in the key too (`postback` marks them; it is no refusal code, so the two never collide), so the
 * health check counts them per survey; a malformed survey id is kept as `-`. The sort key starts with the minute,
 * so a time range of refusals is one key-range Query per UTC day.
 *
 * A day summary may carry `ledgerChangedAt`: a late hit changed an attempt judged for that day after it was
 * checked (judged-day-flag.ts), so the next scheduled run reconciles it. A day no run has summarized yet may hold
 * the flag alone (`kind` `day-flag`, no `here` figures), which readers take for no summary.
 *
 * The attempt feed (with the `attemptFeed` setting) is written by the table stream's consumer alone: its keys and
 * records are attempt-feed.ts's.
 *
 * A survey's health item holds its current health state, since when, the reasons and the last 20 transitions;
 * it is written only when the state or its reasons change.
 *
 * `gsi2` is sparse: only attempts whose reconciliation verdict is a discrepancy carry its keys,
 * gsi2pk `DISCREPANCIES#<pacific day>` and gsi2sk `<surveyId>#<verdict>#<token>`.
 *
 * `gsi1` projects keys only and its keys never change after an item is created, so only an attempt's first
 * hit writes to it: duplicates and later hits cost one table write unit and nothing in the index. The one
 * exception: a hit drained from the buffer that was made before the attempt's first sighting moves `firstSeenAt`
 * and these keys back to when it was made (attempt-store.ts `firstSeenBack`). With the attempt feed, an attempt
 * the feed covers carries no `gsi1` keys at all (feed-coverage.ts): its readers find it in the feed.
 *
 * An attempt's day-index partition is its survey's UTC day, one of DAY_INDEX_SHARDS by its key (shard 0 keeps the
 * unsuffixed name), so new attempts spread over four partitions per survey and day (each takes up to 1,000 index
 * writes a second) instead of all landing in one partition per day, which capped the whole table at about 1,000
 * new attempts a second, or in one per survey and day, which capped a survey's launch at that. Attempts written before carry the day-wide
 * `ATTEMPTS#<utc day>` with gsi1sk `<surveyId>#<firstSeenAt>` (`legacyAttemptDayPartition`); their keys never
 * change, so the readers query both until `npm run cli -- ledger backfill-day-index` has moved them to their
 * survey's partition (day-index-backfill.ts) and left the `DAY_INDEX_BACKFILLED` checkpoint. The survey moved from
 * the sort key into the partition key, so an attempt is no larger than before.
 */

import { createHash } from 'node:crypto';

export const LEDGER = {
  partitionKey: 'pk',
  sortKey: 'sk',
  index: { name: 'gsi1', partitionKey: 'gsi1pk', sortKey: 'gsi1sk' },
  discrepancyIndex: { name: 'gsi2', partitionKey: 'gsi2pk', sortKey: 'gsi2sk' },
  timeToLive: 'expiresAt',
} as const;

/** UTC calendar day of an ISO-8601 instant: the bucket of the day index. */
export const utcDay = (iso: string): string => iso.slice(0, 10);

/**
 * A supplier's value inside a key: `%` and the delimiter `#` are percent-escaped, so no value can look like
 * another value plus a key part. Everything else (any other Unicode) stays as it is, so the ids accepted before
 * (A-Z a-z 0-9 . _ ~ -) key to themselves and items written then are still found.
 */
export const keyPart = (value: string): string => value.replace(/[%#]/g, (c) => (c === '%' ? '%25' : '%23'));

/**
 * An id inside a key: `keyPart` as long as it fits the key, else a digest of it (`%~` and 43 characters of
 * base64url SHA-256, which `keyPart` never writes: it leaves no `%` that is not `%25` or `%23`). The receivers
 * accept a pid of up to 2,048 bytes (identifiers.ts): one that escapes past 1,600 bytes is keyed by its digest; a
 * token of 128 escapes to at most 384. A marketplace row can carry longer ids still: a panel id a respondent
 * lengthened in the entry link still keys the item its transaction gets, where DynamoDB would refuse the write
 * (2,048 bytes for a partition key, 1,024 for a sort key) and fail its survey's reconciliation.
 */
export function keyId(value: string, maxBytes: number): string {
  const escaped = keyPart(value);
  if (Buffer.byteLength(escaped, 'utf8') <= maxBytes) return escaped;
  return `%~${createHash('sha256').update(value).digest('base64url')}`;
}
/** The longest escaped pid a partition key holds as it is (with `ATTEMPT#` and a 12-digit survey id). */
const KEYED_PID_BYTES = 1_600;
/** The longest escaped token a sort key holds as it is (with the discrepancy index's survey and verdict before it). */
const KEYED_TOKEN_BYTES = 400;

export const attemptKey = (surveyId: string, pid: string, token: string) => ({
  pk: attemptPartition(surveyId, pid),
  sk: `TOKEN#${keyId(token, KEYED_TOKEN_BYTES)}`,
});

/** What every attempt's partition key starts with (IAM limits the receivers' reads to it). */
export const ATTEMPT_PARTITION_PREFIX = 'ATTEMPT#';

export function attemptPartition(surveyId: string, pid: string): string {
  return `${ATTEMPT_PARTITION_PREFIX}${surveyId}#${keyId(pid, KEYED_PID_BYTES)}`;
}

/**
 * How many day-index partitions a survey's attempts of one day spread over, by their key. One partition takes about
 * 1,000 index writes a second, and a survey's launch can bring that many new attempts: four take four times it.
 */
export const DAY_INDEX_SHARDS = 4;

/** A 32-bit FNV-1a hash of a key's text: how a key is spread over a fixed number of partitions. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}

/** The day-index shard of an attempt, from its table sort key: any hit, and any reader, finds the same. */
export const attemptDayShard = (sortKey: string): number => fnv1a(sortKey) % DAY_INDEX_SHARDS;

/** The day-index keys of an attempt (its table sort key `sortKey`) first seen at `firstSeenAt`. */
export const attemptDayKey = (surveyId: string, sortKey: string, firstSeenAt: string) => ({
  gsi1pk: attemptDayPartition(surveyId, utcDay(firstSeenAt), attemptDayShard(sortKey)),
  gsi1sk: firstSeenAt,
});

/**
 * Whether an attempt's day-index entry (`gsi1sk`, in this layout: a time without the day-wide layout's survey
 * prefix) places it after its first sighting: a later hit indexed it, its first hit having left it out (the attempt
 * feed covering it, feed-coverage.ts). Such an entry is moved to the first sighting.
 */
export const placedAfter = (placed: unknown, firstSeenAt: string): placed is string =>
  typeof placed === 'string' && !placed.includes('#') && placed > firstSeenAt;

/**
 * A day-index partition of a survey's attempts first seen on a UTC day. Shard 0 is the partition a survey's day
 * had before it was split (`ATTEMPTS#<day>#<survey>`): attempts indexed then are where its readers look.
 */
export const attemptDayPartition = (surveyId: string, day: string, shard = 0) =>
  shard === 0 ? `ATTEMPTS#${day}#${surveyId}` : `ATTEMPTS#${day}#${surveyId}#${shard}`;

/** Every day-index partition of a survey's day, shard 0 first. */
export const attemptDayPartitions = (surveyId: string, day: string): string[] =>
  Array.from({ length: DAY_INDEX_SHARDS }, (_, shard) => attemptDayPartition(surveyId, day, shard));

/** The day-wide partition attempts were indexed under before the index was split by survey; read, never written. */
export const legacyAttemptDayPartition = (day: string) => `ATTEMPTS#${day}`;

/**
 * The checkpoint `ledger backfill-day-index` leaves once no attempt is indexed under a day-wide partition any
 * more: from then on the readers query only the survey's own partitions.
 */
export const DAY_INDEX_BACKFILLED = 'day-index-backfilled';

/** What the partition key of every count of refused hits starts with. */
export const REJECTED_PARTITION_PREFIX = 'REJECTED#';

/** The item that counts a source's refused hits of one code in the UTC minute of `at`. */
export const rejectedKey = (at: string, code: string, source: string) => ({
  pk: `${REJECTED_PARTITION_PREFIX}${utcDay(at)}`,
  sk: `${at.slice(0, 16)}#${keyPart(code)}#${keyPart(source)}`,
});

/**
 * The item that counts a source's refused postbacks of one code, for one claimed survey, in the UTC minute of
 * `at`. The survey id is attacker-controlled: a flood of distinct ids makes one item per request, which costs
 * what counting on one item would (one write each) and expires with the rest.
 */
export const rejectedPostbackKey = (at: string, code: string, surveyId: string, source: string) => ({
  pk: `${REJECTED_PARTITION_PREFIX}${utcDay(at)}`,
  sk: `${at.slice(0, 16)}#postback#${keyPart(code)}#${keyPart(surveyId)}#${keyPart(source)}`,
});

/** What a survey's own items' partition key starts with (its registration, its reconciliation state). */
export const SURVEY_PARTITION_PREFIX = 'SURVEY#';
export const registrationKey = (surveyId: string) => ({
  pk: `${SURVEY_PARTITION_PREFIX}${surveyId}`,
  sk: 'REDIRECTS',
});
/**
 * A registration's place in the index: a live survey's under `SURVEYS` by id; one closed or removed under
 * `SURVEYS#ENDED` by the time it ended, so that each job reads only the ended surveys it still needs (the last
 * week's, the review horizon's) instead of every survey a supplier ever ran.
 */
export const REGISTRY_LIVE = 'SURVEYS';
export const REGISTRY_ENDED = 'SURVEYS#ENDED';
export const registrationIndexKey = (surveyId: string, endedAt?: string) =>
  endedAt === undefined
    ? { gsi1pk: REGISTRY_LIVE, gsi1sk: surveyId }
    : { gsi1pk: REGISTRY_ENDED, gsi1sk: `${endedAt}#${surveyId}` };
/** The survey id of a registration's index sort key, live or ended. */
export const surveyOfRegistrationIndex = (gsi1sk: string) => gsi1sk.slice(gsi1sk.lastIndexOf('#') + 1);
/** What every checkpoint's partition key starts with. */
export const CHECKPOINT_PARTITION_PREFIX = 'CHECKPOINT#';
export const checkpointKey = (name: string) => ({
  pk: `${CHECKPOINT_PARTITION_PREFIX}${name}`,
  sk: 'CHECKPOINT',
});

/** What every day summary's partition key starts with. */
export const SUMMARY_PARTITION_PREFIX = 'SUMMARY#';
export const summaryKey = (surveyId: string, day: string) => ({
  pk: `${SUMMARY_PARTITION_PREFIX}${surveyId}`,
  sk: `DAY#${day}`,
});

/**
 * A survey's flagged days, one item beside its summaries: an attribute `flag#<pacific day>` per day a late hit
 * flagged (judged-day-flag.ts), holding the flag's time. Read with the survey's state every run, so a flagged day
 * past the window, whose summary a run does not read, is reconciled by the next run all the same; a run that has
 * judged the day removes its attribute.
 */
export const dayFlagsKey = (surveyId: string) => ({
  pk: `${SUMMARY_PARTITION_PREFIX}${surveyId}`,
  sk: 'FLAGS',
});
export const DAY_FLAG_PREFIX = 'flag#';

/**
 * The attempts judged on a survey's day that a reading of that day alone does not reach through the day index
 * (first seen after the day after it, or indexed on another day: a postback days late, an item whose row moved
 * there), one item each beside the day's summary (`outsiderKey`), its `pid` and `token`. While the day's row of
 * such an attempt is listed, the run finds the attempt by its key (or the item's `arrivedAs`); once the row goes,
 * this is how the day's run still reads it and judges it anew, instead of leaving a stale verdict on the day. Only
 * ever added to; the day's summary counts them (`outsiders`), so a day without any reads nothing more. Read by the
 * sort key's prefix (`outsidersPrefix`), which takes in an earlier release's one item of the day (`outsidersKey`: a
 * string set `keys` of `[pid, token]` in JSON, which a day of about 5,000 such attempts, postbacks re-sent after a
 * day-long outage, took past DynamoDB's 400 KB an item, failing the survey's every run).
 */
export const outsidersKey = (surveyId: string, day: string) => ({
  pk: `${SUMMARY_PARTITION_PREFIX}${surveyId}`,
  sk: outsidersPrefix(day),
});
export const outsidersPrefix = (day: string) => `OUTSIDERS#${day}`;
/** One outsider of a day (`outsidersKey`): its ids digested, since a pid alone may take a sort key's 1,024 bytes. */
export const outsiderKey = (surveyId: string, day: string, pid: string, token: string) => ({
  pk: `${SUMMARY_PARTITION_PREFIX}${surveyId}`,
  sk: `${outsidersPrefix(day)}#${createHash('sha256')
    .update(JSON.stringify([pid, token]))
    .digest('base64url')}`,
});

/**
 * The only items the hit path (receivers and drainer) writes whole: attempts and counts of refused hits. Their roles
 * may update nothing else but the flag of `HIT_PATH_SUMMARY_ATTRIBUTES`.
 */
export const HIT_PATH_PARTITION_PREFIXES = [ATTEMPT_PARTITION_PREFIX, REJECTED_PARTITION_PREFIX] as const;

/**
 * What the hit path may write of a survey's summaries (`SUMMARY_PARTITION_PREFIX`): the flag a late hit leaves on
 * its judged day (judged-day-flag.ts: `ledgerChangedAt` and the `kind` of a flag alone on a day's summary item, a
 * `flag#<day>` attribute on the survey's flagged days), never a figure, a verdict count or an outsider. IAM's
 * `dynamodb:Attributes` must name every key attribute of the table and its indexes besides.
 */
export const HIT_PATH_SUMMARY_ATTRIBUTES = [
  LEDGER.partitionKey,
  LEDGER.sortKey,
  LEDGER.index.partitionKey,
  LEDGER.index.sortKey,
  LEDGER.discrepancyIndex.partitionKey,
  LEDGER.discrepancyIndex.sortKey,
  'ledgerChangedAt',
  'kind',
  `${DAY_FLAG_PREFIX}*`,
] as const;
export const summaryIndexKey = (surveyId: string, day: string) => ({
  gsi1pk: `SUMMARIES#${day}`,
  gsi1sk: surveyId,
});
export const discrepancyIndexKey = (day: string, surveyId: string, verdict: string, token: string) => ({
  gsi2pk: `DISCREPANCIES#${day}`,
  gsi2sk: `${surveyId}#${verdict}#${keyPart(token)}`,
});
export const reconciliationStateKey = (surveyId: string) => ({
  pk: `SURVEY#${surveyId}`,
  sk: 'RECONCILIATION',
});
/** What the partition keys of a scheduled run's records start with (its state, lease, lists, last finished run). */
export const RUN_PARTITION_PREFIX = 'RUN#';
export const runStateKey = (name: string) => ({ pk: `${RUN_PARTITION_PREFIX}${name}`, sk: 'STATE' });
/** The last run of that name that finished: what it checked, kept while the next run is under way. */
export const finishedRunKey = (name: string) => ({ pk: `${RUN_PARTITION_PREFIX}${name}`, sk: 'FINISHED' });
/** One part of a long run's survey list (run-lists.ts). */
export const runSurveysKey = (name: string, runId: string, index: number) => ({
  pk: `${RUN_PARTITION_PREFIX}${name}`,
  sk: `SURVEYS#${runId}#${index}`,
});
export const healthKey = (surveyId: string) => ({ pk: `HEALTH#${surveyId}`, sk: 'STATE' });

/** Rejected hits are kept for investigation, not for ever. */
export const REJECTED_RETENTION_DAYS = 90;
