/**
 * The survey health check's evaluation, read-only: every active survey (or the ones asked for) judged by the
 * rules against its recent traffic, beside its stored health. The scheduled function writes and notifies from
 * it; the CLI only shows it, by the same rules (the scheduled check with the attempt feed judges as of the feed's
 * lag ago, and so does the CLI on a table that keeps one; without it, the CLI reads now).
 */

import type { AttemptFeed } from '../ledger/attempt-feed';
import { FEED_CLOCK_MARGIN_MS, FEED_PROBE_UNSEEN_MS, feedOnlyFrom } from '../ledger/feed-keys';
import type { HealthStore, LedgerStore, SurveyHealthRecord, SurveyRegistry } from '../ledger/ledger-store';
import { runBounded } from '../shared/bounded-work';
import {
  evaluateHealth,
  type HealthEvaluation,
  type HealthSettings,
  HOLD_LOOKBACK_MINUTES,
  readFrom,
} from './health-rules';
import {
  type EarlierSource,
  type FeedWindow,
  feedWindow,
  readEarlier,
  readRefused,
  readSurveyWindow,
  type SightingsCache,
} from './health-window';

export interface HealthCheckDependencies {
  readonly attempts: Pick<LedgerStore, 'attemptKeysOfSurvey' | 'attemptsAt' | 'rejectedHitsBetween'>;
  readonly registry: Pick<SurveyRegistry, 'list' | 'many'>;
  readonly health: Pick<HealthStore, 'getMany'> & Partial<Pick<HealthStore, 'resumePoint'>>;
  readonly settings: HealthSettings;
  /** Surveys read at once. */
  readonly concurrency: number;
  /** The scheduled function's, kept while its container is warm: settled attempts are read once. */
  readonly cache?: SightingsCache | undefined;
  /**
   * The attempt feed, when the deployment keeps one (`attemptFeed`): the window's attempts are read from it once it
   * holds every change of the window, and the run judges as of `feedLagMs` earlier.
   */
  readonly feed?: Pick<AttemptFeed, 'recordsOfBucketDay' | 'state'> | undefined;
  /**
   * How far behind the table the feed may be (its batching window and a margin). Judged that much earlier, the feed
   * holds what the attempt items held then, so both say the same: a postback that reached the table but not yet the
   * feed is not held against its survey.
   */
  readonly feedLagMs?: number | undefined;
}

export interface SurveyHealthResult {
  readonly surveyId: string;
  readonly evaluation: HealthEvaluation;
  readonly stored?: SurveyHealthRecord | undefined;
  /** The latest postback this evaluation saw (or the stored one), kept with the next write. */
  readonly lastPostbackAt?: string | undefined;
  /** The survey's redirects were removed, or the marketplace closed it: it is no longer watched, and ends `ok`. */
  readonly removed?: true;
  /** Of those, one the marketplace closed (not removed here). */
  readonly closed?: true;
}

export interface HealthCheckReport {
  readonly evaluatedAt: string;
  /** In survey order. */
  readonly surveys: readonly SurveyHealthResult[];
  /** Surveys whose traffic could not be read (the store was unavailable): judged next run. */
  readonly failed: readonly { readonly surveyId: string; readonly error: unknown }[];
  /** Surveys the run had no time for (its deadline came first): the next run starts with them. */
  readonly left: readonly string[];
  /** With a deadline: the survey this run started at (the last run's first left), if any. */
  readonly resumedFrom?: string | undefined;
}

/**
 * How long after its removal a survey is still looked at: long enough for a run to close the health it had
 * (a removed survey is watched no more, so a failing one would stay failing in finance's reports for ever).
 */
export const REMOVED_SURVEY_LOOKBACK_MS = 7 * 24 * 3_600_000;

/** What a removed survey is judged: nothing to watch, no reason. */
const REMOVED: HealthEvaluation = { state: 'ok', reasons: [] };

