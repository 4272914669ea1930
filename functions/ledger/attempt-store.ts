/**
 * Attempts and refused hits in the ledger table.
 *
 * Every hit is one UpdateItem with no read before it. The update only ever sets attributes that are not yet
 * there (`if_not_exists`) and adds to counters, so concurrent and repeated hits commute: whatever order they
 * arrive in, the first outcome of each channel stands and the counts are exact.
 *
 * Over 300 lines on purpose: the one hit update, its buffered and refused variants and the item mapping must be
 * read together, since each relies on the conditions and digests the others write.
 */
import { createHash } from 'node:crypto';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import {
  type Attempt,
  type AttemptReconciliation,
  channelRecord,
  completeEvidence,
  type HitEffect,
  hasConflict,
  hitEffect,
  type Sighting,
} from '../receiving/attempt';
import type { Hit, HitSource } from '../receiving/hit-request';
import { SURVEY_ID_PATTERN } from '../receiving/identifiers';
import { type Channel, type Outcome, outcomesOf } from '../receiving/outcome';
import { withoutSignatures } from '../shared/printable';
import type { RefusalCode } from '../shared/rejection';
import { batchGet, conditionally, type Item, queryAll, send } from './document-client';
import { flagJudgedDay, staleDays } from './judged-day-flag';
import {
  attemptDayKey,
  attemptDayPartition,
  attemptDayPartitions,
  attemptDayShard,
  attemptKey,
  attemptPartition,
  checkpointKey,
  DAY_INDEX_BACKFILLED,
  LEDGER,
  legacyAttemptDayPartition,
  placedAfter,
  REJECTED_RETENTION_DAYS,
  rejectedKey,
  rejectedPostbackKey,
  utcDay,
} from './ledger-schema';

/**
 * A hit refused before it could count: a forged or malformed redirect or postback. Kept for investigation, and
 * refused postbacks for the survey health check.
 */
export interface RejectedHit {
  readonly at: string;
  readonly requestId: string;
  readonly channel: Channel;
  /** Short and stable: refused hits are counted per source, code and UTC minute. */
  readonly code: RefusalCode;
  /** The refusal in words; it can quote the input, so it is stored clipped. */
  readonly reason: string;
  readonly surveyId?: string | undefined;
  readonly outcome?: string | undefined;
  readonly pid?: string | undefined;
  readonly token?: string | undefined;
  readonly sourceIp?: string | undefined;
}

/**
 * Refused hits as kept: one record per source address, code and UTC minute, its first hit as the sample (`at`,
 * `requestId`, `reason` and the identifiers are that hit's) and `hits` counting all of them.
 */
export interface RejectedHits extends Omit<RejectedHit, 'code'> {
  /** Absent on records written before refusals were counted (one hit each). */
  readonly code?: string | undefined;
  readonly hits: number;
}

/** An attempt item's table key, as the keys-only day index gives it. */
export interface AttemptItemKey {
  readonly pk: string;
  readonly sk: string;
}

export interface LedgerStoreOptions {
  /**
   * Whether an attempt first seen at `at` may stay out of the day index (feed-coverage.ts: with the attempt feed
   * on, once its readers take such attempts from it). Absent: every attempt is indexed.
   */
  readonly indexFree?: (at: Date) => boolean;
}

export interface LedgerStore {
  /**
   * Records one verified hit and returns the attempt as it stands afterwards. One write, no read. `signal` aborts
   * the write and its retries when whoever waits gives up on it (storeAnswerWithin).
   */
  recordHit(hit: Hit, at: Date, hitId?: string, signal?: AbortSignal): Promise<RecordedHit>;
  /**
   * Records a hit that waited in the buffer, once however often it is delivered: the buffer id is remembered on
   * the attempt, and a delivery it already holds changes nothing. Returns false for such a repeat. A hit of an
   * earlier day flags that day (judged-day-flag.ts); a failed flag throws, and the redelivery, a repeat, flags.
   */
  recordBufferedHit(hit: Hit, at: Date, bufferId: string): Promise<boolean>;
  /**
   * Keeps a refused hit apart from the attempts; it is never an outcome. One write, no read: the first hit of a
   * source, code and minute makes the record, the rest only count on it.
   */
  recordRejectedHit(rejected: RejectedHit, signal?: AbortSignal): Promise<void>;
  /** The attempts of one respondent in one survey (one, unless the respondent entered more than once). */
  attemptsOf(surveyId: string, pid: string): Promise<Attempt[]>;
  /** Attempts of a survey first seen in [from, to), oldest first, through the day index (no scan). */
  attemptsOfSurvey(surveyId: string, from: Date, to: Date): Promise<Attempt[]>;
  /** The table keys of those attempts, from the keys-only day index alone (no item read). */
  attemptKeysOfSurvey(surveyId: string, from: Date, to: Date): Promise<AttemptItemKey[]>;
  /** The attempts with these table keys (batch point reads), oldest first; missing ones left out. */
  attemptsAt(keys: readonly AttemptItemKey[]): Promise<Attempt[]>;
  /**
   * Every attempt of a survey with this token (under any pid: the same respondent spelt otherwise, or another pid
   * claiming the token) first seen within [from, to), through the day index, oldest first.
   */
  attemptsByToken(surveyId: string, token: string, from: Date, to: Date): Promise<Attempt[]>;
  /** Refused hits of one UTC day, counted per source, code and minute, oldest first. */
  rejectedHits(utcDay: string): Promise<RejectedHits[]>;
  /** Refused hits counted in the UTC minutes [from, to) touches, oldest first: one key-range Query per UTC day. */
  rejectedHitsBetween(from: Date, to: Date): Promise<RejectedHits[]>;
}

