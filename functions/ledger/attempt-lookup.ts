/**
 * The look-ups of a survey's attempts that go through the day index (the CLI's `attempts`, finance's look-up by
 * token, and the CLI's `health` and `reconcile` on a table without a feed, or for spans before it), made whole for a table whose receivers leave the attempts the attempt feed covers out of the
 * index (feed-coverage.ts): a span that reaches past `feedOnlyFrom` also takes the survey's attempts the feed lists
 * there, each read from its item as it stands. A table without a feed (no start mark, or a probe never noted) is
 * read through the index alone, as before; so is a span that ends before the feed covers.
 *
 * The feed is read a bucket-day at a time (a sixteenth of a day's attempts), which costs more than the index's
 * entries of one survey: these are an operator's and finance's look-ups, not the schedules' reads. A feed behind
 * its table (its consumer stopped: the `attempt-feed-behind` alarm) lacks the attempts since.
 */
import type { AttemptFeed } from './attempt-feed';
import type { LedgerStore } from './attempt-store';
import { attemptTime, utcDaysBetween } from './attempt-store';
import { FEED_PROBE_UNSEEN_MS, feedOnlyFrom } from './feed-keys';
import { attemptKey } from './ledger-schema';

/** How long the feed's state read once serves. */
const STATE_KEPT_MS = 10 * 60_000;
/** The feed's days a look-up by token reads at once. */
const DAYS_AT_ONCE = 4;

export type FeedAwareLookups = Pick<
  LedgerStore,
  'attemptKeysOfSurvey' | 'attemptsOfSurvey' | 'attemptsByToken'
> & {
  /**
   * Since when the feed's consumer has noted nothing, when it is behind (the probe's latest touch unseen for
   * FEED_PROBE_UNSEEN_MS): attempts first seen since, which the receivers left out of the index, are in neither, and
   * these look-ups miss them (by pid, `attemptsOf`, they are found). Undefined while it keeps up, or covers nothing.
   */
  feedBehindSince(): Promise<string | undefined>;
};

export function feedAwareLookups(
  store: Pick<LedgerStore, 'attemptKeysOfSurvey' | 'attemptsAt' | 'attemptsByToken'>,
  feed: Pick<AttemptFeed, 'state' | 'attemptsOfSurvey'>,
): FeedAwareLookups {
  /**
   * From when attempts may be in the feed alone (undefined: nowhere), read again after STATE_KEPT_MS: the start
   * moves back when `ledger rebuild-feed` writes earlier days, and anew when the feed is turned off and on again.
   */
  let state: { keptUntil: number; since: Promise<number | undefined> } | undefined;
  const feedOnlySince = (): Promise<number | undefined> => {
    const at = Date.now();
    if (!state || at > state.keptUntil) {
      const since = feed
        .state()
        .then(({ startedAt, seenAt }) =>
          startedAt !== undefined && seenAt !== undefined ? feedOnlyFrom(startedAt) : undefined,
        );
      const kept: { keptUntil: number; since: Promise<number | undefined> } = {
        keptUntil: at + STATE_KEPT_MS,
        since,
      };
      state = kept;
      // Not covering yet is kept a minute only: the receivers may begin leaving attempts out any time.
      since.then(
        (found) => {
          if (found === undefined) kept.keptUntil = at + 60_000;
        },
        () => {
          if (state === kept) state = undefined;
        },
      );
    }
    return state.since;
  };
  /** The part of [from, to) whose attempts may be in the feed alone, if any. */
  const feedOnlyPart = async (from: Date, to: Date): Promise<{ from: Date; to: Date } | undefined> => {
    const since = await feedOnlySince();
    if (since === undefined || to.getTime() <= since) return undefined;
    return { from: new Date(Math.max(from.getTime(), since)), to };
  };

  const attemptKeysOfSurvey: FeedAwareLookups['attemptKeysOfSurvey'] = async (surveyId, from, to) => {
    const part = await feedOnlyPart(from, to);
    const [indexed, listed] = await Promise.all([
      store.attemptKeysOfSurvey(surveyId, from, to),
      part ? feed.attemptsOfSurvey(surveyId, part.from, part.to) : [],
    ]);
    const keys = new Map(indexed.map((key) => [`${key.pk}\u0000${key.sk}`, key]));
    for (const attempt of listed) {
      const key = attemptKey(surveyId, attempt.pid, attempt.token);
      keys.set(`${key.pk}\u0000${key.sk}`, key);
    }
    return [...keys.values()];
  };

  return {
    attemptKeysOfSurvey,

    async feedBehindSince() {
      if ((await feedOnlySince()) === undefined) return undefined;
      const { touchedAt, seenAt } = await feed.state();
      if (touchedAt === undefined || (seenAt ?? '') >= touchedAt) return undefined;
      return Date.now() - Date.parse(touchedAt) > FEED_PROBE_UNSEEN_MS ? (seenAt ?? touchedAt) : undefined;
    },

    attemptsOfSurvey: async (surveyId, from, to) =>
      store.attemptsAt(await attemptKeysOfSurvey(surveyId, from, to)),

    async attemptsByToken(surveyId, token, from, to) {
      const [indexed, part] = await Promise.all([
        store.attemptsByToken(surveyId, token, from, to),
        feedOnlyPart(from, to),
      ]);
      if (!part) return indexed;
      // Every day of the feed's part, a few at once (as a look-up that finds nothing reads them).
      const pids = new Set(indexed.map((attempt) => attempt.pid));
      const days = utcDaysBetween(part.from, part.to);
      for (let i = 0; i < days.length; i += DAYS_AT_ONCE)
        for (const listed of await Promise.all(
          days.slice(i, i + DAYS_AT_ONCE).map((day) => {
            const dayFrom = Math.max(Date.parse(`${day}T00:00:00.000Z`), part.from.getTime());
            const dayTo = Math.min(Date.parse(`${day}T00:00:00.000Z`) + 86_400_000, part.to.getTime());
            return feed.attemptsOfSurvey(surveyId, new Date(dayFrom), new Date(dayTo));
          }),
        ))
          for (const attempt of listed) if (attempt.token === token) pids.add(attempt.pid);
      const more = [...pids].filter((pid) => !indexed.some((attempt) => attempt.pid === pid));
      if (more.length === 0) return indexed;
      const read = await store.attemptsAt(more.map((pid) => attemptKey(surveyId, pid, token)));
      return [...indexed, ...read].sort(
        (a, b) => attemptTime(a).localeCompare(attemptTime(b)) || a.pid.localeCompare(b.pid),
      );
    },
  };
}
