/**
 * What the health rules read, from what the receivers already wrote: a survey's attempts first seen in the
 * trailing span (through the day index: a keys-only Query per UTC day, then BatchGet; or, with the attempt feed,
 * from the feed: a Query per bucket of surveys and UTC day for every survey at once), refused postbacks of the
 * window (one key-range Query per UTC day for every survey at once), the survey registry's entry, and the
 * stored health. Nothing here is on the hit path: a hit still costs one write and no read.
 */
import { type AttemptFeed, attemptsOfBucketSpan, feedBucket } from '../ledger/attempt-feed';
import type { AttemptItemKey } from '../ledger/attempt-store';
import { FEED_CLOCK_MARGIN_MS } from '../ledger/feed-keys';
import { attemptKey } from '../ledger/ledger-schema';
import type { LedgerStore, RejectedHits, SurveyRegistration } from '../ledger/ledger-store';
import type { Attempt } from '../receiving/attempt';
import {
  type AttemptSightings,
  type HealthSettings,
  type RefusedPostbacks,
  type RegistrationFacts,
  readFrom,
  type SurveyWindow,
} from './health-rules';

/** When each channel of an attempt first reported: the only part of an attempt the rules read. */
export function sightingsOf(attempt: Attempt): AttemptSightings {
  const first = (times: readonly string[]) => [...times].sort()[0];
  const redirects = attempt.redirect?.sightings ?? [];
  const postbacks = attempt.postback?.sightings ?? [];
  return {
    pid: attempt.pid,
    token: attempt.token,
    ...(attempt.redirect?.from ? { redirectFrom: attempt.redirect.from } : {}),
    redirectAt: first(redirects.map((s) => s.firstAt)),
    successRedirectAt: redirects.find((s) => s.outcome === 'success')?.firstAt,
    postbackAt: first(postbacks.map((s) => s.firstAt)),
    successPostbackAt: postbacks.find((s) => s.outcome === 'success')?.firstAt,
  };
}

/** Refused postbacks by the survey they claimed; refused redirects are left out (they key no survey). */
export function refusedBySurvey(hits: readonly RejectedHits[]): Map<string, RefusedPostbacks[]> {
  const bySurvey = new Map<string, RefusedPostbacks[]>();
  for (const hit of hits) {
    if (hit.channel !== 'postback' || !hit.surveyId || !hit.code) continue;
    const list = bySurvey.get(hit.surveyId) ?? [];
    list.push({ at: hit.at, code: hit.code, hits: hit.hits, pid: hit.pid });
    bySurvey.set(hit.surveyId, list);
  }
  return bySurvey;
}

export const registrationFacts = (registration: SurveyRegistration): RegistrationFacts => ({
  verified: registration.verified,
  lastError: registration.lastError,
  lastErrorAt: registration.lastErrorAt,
  ...(registration.unavailableFailures ? { unavailableFailures: registration.unavailableFailures } : {}),
  failures: registration.failures,
});

/** The refused postbacks of the window, every survey's, in one read per UTC day. */
export async function readRefused(
  store: Pick<LedgerStore, 'rejectedHitsBetween'>,
  settings: HealthSettings,
  now: Date,
): Promise<Map<string, RefusedPostbacks[]>> {
  const from = new Date(now.getTime() - settings.windowMinutes * 60_000);
  return refusedBySurvey(await store.rejectedHitsBetween(from, now));
}

/**
 * What the rules read of attempts whose sightings can no longer change it, kept between the runs of a warm
 * container so that each run reads only the attempts still moving. An attempt both channels have reported is
 * settled: a channel's first sighting never changes, and what a later hit could add (the other outcome on a
 * channel, a contradiction) is for reconciliation, which reads every attempt, not for these rules. A new
 * container starts empty and reads everything once.
 */
/** An attempt item's key as one string. */
const keyOf = (key: AttemptItemKey) => `${key.pk}\n${key.sk}`;

export function sightingsCache() {
  const settled = new Map<string, { readonly firstSeenAt: string; readonly sightings: AttemptSightings }>();
  // Where the last walk forgot up to: every survey of a run keeps with the same `from`, so the cache is walked
  // once a run, not once a survey (thousands of surveys times the settled attempts of the window).
  let forgotBefore = '';
  return {
    get: (key: AttemptItemKey) => settled.get(keyOf(key))?.sightings,
    /** Keeps the settled ones of the attempts just read, and forgets those first seen before `from`. */
    keep(attempts: readonly Attempt[], from: Date) {
      const oldest = from.toISOString();
      if (oldest > forgotBefore) {
        for (const [key, entry] of settled) if (entry.firstSeenAt < oldest) settled.delete(key);
        forgotBefore = oldest;
      }
      for (const attempt of attempts) {
        if (!attempt.redirect || !attempt.postback || !attempt.firstSeenAt) continue;
        settled.set(keyOf(attemptKey(attempt.surveyId, attempt.pid, attempt.token)), {
          firstSeenAt: attempt.firstSeenAt,
          sightings: sightingsOf(attempt),
        });
      }
    },
    get size() {
      return settled.size;
    },
  };
}
export type SightingsCache = ReturnType<typeof sightingsCache>;

/**
 * Every survey's attempts first seen in [from, to), from the attempt feed (ledger/attempt-feed.ts): each bucket of
 * surveys is read once a run, on its first survey's need, and only the batches with a change since `from` (a key
 * range per UTC day). One run of thousands of surveys makes a few dozen Queries where the day index takes four
 * per survey and a batch read of every attempt. The feed runs up to its batching window (five minutes) behind the
 * table: the health check judges as of that much earlier (health-check.ts, `feedLagMs`).
 */