/** What a hit did to its attempt. */
export interface RecordedHit {
  readonly attempt: Attempt;
  readonly effect: HitEffect;
  /**
   * The earlier days the hit made stale when flagging them for the next reconciliation failed: the hit stands;
   * those days wait for their daily re-check (the caller logs them).
   */
  readonly unflaggedDays?: readonly string[];
}

/**
 * Buffered hits remembered per attempt. A buffered hit only exists while the store was failing, so a genuine
 * attempt has one or two; the bound keeps the item within its write unit (16 digests of 8 characters) whatever
 * a flood of redirects during an outage does.
 */
export const MAX_BUFFERED_IDS = 16;

/**
 * Times a drained hit's outcome is decided again when another change of the attempt came first: each loss means
 * another drained hit of the same attempt took its place meanwhile, and a channel has at most five outcomes.
 */
const STAND_EARLIER_TRIES = 5;

/**
 * A drained hit whose settling lost STAND_EARLIER_TRIES races in a row (many hits of one attempt drained at once):
 * thrown after its write, so its delivery fails and its repeat settles it on the attempt as it then is.
 */
const unsettled = (what: string) =>
  Object.assign(new Error(`a drained hit's ${what} not settled: the attempt kept changing under it`), {
    name: 'DrainedHitUnsettled',
  });

/** A 48-bit digest of a hit or buffer id: what an attempt remembers of it. */
const hitDigest = (id: string): string => createHash('sha256').update(id).digest('base64url').slice(0, 8);

/** How many redirect request ids an attempt remembers (see hitUpdate). */
export const REDIRECT_ID_SLOTS = 4;
/** How many postback request ids an attempt remembers (see hitUpdate). */
export const POSTBACK_ID_SLOTS = 8;
/**
 * The attribute holding a channel's remembered request id of a digest's slot: `redirectId0` .. `redirectId3`,
 * `postbackId0` .. `postbackId7`.
 */
const hitIdSlot = (channel: Hit['channel'], digest: string) =>
  channel === 'postback'
    ? `postbackId${(digest.codePointAt(0) as number) % POSTBACK_ID_SLOTS}`
    : `redirectId${(digest.codePointAt(0) as number) % REDIRECT_ID_SLOTS}`;

const sightingAt = (channel: Channel, outcome: Outcome) => `${channel}_${outcome}_at`;
const sightingHits = (channel: Channel, outcome: Outcome) => `${channel}_${outcome}_hits`;
const standingOutcome = (channel: Channel) => `${channel}Outcome`;

/**
 * @param clock when the ledger changes, for the flags late hits leave (judged-day-flag.ts); read after each write.
 */
