/**
 * Scheduled reconciliation as a handler: runs the reconciler over the trailing window, publishes the run's
 * figures, and when a run reaches the Lambda's deadline and `continueSelf` is on, asks to be invoked again at
 * once to resume it.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { count, logger, publish } from '../runtime/observability';
import { callsStopAt, type RunDeadline } from '../runtime/run-deadline';
import { type Reconciler, type RunReport, totals } from './reconciler';
import { VERDICT_KINDS } from './verdict-kinds';

/** Stop taking up surveys this long before the deadline, to finish the ones in hand and save the cursor. */
const DEADLINE_MARGIN_MS = 60_000;

/**
 * A run stopped by the marketplace asking for no calls for a while (a Retry-After longer than the client waits) is
 * resumed by the same invocation once the pause is over, if that leaves this long before the deadline; otherwise
 * by the next scheduled one.
 */
export const RESUME_AFTER_REFUSAL_MIN_MS = 60_000;
/** How many times one invocation waits out such a pause. */
const REFUSALS_WAITED = 3;

/**
 * A survey whose runs have failed this long is counted apart (`SurveysFailingLong`, alarmed): a survey that fails
 * every run (too big for the marketplace's answer or the function's memory, a row that never reads) is not one
 * of the few that a marketplace error fails now and then, whatever share of the surveys it is.
 */
export const FAILING_LONG_MS = 6 * 3_600_000;

/** The failed surveys a run's log line names; the rest are counted (a log event holds 256 KB at most). */
const FAILURES_LOGGED = 50;

export interface ReconcileHandlerDependencies {
  readonly engine: Pick<Reconciler, 'scheduled'>;
  readonly windowDays: number;
  /** Invokes this function again, asynchronously, to resume run `runId`; unset, the next schedule resumes it. */
  readonly resume?: ((functionArn: string, runId: string) => Promise<void>) | undefined;
  /** When the run's marketplace calls must stop (set here, read by the engine's client). */
  readonly calls?: RunDeadline | undefined;
  /** Waits out a pause the marketplace asked for (tests pass their own). */
  readonly sleep?: (ms: number) => Promise<void>;
}

export type ReconcileRunSummary = ReturnType<typeof summarizeReconcileRun> | { busy: true };

/** What a run reports and logs: its totals and the surveys that failed. */
export function summarizeReconcileRun(report: RunReport, now = new Date()) {
  const sum = totals(report.outcomes);
  const failed = report.outcomes.filter((o) => o.status === 'failed');
  const failingLong = failed.filter(
    (o) => o.failingSince !== undefined && now.getTime() - Date.parse(o.failingSince) >= FAILING_LONG_MS,
  );
  return {
    runId: report.runId,
    days: report.days,
    complete: report.complete,
    ...(report.marketplaceUnavailable ? { marketplaceUnavailable: true } : {}),
    ...(report.marketplaceRefusedUntil ? { marketplaceRefusedUntil: report.marketplaceRefusedUntil } : {}),
    ...sum,
    failingLong: failingLong.length,
    // The longest failing first: they are what `SurveysFailingLong` alarms on, and must be among those named.
    failures: [...failed]
      .sort((a, b) => (a.failingSince ?? '~').localeCompare(b.failingSince ?? '~'))
      .slice(0, FAILURES_LOGGED)
      .map((o) => ({
        surveyId: o.surveyId,
        error: o.error ?? '',
        failingSince: o.failingSince ?? '',
      })),
    failuresNotListed: Math.max(0, failed.length - FAILURES_LOGGED),
    // Days the run does not list that could not be read (past the window, or the earlier day of a token listed on two
    // days): the survey reconciled, those days tried again later.
    openDayFailures: report.outcomes
      .filter((o) => o.openFailures > 0)
      .map((o) => ({ surveyId: o.surveyId, error: o.openError ?? '' })),
  };
}