export function feedWindow(feed: Pick<AttemptFeed, 'recordsOfBucketDay'>, from: Date, to: Date) {
  const buckets = new Map<number, Promise<Map<string, Attempt[]>>>();
  const since = new Date(from.getTime() - FEED_CLOCK_MARGIN_MS).toISOString();
  const readBucket = async (bucket: number) => {
    const bySurvey = new Map<string, Attempt[]>();
    for (const attempt of await attemptsOfBucketSpan(feed, bucket, from, to, since)) {
      const list = bySurvey.get(attempt.surveyId) ?? [];
      list.push(attempt);
      bySurvey.set(attempt.surveyId, list);
    }
    return bySurvey;
  };
  return {
    async attemptsOf(surveyId: string): Promise<Attempt[]> {
      const bucket = feedBucket(surveyId);
      let read = buckets.get(bucket);
      if (!read) {
        read = readBucket(bucket);
        buckets.set(bucket, read);
      }
      return (await read).get(surveyId) ?? [];
    },
  };
}
export type FeedWindow = ReturnType<typeof feedWindow>;

/** One survey's window: its attempts of the span the rules need, with what was read once for all surveys. */
export async function readSurveyWindow(
  store: Pick<LedgerStore, 'attemptKeysOfSurvey' | 'attemptsAt'>,
  context: {
    readonly surveyId: string;
    readonly settings: HealthSettings;
    readonly now: Date;
    readonly refused: ReadonlyMap<string, readonly RefusedPostbacks[]>;
    readonly registration?: SurveyRegistration | undefined;
    readonly lastPostbackAt?: string | undefined;
    /** Whether `postbacks_stopped` fired at the last stored evaluation (SurveyWindow.postbacksStopped). */
    readonly postbacksStopped?: boolean | undefined;
    /** Settled attempts already read by an earlier run of this container: not read again. */
    readonly cache?: SightingsCache | undefined;
    /** The run's read of the attempt feed, when the deployment keeps one: the table's items are not read. */
    readonly feed?: FeedWindow | undefined;
    /** The feed's part of a window read from the items: attempts the day index may not hold (feed-coverage.ts). */
    readonly feedAfter?: FeedWindow | undefined;
  },
): Promise<SurveyWindow> {
  const { surveyId, settings, now, cache } = context;
  return {
    surveyId,
    attempts: context.feed
      ? (await context.feed.attemptsOf(surveyId)).map(sightingsOf)
      : await readFromTable(
          store,
          surveyId,
          readFrom(settings, now),
          now,
          cache,
          context.feedAfter ? await context.feedAfter.attemptsOf(surveyId) : [],
        ),
    refused: context.refused.get(surveyId) ?? [],
    registration: context.registration ? registrationFacts(context.registration) : undefined,
    lastPostbackAt: context.lastPostbackAt,
    ...(context.postbacksStopped ? { postbacksStopped: true } : {}),
  };
}

/**
 * Where the look back at a survey failing for `postbacks_stopped` reads (SurveyWindow.earlier): the attempts first
 * seen in [from, to), from the attempt items, the feed (one window a run: each bucket read once for all its
 * surveys), or both while the feed began within the span.
 */
export interface EarlierSource {
  readonly from: Date;
  readonly to: Date;
  readonly items: boolean;
  readonly feed?: FeedWindow;
}

/** A survey's sightings of the look back's span (SurveyWindow.earlier), each attempt once. */
export async function readEarlier(
  store: Pick<LedgerStore, 'attemptKeysOfSurvey' | 'attemptsAt'>,
  source: EarlierSource,
  surveyId: string,
): Promise<AttemptSightings[]> {
  const [items, fed] = await Promise.all([
    source.items
      ? store.attemptKeysOfSurvey(surveyId, source.from, source.to).then((keys) => store.attemptsAt(keys))
      : Promise.resolve([]),
    source.feed ? source.feed.attemptsOf(surveyId) : Promise.resolve([]),
  ]);
  const held = new Set(items.map((a) => keyOf(attemptKey(surveyId, a.pid, a.token))));
  return [...items, ...fed.filter((a) => !held.has(keyOf(attemptKey(surveyId, a.pid, a.token))))].map(
    sightingsOf,
  );
}

/**
 * A survey's sightings of [from, to) from its attempt items: the day index's keys, then the items not cached; and
 * `fed`, the attempts the feed lists past the hour after its start, those the index does not hold.
 */
async function readFromTable(
  store: Pick<LedgerStore, 'attemptKeysOfSurvey' | 'attemptsAt'>,
  surveyId: string,
  from: Date,
  to: Date,
  cache: SightingsCache | undefined,
  fed: readonly Attempt[] = [],
): Promise<AttemptSightings[]> {
  const keys = await store.attemptKeysOfSurvey(surveyId, from, to);
  const indexed = new Set(keys.map(keyOf));
  const unindexed = fed.filter((a) => !indexed.has(keyOf(attemptKey(surveyId, a.pid, a.token))));
  const known = keys.map((key) => cache?.get(key)).filter((s): s is AttemptSightings => s !== undefined);
  const read = await store.attemptsAt(cache ? keys.filter((key) => !cache.get(key)) : keys);
  cache?.keep(read, from);
  return [...known, ...read.map(sightingsOf), ...unindexed.map(sightingsOf)];
}