export function createLedgerStore(
  client: DynamoDBDocumentClient,
  tableName: string,
  clock: () => Date = () => new Date(),
  options: LedgerStoreOptions = {},
): LedgerStore {
  /** Whether a hit made at `at` enters its attempt in the day index (if it is not there yet). */
  const indexes = (at: Date) => !options.indexFree?.(at);
  /**
   * A hit that indexed an attempt first seen before it, by its own time: the attempt's first hit left it out of the
   * index (the feed covered it) and this one came through a container that did not know yet. Out again, so that it
   * is filed by its first sighting everywhere (the feed files an item by its index time when it has one).
   */
  const unplaced = async (item: Item | undefined, hitAt: Date) => {
    // Only where the feed may cover: without it, an attempt out of the index is put back by its hits.
    if (!options.indexFree || !item) return;
    const at = hitAt.toISOString();
    if (item.gsi1sk !== at || typeof item.firstSeenAt !== 'string' || item.firstSeenAt >= at) return;
    await conditionally(() =>
      client.send(
        new UpdateCommand({
          TableName: tableName,
          Key: { pk: item.pk, sk: item.sk },
          UpdateExpression: 'REMOVE gsi1pk, gsi1sk',
          // As read: a drained hit that moved the first sighting since decides the attempt's place itself.
          ConditionExpression: 'gsi1sk = :at AND firstSeenAt = :firstSeenAt',
          ExpressionAttributeValues: { ':at': at, ':firstSeenAt': item.firstSeenAt },
        }),
      ),
    );
  };
  // Whether the day-wide partitions of an earlier release may still hold attempts: until `ledger
  // backfill-day-index` has moved them and left its checkpoint. Read once per store; a failed read means "yes".
  let legacyDayIndex: Promise<boolean> | undefined;
  const legacyDayIndexInUse = () => {
    legacyDayIndex ??= send(() =>
      client.send(new GetCommand({ TableName: tableName, Key: checkpointKey(DAY_INDEX_BACKFILLED) })),
    ).then(
      ({ Item }) => Item === undefined,
      () => {
        legacyDayIndex = undefined;
        return true;
      },
    );
    return legacyDayIndex;
  };
  const dayPartitionsOf = async (surveyId: string, day: string) =>
    dayPartitions(surveyId, day, await legacyDayIndexInUse());

  /** Flags the earlier days a hit made stale (judged-day-flag.ts); `effect` 'recorded' when unknown. */
  const flag = async (surveyId: string, days: readonly string[], now: Date) => {
    for (const day of days) await flagJudgedDay(client, tableName, surveyId, day, now);
  };
  const flagStaleDays = async (attempt: Attempt, effect: HitEffect) => {
    const now = clock();
    await flag(attempt.surveyId, staleDays(attempt, effect, now), now);
  };
  /** The live path: nothing more for the usual hit; a failed flag never fails the hit it follows. */
  const recorded = async (attempt: Attempt, effect: HitEffect): Promise<RecordedHit> => {
    const now = clock();
    const days = staleDays(attempt, effect, now);
    if (days.length === 0) return { attempt, effect };
    try {
      await flag(attempt.surveyId, days, now);
      return { attempt, effect };
    } catch {
      return { attempt, effect, unflaggedDays: days };
    }
  };

  const attemptsAt: LedgerStore['attemptsAt'] = async (keys) => {
    const items = await batchGet(
      client,
      tableName,
      keys.map((key) => ({ pk: key.pk, sk: key.sk })),
    );
    return items.map(attemptFromItem).sort((a, b) => attemptTime(a).localeCompare(attemptTime(b)));
  };

  const attemptsByToken: LedgerStore['attemptsByToken'] = async (surveyId, token, from, to) => {
    const { index } = LEDGER;
    const sortKey = attemptKey(surveyId, '', token).sk;
    const found: Item[] = [];
    for (const day of utcDaysBetween(from, to)) {
      // The token's own shard, and shard 0, where attempts indexed before the shards are.
      const shards = new Set([
        attemptDayPartition(surveyId, day, attemptDayShard(sortKey)),
        attemptDayPartition(surveyId, day),
      ]);
      const partitions = (await dayPartitionsOf(surveyId, day)).filter(
        ({ partition, sortPrefix }) => sortPrefix !== '' || shards.has(partition),
      );
      for (const { partition, sortPrefix } of partitions) {
        // DynamoDB refuses an empty key-condition value, so the survey's own partition is read whole (it holds
        // only this survey's attempts of the day) and the day-wide one by the survey's sort-key prefix.
        const keys = await queryAll(client, {
          TableName: tableName,
          IndexName: index.name,
          KeyConditionExpression: sortPrefix ? '#pk = :pk AND begins_with(#sk, :prefix)' : '#pk = :pk',
          // The index holds keys only, the table's among them: the token is in the sort key.
          FilterExpression: 'sk = :token',
          ExpressionAttributeNames: {
            '#pk': index.partitionKey,
            ...(sortPrefix ? { '#sk': index.sortKey } : {}),
          },
          ExpressionAttributeValues: {
            ':pk': partition,
            ...(sortPrefix ? { ':prefix': sortPrefix } : {}),
            ':token': sortKey,
          },
        });
        for (const key of keys) found.push({ pk: key.pk, sk: key.sk });
      }
    }
    // Every day read, as a look-up that finds nothing reads them: a token under another pid may come days later.
    return (await batchGet(client, tableName, found))
      .map(attemptFromItem)
      .sort((a, b) => attemptTime(a).localeCompare(attemptTime(b)) || a.pid.localeCompare(b.pid));
  };

  const attemptKeysOfSurvey: LedgerStore['attemptKeysOfSurvey'] = async (surveyId, from, to) => {
    const keys: Item[] = [];
    const { index } = LEDGER;
    for (const day of utcDaysBetween(from, to)) {
      // A day's partitions (its shards) at once: one round trip, not one per shard.
      const pages = await Promise.all(
        (await dayPartitionsOf(surveyId, day)).map(({ partition, sortPrefix }) =>
          queryAll(client, {
            TableName: tableName,
            IndexName: index.name,
            KeyConditionExpression: '#pk = :pk AND #sk BETWEEN :from AND :to',
            ExpressionAttributeNames: { '#pk': index.partitionKey, '#sk': index.sortKey },
            ExpressionAttributeValues: {
              ':pk': partition,
              ':from': `${sortPrefix}${from.toISOString()}`,
              // ISO instants sort as text; the end is exclusive, so stop just before it.
              ':to': `${sortPrefix}${new Date(to.getTime() - 1).toISOString()}`,
            },
          }),
        ),
      );
      // One at a time: a partition's day at ten times the size holds more keys than one call takes as arguments.
      for (const page of pages) for (const key of page) keys.push(key);
    }
    return keys.map((key) => ({ pk: String(key.pk), sk: String(key.sk) }));
  };

  /** An attempt's item as it is now (a consistent read), or undefined when there is none. */
  const currentItem = async (
    attempt: Pick<Attempt, 'surveyId' | 'pid' | 'token'>,
    options: { abortSignal?: AbortSignal } = {},
  ): Promise<Item | undefined> =>
    (
      await send(() =>
        client.send(
          new GetCommand({
            TableName: tableName,
            Key: attemptKey(attempt.surveyId, attempt.pid, attempt.token),
            ConsistentRead: true,
          }),
          options,
        ),
      )
    ).Item;

  /**
   * The first outcome a channel reported stands, by when the hit was made, not when it reached the ledger: a
   * buffered hit made before the one standing (written live while this one waited out an outage) takes its
   * place, and one of the outcome standing takes its sighting back to when it was made. Conditional on the standing
   * outcome and its first sighting as read; lost to a race (another hit of the attempt written meanwhile), decided
   * again on the attempt as it now is, a few times at most, then thrown (`unsettled`) for the delivery to come back.
   */
  const standEarlier = async (attempt: Attempt, drained: Hit, made: Date) => {
    let current: Attempt | undefined = attempt;
    for (let tries = 0; current && tries < STAND_EARLIER_TRIES; tries++) {
      const update = standEarlierUpdate(current, drained, made);
      if (!update) return;
      try {
        await send(() => client.send(new UpdateCommand({ ...update, TableName: tableName })));
        return;
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      }
      const item = await currentItem(attempt);
      current = item ? attemptFromItem(item) : undefined;
    }
    // Still changing under it: the hit's delivery fails and comes back, and its repeat decides again.
    if (current && standEarlierUpdate(current, drained, made)) throw unsettled('its outcome');
  };

  /**
   * A drained hit made before the attempt's first sighting (a later hit of it, of either channel, was written live
   * while this one waited out an outage): the attempt was first seen when this one was made, and belongs to that
   * day. Its first-seen time moves back, and its day-index keys with it when they were taken from that time (an
   * item reconciliation placed by its click keeps its place). Conditional on the first-seen time as read, decided
   * again when another write won. Returns the attempt as moved, or undefined when it did not need to move.
   */
  const firstSeenBack = async (attempt: Attempt, made: Date): Promise<Attempt | undefined> => {
    const madeAt = made.toISOString();
    // The usual drained hit was not made first: nothing read.
    if (!attempt.firstSeenAt || madeAt >= attempt.firstSeenAt) return undefined;
    for (let tries = 0; tries < STAND_EARLIER_TRIES; tries++) {
      const item = await currentItem(attempt);
      const read = typeof item?.firstSeenAt === 'string' ? item.firstSeenAt : undefined;
      if (!item || !read || madeAt >= read) return undefined;
      const key = attemptKey(attempt.surveyId, attempt.pid, attempt.token);
      // Indexed by its first sighting, in this layout or (not backfilled yet) the day-wide one before it: either
      // way it moves, to this layout, so that it is listed on the day it was first seen.
      // Or indexed by a later hit's time (its first hit left it out, the attempt feed covering it, and a later one
      // came through a container that did not know: `unplaced`), which moves it as well. (One left out was placed by
      // this drained hit's own write when that was before the feed covered: feed-coverage.ts.)
      const indexed =
        item.gsi1sk === read ||
        item.gsi1sk === `${attempt.surveyId}#${read}` ||
        placedAfter(item.gsi1sk, read);
      const lastSeen = typeof item.lastSeenAt === 'string' ? item.lastSeenAt : undefined;
      try {
        const { Attributes } = await send(() =>
          client.send(
            new UpdateCommand({
              TableName: tableName,
              Key: key,
              // A change like any hit's: a run that read the attempt before it must not judge it as it was.
              UpdateExpression: `SET firstSeenAt = :made, lastSeenAt = :seen${indexed ? ', gsi1pk = :gsi1pk, gsi1sk = :made' : ''}`,
              // And on `lastSeenAt` as read: a hit in between is decided again, never moved back past.
              ConditionExpression: `firstSeenAt = :read AND ${
                lastSeen === undefined ? 'attribute_not_exists(lastSeenAt)' : 'lastSeenAt = :lastRead'
              }`,
              ExpressionAttributeValues: {
                ':made': madeAt,
                ':read': read,
                ...(lastSeen === undefined ? {} : { ':lastRead': lastSeen }),
                ':seen': new Date(
                  Math.max(clock().getTime(), Date.parse(lastSeen ?? '') + 1 || 0),
                ).toISOString(),
                ...(indexed ? { ':gsi1pk': attemptDayKey(attempt.surveyId, key.sk, madeAt).gsi1pk } : {}),
              },
              ReturnValues: 'ALL_NEW',
            }),
          ),
        );
        return attemptFromItem(Attributes ?? {});
      } catch (error) {
        // Another write moved it first: decided again on the item as it then is.
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      }
    }
    throw unsettled('its first sighting');
  };

  /**
   * What a drained hit does beyond its write, on the attempt as written (or as it is, on a redelivery): its outcome
   * stands if made first, the attempt goes back to when it was first seen, and the days it changed are flagged: its
   * judged day or the one it was first seen on, and, when it moved, the day it moved to (its verdict, should it have
   * one, stands on the day it left until a run of the day it moved to judges it there). Each is decided on the
   * attempt as it is, so doing them again changes nothing done.
   */
  const settleDrained = async (attempt: Attempt, hit: Hit, made: Date, effect: HitEffect) => {
    await standFirstMade(attempt, hit, made);
    await flagStaleDays(attempt, effect);
  };

  /**
   * The first made stands (`standEarlier`), the attempt first seen when it was (`firstSeenBack`), and the day it moved
   * to, if it moved, flagged: what a hit made before another of its attempt that was written first needs.
   */
  const standFirstMade = async (attempt: Attempt, hit: Hit, made: Date) => {
    await standEarlier(attempt, hit, made);
    const moved = await firstSeenBack(attempt, made);
    if (moved) await flagStaleDays({ ...moved, reconciliation: undefined }, 'recorded');
  };

  /**
   * A live hit overtaken by a later-made one of its attempt (its write retried under throttling, or slow, while the
   * other's landed): settled as a drained hit is, so that the first outcome made stands whichever write landed first
   * (which decides between a reversal and money to chase). The usual live hit needs nothing and reads nothing more.
   * Best effort: the hit is recorded either way, and a settle lost to a race leaves the attempt as written.
   */
  const settleLive = async (attempt: Attempt, hit: Hit, made: Date): Promise<Attempt> => {
    const overtaken =
      standEarlierUpdate(attempt, hit, made) !== undefined ||
      (attempt.firstSeenAt !== undefined && made.toISOString() < attempt.firstSeenAt);
    if (!overtaken) return attempt;
    try {
      await standFirstMade(attempt, hit, made);
      const item = await currentItem(attempt);
      return item ? attemptFromItem(item) : attempt;
    } catch {
      return attempt;
    }
  };

  /**
   * The update that settles a drained hit on the attempt as read, or none if nothing needs it: its outcome stands if
   * made before the standing one (in the same millisecond, if its name sorts first); its outcome's first sighting goes
   * back to when it was made if a later hit of that outcome came first; and made before every other sighting of its
   * channel, its sender (a redirect's `redirectFrom`) or source (a postback's `postbackSource`) is the channel's first.
   */
  const standEarlierUpdate = (attempt: Attempt, drained: Hit, made: Date) => {
    const record = attempt[drained.channel];
    if (!record) return undefined;
    const standingAt = record.sightings.find((s) => s.outcome === record.outcome)?.firstAt;
    if (!standingAt) return undefined;
    const madeAt = made.toISOString();
    const same = record.outcome === drained.outcome;
    // Made in the same millisecond: a fixed order (the outcome's name) decides, not which write came first.
    const takesPlace =
      !same && (madeAt < standingAt || (madeAt === standingAt && drained.outcome < record.outcome));
    const drainedAt = record.sightings.find((s) => s.outcome === drained.outcome)?.firstAt;
    const movesBack = drainedAt !== undefined && madeAt < drainedAt;
    // The channel's first hit: made before every other outcome's first sighting, and its own outcome's (which its
    // own write set to when it was made, if it was the first of it).
    const first =
      record.sightings.every((s) => s.outcome === drained.outcome || madeAt < s.firstAt) &&
      (drainedAt === undefined || madeAt <= drainedAt);
    const sender =
      drained.channel === 'redirect'
        ? drained.from !== undefined && first && attempt.redirect?.from !== drained.from
          ? { name: 'redirectFrom', value: drained.from }
          : undefined
        : first && attempt.postback?.source !== drained.source
          ? { name: 'postbackSource', value: drained.source }
          : undefined;
    if (!takesPlace && !movesBack && !sender) return undefined;
    const set = [
      ...(takesPlace ? ['#standing = :outcome'] : []),
      ...(movesBack ? [`${same ? '#standingAt' : '#drainedAt'} = :made`] : []),
      ...(sender ? [`${sender.name} = :sender`] : []),
      'lastSeenAt = :seen',
    ];
    return {
      Key: attemptKey(attempt.surveyId, attempt.pid, attempt.token),
      // A change like any hit's: a run that read the attempt before it must not judge it as it was.
      UpdateExpression: `SET ${set.join(', ')}`,
      // On `lastSeenAt` as read too: a hit in between (its clock ahead of this one's) is never moved back past, so
      // an attempt's last sighting only grows (the attempt feed orders its images by it).
      ConditionExpression: `#standing = :standing AND #standingAt = :standingAt AND ${
        attempt.lastSeenAt === undefined ? 'attribute_not_exists(lastSeenAt)' : 'lastSeenAt = :lastRead'
      }`,
      ExpressionAttributeNames: {
        '#standing': standingOutcome(drained.channel),
        '#standingAt': sightingAt(drained.channel, record.outcome),
        ...(movesBack && !same ? { '#drainedAt': sightingAt(drained.channel, drained.outcome) } : {}),
      },
      ExpressionAttributeValues: {
        ...(takesPlace ? { ':outcome': drained.outcome } : {}),
        ...(movesBack ? { ':made': madeAt } : {}),
        ...(sender ? { ':sender': sender.value } : {}),
        ':standing': record.outcome,
        ':standingAt': standingAt,
        ...(attempt.lastSeenAt === undefined ? {} : { ':lastRead': attempt.lastSeenAt }),
        // Later than the drained write's own, even within its millisecond.
        ':seen': new Date(
          Math.max(clock().getTime(), Date.parse(attempt.lastSeenAt ?? '') + 1 || 0),
        ).toISOString(),
      },
    };
  };

  return {
    async recordHit(hit, at, hitId, signal) {
      const options = signal ? { abortSignal: signal } : {};
      try {
        const { Attributes } = await send(() =>
          client.send(
            new UpdateCommand({ ...hitUpdate(hit, at, hitId, at, false, indexes(at)), TableName: tableName }),
            options,
          ),
        );
        await unplaced(Attributes, at);
        const attempt = await settleLive(attemptFromItem(Attributes ?? {}), hit, at);
        return recorded(attempt, hitEffect(attempt, hit.channel, hit.outcome));
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
        // This very request was applied already (an earlier attempt of it timed out after the write): read back.
        const item = await currentItem(hit, options);
        // What the first try changed is unknown: flag as if it changed the attempt (a spare flag costs a run).
        const attempt = item ? await settleLive(attemptFromItem(item), hit, at) : attemptFromItem({});
        const { unflaggedDays } = await recorded(attempt, 'recorded');
        // Its effect as the lost answer would have said it (a conflict is still one; the only sighting of its
        // outcome, it was recorded), not a duplicate by default: the conflict metric and warning depend on it.
        const effect = hitEffect(attempt, hit.channel, hit.outcome);
        return { attempt, effect, ...(unflaggedDays ? { unflaggedDays } : {}) };
      }
    },

    async recordBufferedHit(hit, at, bufferId) {
      // Its sighting keeps when it was made; `lastSeenAt`, what a run's verdict is conditional on and a late hit is
      // told by, says when the ledger changed: a time long past would pass for a hit older than the run's read.
      const update = { ...hitUpdate(hit, at, bufferId, clock(), true, indexes(at)), TableName: tableName };
      const digest = hitDigest(bufferId);
      const notHeld = `(${update.ConditionExpression}) AND (attribute_not_exists(bufferedIds) OR NOT contains(bufferedIds, :hitId))`;
      try {
        // The set holds the same digest the condition tests, and at most MAX_BUFFERED_IDS of them.
        const { Attributes } = await send(() =>
          client.send(
            new UpdateCommand({
              ...update,
              UpdateExpression: `${update.UpdateExpression}, bufferedIds :bufferIds`,
              ConditionExpression: `(${update.ConditionExpression}) AND (attribute_not_exists(bufferedIds) OR (NOT contains(bufferedIds, :hitId) AND size(bufferedIds) < :maxBuffered))`,
              ExpressionAttributeValues: {
                ...update.ExpressionAttributeValues,
                ':hitId': digest,
                ':bufferIds': new Set([digest]),
                ':maxBuffered': MAX_BUFFERED_IDS,
              },
            }),
          ),
        );
        await unplaced(Attributes, at);
        const attempt = attemptFromItem(Attributes ?? {});
        await settleDrained(attempt, hit, at, hitEffect(attempt, hit.channel, hit.outcome));
        return true;
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      }
      // Refused: either a repeat, or the set is full. Only a full set without this digest still counts the hit,
      // now without remembering it (a replay of it could then count again; the item stays bounded).
      const item = await currentItem(hit);
      const held = item?.bufferedIds instanceof Set ? (item.bufferedIds as Set<string>) : new Set<string>();
      if (held.size < MAX_BUFFERED_IDS || held.has(digest)) {
        // A repeat: the delivery before may have recorded the hit and failed to make it stand or to flag (it threw
        // to come back). Both are decided on the attempt as it is, so doing them again changes nothing done.
        if (item) await settleDrained(attemptFromItem(item), hit, at, 'recorded');
        return false;
      }
      try {
        const { Attributes } = await send(() =>
          client.send(
            new UpdateCommand({
              ...update,
              ConditionExpression: notHeld,
              ExpressionAttributeValues: { ...update.ExpressionAttributeValues, ':hitId': digest },
            }),
          ),
        );
        await unplaced(Attributes, at);
        const attempt = attemptFromItem(Attributes ?? {});
        await settleDrained(attempt, hit, at, hitEffect(attempt, hit.channel, hit.outcome));
        return true;
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      }
      // Refused again: this very hit was recorded by a delivery before (its request id is remembered) that failed
      // after its write: what that delivery left undone is done now, as on the repeat path above.
      const recordedBefore = await currentItem(hit);
      if (recordedBefore) await settleDrained(attemptFromItem(recordedBefore), hit, at, 'recorded');
      return false;
    },

    async recordRejectedHit(rejected, signal) {
      const sourceIp = clip(rejected.sourceIp);
      const surveyId = clip(rejected.surveyId);
      // Every field is bounded (the reason can quote the input it refused), and none shows a signature it quotes.
      const quoted = (value: string | undefined, characters?: number) =>
        clip(value === undefined ? undefined : withoutSignatures(value), characters);
      const sample = {
        at: rejected.at,
        requestId: clip(rejected.requestId) ?? 'unknown',
        channel: rejected.channel,
        reason: quoted(rejected.reason, 200) ?? 'unknown',
        surveyId,
        outcome: quoted(rejected.outcome),
        pid: quoted(rejected.pid),
        token: quoted(rejected.token),
        sourceIp,
        expiresAt: Math.floor(Date.parse(rejected.at) / 1000) + REJECTED_RETENTION_DAYS * 86_400,
      };
      // Every field of the sample is written, an absent one as '', so that a later hit of the minute cannot fill in
      // what the first one lacked (a pid of another request beside the first one's reason).
      const fields = Object.entries(sample).map(([name, value]) => [name, value ?? ''] as const);
      await send(() =>
        client.send(
          new UpdateCommand({
            TableName: tableName,
            // Postbacks are counted per claimed survey too, for the health check's per-survey counts.
            Key:
              rejected.channel === 'postback'
                ? rejectedPostbackKey(
                    rejected.at,
                    rejected.code,
                    // Only a well-formed survey id keys: anything else cannot be a survey's and stays short.
                    SURVEY_ID_PATTERN.test(surveyId ?? '') ? (surveyId as string) : '-',
                    sourceIp ?? 'unknown',
                  )
                : rejectedKey(rejected.at, rejected.code, sourceIp ?? 'unknown'),
            // The sample is the minute's first hit; later ones only count, so a flood rewrites nothing. (An SDK
            // retry after a lost answer can count a hit twice: this is a tally for investigation, never money.)
            UpdateExpression: `SET kind = :kind, #code = :code, ${fields
              .map(([name]) => `#${name} = if_not_exists(#${name}, :${name})`)
              .join(', ')} ADD #hits :one`,
            ExpressionAttributeNames: {
              '#code': 'code',
              '#hits': 'hits',
              ...Object.fromEntries(fields.map(([name]) => [`#${name}`, name])),
            },
            ExpressionAttributeValues: {
              ':kind': 'rejected',
              ':code': rejected.code,
              ':one': 1,
              ...Object.fromEntries(fields.map(([name, value]) => [`:${name}`, value])),
            },
          }),
          signal ? { abortSignal: signal } : {},
        ),
      );
    },

    async attemptsOf(surveyId, pid) {
      const items = await queryAll(client, {
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': attemptPartition(surveyId, pid) },
      });
      return items.map(attemptFromItem);
    },

    attemptsOfSurvey: async (surveyId, from, to) => attemptsAt(await attemptKeysOfSurvey(surveyId, from, to)),

    attemptsAt,

    attemptKeysOfSurvey,

    attemptsByToken,

    async rejectedHits(day) {
      return rejectedFromItems(
        await queryAll(client, {
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': `REJECTED#${day}` },
        }),
      );
    },

    async rejectedHitsBetween(from, to) {
      const items: Item[] = [];
      const last = new Date(to.getTime() - 1).toISOString().slice(0, 16);
      for (const day of utcDaysBetween(from, to)) {
        items.push(
          ...(await queryAll(client, {
            TableName: tableName,
            KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
            ExpressionAttributeValues: {
              ':pk': `REJECTED#${day}`,
              ':from': from.toISOString().slice(0, 16),
              // Every sort key of the last minute starts with it and goes on with `#` (or `:` on old items).
              ':to': `${last}~`,
            },
          })),
        );
      }
      return rejectedFromItems(items);
    },
  };
}