/** The reconcile function's handler, from its dependencies. */
export function createReconcileHandler({
  engine,
  windowDays,
  resume,
  calls,
  sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
}: ReconcileHandlerDependencies) {
  return middy<unknown, ReconcileRunSummary>()
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .handler(async (_event: unknown, context: Context) => {
      const remaining = context.getRemainingTimeInMillis();
      const deadline = new Date(Date.now() + remaining - DEADLINE_MARGIN_MS);
      // A call still hanging then gives up: the survey fails by name instead of the function dying in it.
      calls?.set(callsStopAt(remaining));
      // Held to the Lambda's own limit: until then this invocation may still be finishing its last surveys.
      const leaseUntil = new Date(Date.now() + remaining + 5_000);
      let summary: ReconcileRunSummary | undefined;
      for (let waited = 0; ; waited++) {
        const report = await engine.scheduled(windowDays, { deadline, leaseUntil });
        if (!report) {
          logger.info('another invocation is working on the reconciliation run');
          return summary ?? { busy: true };
        }
        summary = reportRun(report);
        const refusedUntil = report.marketplaceRefusedUntil ? Date.parse(report.marketplaceRefusedUntil) : 0;
        if (refusedUntil === 0) {
          publish('ReconcileHeldOff', 0, {});
          if (!report.complete && !report.marketplaceUnavailable && resume)
            await resume(context.invokedFunctionArn, report.runId);
          return summary;
        }
        const resumable = refusedUntil + RESUME_AFTER_REFUSAL_MIN_MS <= deadline.getTime();
        logger.warn(
          resumable && waited < REFUSALS_WAITED
            ? 'the marketplace is refusing calls (429) for a while: the run resumes when the pause is over'
            : 'the marketplace is refusing calls (429) past what this invocation can wait: the next scheduled invocation resumes the run',
          { runId: report.runId, refusedUntil: report.marketplaceRefusedUntil, left: summary.deferred },
        );
        if (!resumable || waited >= REFUSALS_WAITED) {
          publish('ReconcileHeldOff', 1, {});
          return summary;
        }
        await sleep(Math.max(0, refusedUntil - Date.now()));
      }
    });

  /** Publishes a run's figures and logs how it went. */
  function reportRun(report: RunReport) {
    const summary = summarizeReconcileRun(report);
    publish('ReconciledSurveys', summary.reconciled, {});
    publish('ReconcileFailedSurveys', summary.failed, {});
    publish('SurveysFailingLong', summary.failingLong, {});
    // Surveys left for a pause the marketplace asked for are neither reconciled nor failed: said apart, so that a
    // marketplace that keeps refusing alarms (reconciliation-held-off) rather than hold every check off unseen.
    publish('ReconciledTransactions', summary.transactions, {});
    publish('VerdictChanges', summary.changed + summary.new, {});
    for (const kind of VERDICT_KINDS) publish('Verdicts', summary.verdicts[kind] ?? 0, { verdict: kind });
    if (summary.failed > 0) {
      count('ReconcileFailures');
      logger.warn('reconciliation run finished with failed surveys', { ...summary });
    } else if (summary.held > 0) {
      // Not counted among the failed surveys (their alarm): the next run confirms the empty listing or undoes it.
      logger.warn(
        'reconciliation held surveys whose listing answered no rows for days that had rows; the next run confirms it',
        { ...summary },
      );
    } else if (summary.openFailures > 0) {
      logger.warn('reconciliation run finished; days outside its listing could not be read', {
        ...summary,
      });
    } else {
      logger.info('reconciliation run finished', { ...summary });
    }
    // Stopped because the marketplace does not answer: the next scheduled invocation tries again, not this one
    // at once.
    if (report.marketplaceUnavailable)
      logger.warn(
        'the marketplace did not answer, or refused the access token, for ten surveys in a row: the run stopped taking them up',
        {
          runId: report.runId,
          left: summary.deferred,
        },
      );
    return summary;
  }
}
