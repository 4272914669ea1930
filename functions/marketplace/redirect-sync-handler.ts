/**
 * The scheduled redirect sync as a handler: one sync run up to 30 s before the Lambda's deadline, its figures
 * published and logged.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import type { DayIndexBackfill } from '../ledger/ledger-store';
import { count, logger, publish } from '../runtime/observability';
import { callsStopAt, type RunDeadline } from '../runtime/run-deadline';
import { failuresOf, type RedirectConfiguration, type SyncReport } from './redirect-configuration';

const DEADLINE_MARGIN_MS = 30_000;

export interface SyncSummary {
  readonly since: string;
  readonly checkpoint?: string;
  readonly counts: Record<string, number>;
  readonly failed: { surveyId: string; error: string }[];
  /** Surveys whose redirects the daily read-back found changed at the marketplace, applied again (or tried to). */
  readonly drifted: { surveyId: string; fields: readonly string[] }[];
  readonly malformedRows: number;
  /** Of them, rows naming no survey that reads (the sync configures the others by their id): those surveys wait. */
  readonly unnamedRows: number;
  /** The marketplace refused a survey listing: the rest ran, the checkpoint stayed. */
  readonly listingError?: string;
  /** The hourly list of every live survey was refused: logged, tried again an hour later. */
  readonly fullListingError?: string;
  /** Live surveys only the hourly listing of every live survey found (configured this run). */
  readonly unlisted?: number;
}

export function summarizeSyncRun(report: SyncReport): SyncSummary {
  const counts: Record<string, number> = {};
  for (const result of report.results) counts[result.status] = (counts[result.status] ?? 0) + 1;
  return {
    since: report.since,
    ...(report.checkpoint ? { checkpoint: report.checkpoint } : {}),
    counts,
    failed: failuresOf(report.results).map((r) => ({
      surveyId: r.surveyId,
      error: r.status === 'failed' ? r.error : '',
    })),
    drifted: report.results.flatMap((r) =>
      (r.status === 'applied' || r.status === 'failed') && r.drifted
        ? [{ surveyId: r.surveyId, fields: r.drifted }]
        : [],
    ),
    malformedRows: report.malformed.length,
    unnamedRows: report.malformed.filter((row) => row.reference === undefined).length,
    ...(report.listingError ? { listingError: report.listingError } : {}),
    ...(report.fullListingError ? { fullListingError: report.fullListingError } : {}),
    ...(report.unlisted ? { unlisted: report.unlisted } : {}),
  };
}

/**
 * The redirect sync function's handler, from the configuration engine it drives. After the sync it moves on the
 * day-index backfill (ledger/day-index-backfill.ts), which once finished costs one read a run; a failure there
 * is logged and leaves the readers reading both index layouts, never failing the sync.
 */
export function createRedirectSyncHandler({
  configuration,
  dayIndex,
  calls,
  publicHost,
}: {
  configuration: Pick<RedirectConfiguration, 'sync'>;
  dayIndex?: Pick<DayIndexBackfill, 'settle'>;
  /** When the run's marketplace calls must stop (set here, read by the client the configuration holds). */
  calls?: RunDeadline;
  /** Throws when the receiver's public host does not resolve (public-host.ts): then no survey is touched. */
  publicHost?: () => Promise<void>;
}) {
  return middy<unknown, SyncSummary>()
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .handler(async (_event: unknown, context: Context) => {
      const deadline = new Date(Date.now() + context.getRemainingTimeInMillis() - DEADLINE_MARGIN_MS);
      calls?.set(callsStopAt(context.getRemainingTimeInMillis()));
      try {
        await publicHost?.();
      } catch (error) {
        // The function fails (its errors alarm), and no survey is pointed at a name that leads nowhere.
        count('RedirectSyncFailures');
        logger.error('redirect sync not run', { error: (error as Error).message });
        throw error;
      }
      const summary = summarizeSyncRun(await configuration.sync({ deadline }));
      publish('RedirectsApplied', summary.counts.applied ?? 0, {});
      publish('RedirectsDrifted', summary.drifted.length, {});
      // Every run, 0 or 1: two runs in a row refused alarm (a wrong or missing token, the marketplace down).
      publish('RedirectListingRefused', summary.listingError || summary.fullListingError ? 1 : 0, {});
      if (summary.failed.length > 0 || summary.listingError) {
        count('RedirectSyncFailures');
        logger.warn('redirect sync finished with failures', { ...summary });
      } else if (summary.fullListingError) {
        logger.warn('the list of every live survey was refused; tried again in an hour', { ...summary });
      } else if (summary.drifted.length === 0) {
        logger.info('redirect sync finished', { ...summary });
      }
      // Its own line whatever else the run met (the runbook searches for it; a large supplier always has a survey
      // failing). Field names only (the values are signed URLs): someone changed them at the marketplace.
      if (summary.drifted.length > 0)
        logger.warn('redirects changed at the marketplace were applied again', { drifted: summary.drifted });
      // Surveys listed live whose rows name no survey that reads are configured by no run until they do: said, not
      // only counted (a row whose id reads is configured all the same).
      if (summary.unnamedRows > 0)
        logger.warn(
          'survey rows of the listing name no survey id that reads; those surveys are not configured',
          {
            unnamedRows: summary.unnamedRows,
          },
        );
      if (dayIndex) {
        try {
          const outcome = await dayIndex.settle();
          if (outcome !== 'done') logger.info('day index backfill', { ...outcome });
        } catch (error) {
          logger.warn('day index backfill failed; the readers keep reading both layouts', {
            error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
          });
        }
      }
      return summary;
    });
}