/**
 * The day-index partitions that can hold a survey's attempts of a UTC day: its own, and, until the backfill has
 * moved them, the day-wide one attempts were indexed under before the index was split by survey (see
 * ledger-schema). Reading both keeps a table written by an earlier release whole; the second query of an empty
 * partition costs half a read unit and a round trip.
 */
function dayPartitions(
  surveyId: string,
  day: string,
  legacy: boolean,
): { partition: string; sortPrefix: string }[] {
  return [
    ...attemptDayPartitions(surveyId, day).map((partition) => ({ partition, sortPrefix: '' })),
    ...(legacy ? [{ partition: legacyAttemptDayPartition(day), sortPrefix: `${surveyId}#` }] : []),
  ];
}

/**
 * Refuses a hit whose id its slot remembers. A postback's id is refused too while the set of every postback id an
 * earlier release kept (`postbackHitIds`, never written now) holds it: a retry that straddles the upgrade is not
 * counted twice. `contains` on a missing attribute is false, so items without the set cost nothing more.
 */
const hitIdCondition = (channel: Hit['channel'], slot: string) =>
  channel === 'postback'
    ? `(attribute_not_exists(${slot}) OR ${slot} <> :hitId) AND NOT contains(postbackHitIds, :hitId)`
    : `attribute_not_exists(${slot}) OR ${slot} <> :hitId`;