export function healthCheck(deps: HealthCheckDependencies) {
  /**
   * Where the next run with a deadline starts in the survey list (by survey id; stored by the scheduled handler,
   * and kept here while the container is warm): a run that cannot judge every survey in its time leaves the rest
   * for the next, which starts there, so no survey goes unwatched because it sorts last.
   */
  let resumeFrom: string | undefined;
  /**
   * Where a run reads the window's attempts, and as of when it judges: with a feed, `feedLagMs` back, from the feed
   * once it began before that window (a feed just turned on holds nothing older than itself), else from the items;
   * without one, from the items, now.
   */
  const attemptSource = async (
    now: Date,
  ): Promise<{
    feed?: FeedWindow;
    feedAfter?: FeedWindow;
    behind?: Error;
    at: Date;
    /** Where the look back before the window reads (SurveyWindow.earlier), built on first need, once a run. */
    earlier: () => EarlierSource;
  }> => {
    const earlierOf = (
      at: Date,
      feed: Pick<AttemptFeed, 'recordsOfBucketDay'> | undefined,
      itemsToo: boolean,
    ) => {
      let source: EarlierSource | undefined;
      return () => {
        if (!source) {
          const from = new Date(at.getTime() - HOLD_LOOKBACK_MINUTES * 60_000);
          const to = readFrom(deps.settings, at);
          source = { from, to, items: itemsToo, ...(feed ? { feed: feedWindow(feed, from, to) } : {}) };
        }
        return source;
      };
    };
    if (!deps.feed) return { at: now, earlier: earlierOf(now, undefined, true) };
    const at = new Date(now.getTime() - (deps.feedLagMs ?? 0));
    const from = readFrom(deps.settings, at);
    const { startedAt: started, touchedAt, seenAt } = await deps.feed.state();
    // The look back reads the feed once it is read at all; the items too while the feed began within its span.
    const earlier =
      started === undefined || seenAt === undefined
        ? earlierOf(at, undefined, true)
        : earlierOf(
            at,
            deps.feed,
            Date.parse(started) > at.getTime() - HOLD_LOOKBACK_MINUTES * 60_000 - FEED_CLOCK_MARGIN_MS,
          );
    // Its consumer behind or stopped (reconciliation's probe touched and not noted for half an hour): a window read
    // from it would lack the traffic since, and every survey would look as if its postbacks stopped. No survey is
    // judged (each fails, retried by the next run) until it catches up.
    if (
      seenAt !== undefined &&
      touchedAt !== undefined &&
      touchedAt > seenAt &&
      now.getTime() - Date.parse(touchedAt) > FEED_PROBE_UNSEEN_MS
    )
      return {
        at,
        earlier,
        behind: new Error(
          `the attempt feed is behind (its probe, touched at ${touchedAt}, is not yet noted by its consumer): not judged until it catches up`,
        ),
      };
    // Judged at the same lagged time either way: runs that switch between the items and the feed do not move the
    // evaluation back and forth (a survey would turn failing, recover and fail again on the same traffic).
    // Not read until its consumer has noted a touch of the probe once, as reconciliation reads it: a consumer that
    // marked the start on its first batch and has been stuck since would show every survey quiet. Until then the
    // receivers index every attempt (feed-coverage.ts), so the items hold them all.
    if (started === undefined || seenAt === undefined) return { at, earlier };
    if (Date.parse(started) > from.getTime() - FEED_CLOCK_MARGIN_MS) {
      // The items hold every attempt first seen before the hour after the feed's start; one after it may be in
      // the feed alone (the receivers leave it out of the day index: feed-coverage.ts), read from there too.
      const cut = feedOnlyFrom(started);
      return at.getTime() > cut
        ? { feedAfter: feedWindow(deps.feed, new Date(cut), at), at, earlier }
        : { at, earlier };
    }
    return { feed: feedWindow(deps.feed, from, at), at, earlier };
  };
  return {
    /**
     * Judges every active survey (and those removed or closed in the last week, which end `ok`), or the ones given
     * (registered or not). Reads only. With a deadline, starts no survey after it (`left`).
     */
    async evaluate(
      now: Date,
      options: { surveys?: readonly string[]; deadline?: Date } = {},
    ): Promise<HealthCheckReport> {
      const removedSince = new Date(now.getTime() - REMOVED_SURVEY_LOOKBACK_MS).toISOString();
      // Live surveys and those ended in the last week: a registry of every survey ever run is not read every run.
      const registrations = new Map(
        (await deps.registry.list({ endedSince: removedSince })).map((r) => [r.surveyId, r]),
      );
      // Surveys named that ended before the listing reaches: read by key, so one removed long ago is said so.
      const named = (options.surveys ?? []).filter((surveyId) => !registrations.has(surveyId));
      if (named.length > 0) for (const r of await deps.registry.many(named)) registrations.set(r.surveyId, r);
      const surveyIds =
        options.surveys && options.surveys.length > 0
          ? [...new Set(options.surveys)]
          : [...registrations.values()]
              .filter((r) =>
                r.state === 'active'
                  ? (r.closedAt ?? '\uffff') >= removedSince
                  : (r.removedAt ?? '') >= removedSince,
              )
              .map((r) => r.surveyId);
      if (options.deadline && deps.health.resumePoint)
        resumeFrom = (await deps.health.resumePoint().catch(() => resumeFrom)) ?? resumeFrom;
      const resumedFrom = options.deadline ? resumeFrom : undefined;
      if (options.deadline && resumeFrom !== undefined) {
        // Surveys are in numeric order: start at the one left first, or the next if it is gone.
        const at = surveyIds.findIndex((surveyId) => Number(surveyId) >= Number(resumeFrom));
        if (at > 0) for (const surveyId of surveyIds.splice(0, at)) surveyIds.push(surveyId);
      }
      const { feed, feedAfter, behind, at, earlier: earlierSource } = await attemptSource(now);
      const [stored, refused] = await Promise.all([
        deps.health.getMany(surveyIds),
        readRefused(deps.attempts, deps.settings, at),
      ]);
      const report = await runBounded(
        surveyIds.map((surveyId) => async (): Promise<SurveyHealthResult> => {
          const previous = stored.get(surveyId);
          const registration = registrations.get(surveyId);
          // Removed here, or closed at the marketplace: nothing to watch any more.
          if (registration?.state === 'removed' || registration?.closedAt !== undefined)
            return {
              surveyId,
              evaluation: REMOVED,
              removed: true,
              ...(registration.state !== 'removed' ? { closed: true as const } : {}),
              ...(previous ? { stored: previous } : {}),
            };
          if (behind) throw behind;
          const window = await readSurveyWindow(deps.attempts, {
            surveyId,
            settings: deps.settings,
            now: at,
            refused,
            registration: registrations.get(surveyId),
            lastPostbackAt: previous?.lastPostbackAt,
            postbacksStopped: previous?.reasons.some((r) => r.code === 'postbacks_stopped'),
            cache: deps.cache,
            feed,
            feedAfter,
          });
          const seen = [window.lastPostbackAt, ...window.attempts.map((a) => a.postbackAt)]
            .filter((t): t is string => t !== undefined)
            .sort()
            .at(-1);
          let evaluation = evaluateHealth(window, deps.settings, at);
          // Postbacks stopped by the window, or failing for it and no redirect to hold it there: the hours before
          // say whether postbacks of earlier redirects still arrive, or it is a lull rather than silence (a read
          // only for such a survey).
          const stopped = evaluation.reasons.some((r) => r.code === 'postbacks_stopped');
          if (
            stopped ||
            (window.postbacksStopped && !window.attempts.some((a) => a.postbackAt !== undefined))
          ) {
            const earlier = await readEarlier(deps.attempts, earlierSource(), surveyId);
            evaluation = evaluateHealth({ ...window, earlier }, deps.settings, at);
          }
          return {
            surveyId,
            evaluation,
            ...(previous ? { stored: previous } : {}),
            ...(seen ? { lastPostbackAt: seen } : {}),
          };
        }),
        { concurrency: deps.concurrency, ...(options.deadline ? { deadline: options.deadline } : {}) },
      );
      const surveys: SurveyHealthResult[] = [];
      const failed: { surveyId: string; error: unknown }[] = [];
      const left: string[] = [];
      report.results.forEach((result, index) => {
        const surveyId = surveyIds[index] as string;
        if (result.status === 'done') surveys.push(result.value);
        else if (result.status === 'failed') failed.push({ surveyId, error: result.error });
        else left.push(surveyId);
      });
      if (options.deadline) resumeFrom = left[0];
      return {
        evaluatedAt: at.toISOString(),
        surveys,
        failed,
        left,
        ...(resumedFrom ? { resumedFrom } : {}),
      };
    },
  };
}

export type HealthCheck = ReturnType<typeof healthCheck>;