/**
 * The one UpdateItem a hit is (see the module comment): set what is not there yet, add to the counters. With a
 * hit id (the request's), a write that was applied but whose answer was lost is not counted again when retried
 * or replayed from the buffer. Each channel remembers a fixed number of ids (a 48-bit digest each), one per slot,
 * the slot chosen by the id's digest: redirects, which anyone holding the URL can repeat at will, four; postbacks,
 * which a marketplace retrying without end (or a leaked postback URL) can repeat as well, eight. No one can grow an
 * item by repeating a hit (a set of every postback id grew 11 bytes a hit, to DynamoDB's 400 KB item limit, after
 * which the attempt's postbacks would fail). A retried write whose answer was lost is refused while its slot still
 * holds it, so another request of the same hit in between only counts it twice when it falls in the same slot, one
 * chance in REDIRECT_ID_SLOTS (POSTBACK_ID_SLOTS). Items written before keep their `postbackHitIds` set as it was,
 * still consulted (hitIdCondition).
 */
function hitUpdate(hit: Hit, at: Date, hitId?: string, seenAt: Date = at, drained = false, indexed = true) {
  const now = at.toISOString();
  const set = [
    // A drained hit's sighting keeps when it was made; when the ledger learned of it is kept apart.
    ...(drained ? ['drainedAt = :seen'] : []),
    'kind = :kind',
    'surveyId = :surveyId',
    'pid = :pid',
    '#token = :token',
    'firstSeenAt = if_not_exists(firstSeenAt, :now)',
    'lastSeenAt = :seen',
    ...(indexed
      ? ['gsi1pk = if_not_exists(gsi1pk, :gsi1pk)', 'gsi1sk = if_not_exists(gsi1sk, :gsi1sk)']
      : []),
    '#standing = if_not_exists(#standing, :outcome)',
    '#sightingAt = if_not_exists(#sightingAt, :now)',
  ];
  if (hit.channel === 'postback') set.push('postbackSource = if_not_exists(postbackSource, :source)');
  if (hit.channel === 'redirect' && hit.from) set.push('redirectFrom = if_not_exists(redirectFrom, :from)');
  const digest = hitId ? hitDigest(hitId) : '';
  const slot = hitId ? hitIdSlot(hit.channel, digest) : '';
  if (hitId) set.push(`${slot} = :hitId`);
  const key = attemptKey(hit.surveyId, hit.pid, hit.token);
  const day = attemptDayKey(hit.surveyId, key.sk, now);
  return {
    ...(hitId ? { ConditionExpression: hitIdCondition(hit.channel, slot) } : {}),
    TableName: '',
    Key: key,
    UpdateExpression: `SET ${set.join(', ')} ADD #sightingHits :one`,
    ExpressionAttributeNames: {
      '#token': 'token',
      '#standing': standingOutcome(hit.channel),
      '#sightingAt': sightingAt(hit.channel, hit.outcome),
      '#sightingHits': sightingHits(hit.channel, hit.outcome),
    } as Record<string, string>,
    ExpressionAttributeValues: {
      ':kind': 'attempt',
      ':surveyId': hit.surveyId,
      ':pid': hit.pid,
      ':token': hit.token,
      ':now': now,
      ':seen': seenAt.toISOString(),
      ...(indexed ? { ':gsi1pk': day.gsi1pk, ':gsi1sk': day.gsi1sk } : {}),
      ':outcome': hit.outcome,
      ':one': 1,
      ...(hit.channel === 'postback' ? { ':source': hit.source } : {}),
      ...(hit.channel === 'redirect' && hit.from ? { ':from': hit.from } : {}),
      ...(hitId ? { ':hitId': digest } : {}),
    } as Record<string, unknown>,
    ReturnValues: 'ALL_NEW' as const,
  };
}

/**
 * The item a first hit creates on an empty key: what `recordHit` writes when nothing was there. For bulk
 * loading (benchmarks, imports); a test keeps the two identical.
 */
export function firstHitItem(hit: Hit, at: Date): Item {
  const now = at.toISOString();
  const key = attemptKey(hit.surveyId, hit.pid, hit.token);
  return {
    ...key,
    ...attemptDayKey(hit.surveyId, key.sk, now),
    kind: 'attempt',
    surveyId: hit.surveyId,
    pid: hit.pid,
    token: hit.token,
    firstSeenAt: now,
    lastSeenAt: now,
    [standingOutcome(hit.channel)]: hit.outcome,
    [sightingAt(hit.channel, hit.outcome)]: now,
    [sightingHits(hit.channel, hit.outcome)]: 1,
    ...(hit.channel === 'postback' ? { postbackSource: hit.source } : {}),
    ...(hit.channel === 'redirect' && hit.from ? { redirectFrom: hit.from } : {}),
  };
}

/** Reads an attempt item back into the domain's shape. */
export function attemptFromItem(item: Item): Attempt {
  const record = (channel: Channel) => {
    const sightings: Sighting[] = [];
    for (const outcome of outcomesOf(channel)) {
      const firstAt = item[sightingAt(channel, outcome)];
      if (typeof firstAt === 'string') {
        sightings.push({ outcome, firstAt, hits: Number(item[sightingHits(channel, outcome)] ?? 0) });
      }
    }
    return channelRecord(item[standingOutcome(channel)] as Outcome | undefined, sightings);
  };
  const redirectRecord = record('redirect');
  const redirect = redirectRecord && {
    ...redirectRecord,
    ...(typeof item.redirectFrom === 'string' ? { from: item.redirectFrom } : {}),
  };
  const postbackRecord = record('postback');
  const postback = postbackRecord && {
    ...postbackRecord,
    ...(item.postbackSource ? { source: item.postbackSource as HitSource } : {}),
  };
  return {
    surveyId: String(item.surveyId),
    pid: String(item.pid),
    token: String(item.token),
    ...(typeof item.firstSeenAt === 'string' ? { firstSeenAt: item.firstSeenAt } : {}),
    ...(typeof item.lastSeenAt === 'string' ? { lastSeenAt: item.lastSeenAt } : {}),
    ...(redirect ? { redirect } : {}),
    ...(postback ? { postback } : {}),
    complete: completeEvidence(redirect, postback),
    conflict: hasConflict(redirect, postback),
    ...(typeof item.verdict === 'string' ? { reconciliation: reconciliationFromItem(item) } : {}),
    ...(typeof item.arrivedAs === 'string' ? { arrivedAs: item.arrivedAs } : {}),
    ...(typeof item.drainedAt === 'string' ? { drainedAt: item.drainedAt } : {}),
    ...placedOf(item),
  };
}

/** Where the day index (or the feed) files the item, when not by its first sighting (`Attempt.placedAt`). */
function placedOf(item: Item): { placedAt?: string } {
  const sk = item.gsi1sk;
  const placed =
    typeof item.placedAt === 'string'
      ? item.placedAt
      : typeof sk === 'string'
        ? sk.slice(sk.lastIndexOf('#') + 1) || undefined
        : undefined;
  return placed !== undefined && placed !== item.firstSeenAt ? { placedAt: placed } : {};
}

function reconciliationFromItem(item: Item): AttemptReconciliation {
  return {
    verdict: String(item.verdict),
    day: String(item.verdictDay),
    detail: (item.verdictDetail ?? {}) as AttemptReconciliation['detail'],
    at: String(item.verdictAt),
    ...(item.marketplace ? { marketplace: item.marketplace as AttemptReconciliation['marketplace'] } : {}),
    history: (item.verdictHistory ?? []) as AttemptReconciliation['history'],
  };
}

/** A field of a refused hit's sample; '' is one its first hit did not have. */
const sampled = (value: unknown): string | undefined => optionalString(value) || undefined;

function rejectedFromItems(items: readonly Item[]): RejectedHits[] {
  return items
    .map((item) => ({
      at: String(item.at),
      requestId: String(item.requestId),
      channel: item.channel as Channel,
      code: optionalString(item.code),
      reason: String(item.reason),
      surveyId: sampled(item.surveyId),
      outcome: sampled(item.outcome),
      pid: sampled(item.pid),
      token: sampled(item.token),
      sourceIp: sampled(item.sourceIp),
      // Records written before refusals were counted are one hit each.
      hits: typeof item.hits === 'number' ? item.hits : 1,
    }))
    .sort((a, b) => a.at.localeCompare(b.at));
}

/** When an attempt was first known: first seen here, or clicked in at the marketplace. */
export const attemptTime = (a: Attempt): string =>
  a.firstSeenAt ?? a.reconciliation?.marketplace?.clickedAt ?? '';

/** The UTC days an interval [from, to) touches. */
export function utcDaysBetween(from: Date, to: Date): string[] {
  const days: string[] = [];
  for (let day = utcDay(from.toISOString()); day < to.toISOString(); ) {
    days.push(day);
    const next = new Date(`${day}T00:00:00.000Z`);
    next.setUTCDate(next.getUTCDate() + 1);
    day = utcDay(next.toISOString());
  }
  return days;
}

/**
 * Raw values from refused hits are attacker-controlled: keep them short, printable and well-formed (cut
 * between code points, never inside a surrogate pair, which DynamoDB would refuse as invalid UTF-8).
 */
function clip(value: string | undefined, characters = 100): string | undefined {
  if (value === undefined || value === '') return undefined;
  return Array.from(value.replace(/[\p{Cc}\p{Cs}]/gu, '?'))
    .slice(0, characters)
    .join('');
}

const optionalString = (value: unknown): string | undefined =>
  typeof value === 'string' ? value : undefined;
