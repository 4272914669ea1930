/**
 * The scheduled survey health check as a handler: evaluates every active survey, stores what changed, sends one
 * notice per survey turning failing and one when it recovers, and publishes aggregate figures (surveys per state,
 * transitions; never one metric per survey, which would cost a metric per survey a month).
 *
 * A changed state is stored only after its notice was sent: when the notice cannot be sent, the run fails and
 * the next run finds the same transition and sends it again. While a survey stays failing nothing is sent.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import type { HealthStore } from '../ledger/ledger-store';
import { logger, publish } from '../runtime/observability';
import type { HealthCheck } from './health-check';
import type { HealthState, ReasonCode } from './health-rules';
import { healthChange } from './health-transition';
import type { Notifier } from './notifier';

export interface HealthHandlerDependencies {
  readonly check: Pick<HealthCheck, 'evaluate'>;
  readonly store: Pick<HealthStore, 'put'> &
    Partial<Pick<HealthStore, 'putResumePoint' | 'claimNotice' | 'releaseNotice'>>;
  readonly notifier: Notifier;
  readonly now?: () => Date;
}

/**
 * The time kept back from the Lambda's limit for what follows the judging (storing changes, notices, metrics; a
 * quarter of a shorter limit): no survey is started after it, and those left are judged first by the next run (the
 * run does not fail for them).
 */
export const HEALTH_DEADLINE_MARGIN_MS = 20_000;

/**
 * The time kept back from the Lambda's limit for the run's figures and log once notices are being sent: no notice is
 * sent after it, and the changes not notified are not stored, so the next run finds them again and sends them (a
 * supplier-wide event turning every survey failing at once would otherwise time the run out, figures unpublished).
 */
export const HEALTH_NOTICE_MARGIN_MS = 5_000;

export interface HealthTransitionSummary {
  readonly surveyId: string;
  readonly from: HealthState;
  readonly to: HealthState;
  readonly reasons: readonly ReasonCode[];
  readonly notified: boolean;
}

export interface HealthRunSummary {
  readonly evaluatedAt: string;
  readonly ok: number;
  readonly warning: number;
  readonly failing: number;
  readonly turnedFailing: number;
  readonly recovered: number;
  readonly transitions: readonly HealthTransitionSummary[];
  /** Changes neither notified nor stored for lack of time (HEALTH_NOTICE_MARGIN_MS): the next run finds them. */
  readonly deferred?: number;
}

/** The survey health function's handler, from its dependencies. */
export function createHealthHandler(deps: HealthHandlerDependencies) {
  const now = deps.now ?? (() => new Date());
  return middy<unknown, HealthRunSummary>()
    .use(injectLambdaContext(logger, { resetKeys: true }))
    .handler(async (_event: unknown, context: Context) => {
      const at = now();
      const remaining = context?.getRemainingTimeInMillis?.();
      const noticesUntil =
        remaining === undefined ? Number.POSITIVE_INFINITY : Date.now() + remaining - HEALTH_NOTICE_MARGIN_MS;
      /** Changes left for the next run: no time to notify them. */
      let deferred = 0;
      /** The first survey of them: the next run starts there, so it finds them before any other. */
      let firstDeferred: string | undefined;
      const report = await deps.check.evaluate(
        at,
        remaining === undefined
          ? {}
          : {
              deadline: new Date(Date.now() + remaining - Math.min(HEALTH_DEADLINE_MARGIN_MS, remaining / 4)),
            },
      );
      if (report.left.length > 0)
        logger.warn(
          'survey health check ran out of time: the surveys left are judged first by the next run',
          {
            judged: report.surveys.length,
            left: report.left.length,
            firstLeft: report.left[0],
          },
        );
      const failed = report.failed.map((f) => ({ surveyId: f.surveyId, error: describe(f.error) }));
      const counts: Record<HealthState, number> = { ok: 0, warning: 0, failing: 0 };
      const transitions: HealthTransitionSummary[] = [];
      for (const result of report.surveys) {
        // A removed survey is not watched: its health is closed, not counted.
        if (!result.removed) counts[result.evaluation.state]++;
        const change = healthChange(
          result.surveyId,
          result.stored,
          result.evaluation,
          at,
          result.lastPostbackAt,
        );
        if (!change) continue;
        if (Date.now() >= noticesUntil) {
          deferred++;
          firstDeferred ??= result.surveyId;
          continue;
        }
        try {
          // Once per change: a schedule's tick delivered twice runs twice side by side, and both would notify. A
          // claim already taken (that run's, or one whose notice went out before its store failed) sends nothing;
          // the change is stored all the same.
          const revision = change.record.revision;
          const send =
            change.notice !== undefined &&
            (!deps.store.claimNotice || (await deps.store.claimNotice(result.surveyId, revision, at)));
          if (change.notice && !send)
            logger.info('this survey health notice is sent by another run', { surveyId: result.surveyId });
          if (change.notice && send) {
            await deps.notifier
              .notify({
                surveyId: result.surveyId,
                kind: change.notice,
                ...(change.added ? { added: change.added } : {}),
                from: change.from,
                to: change.to,
                at: at.toISOString(),
                reasons: result.evaluation.reasons,
                previousSince: result.stored?.since,
              })
              // Not sent: given back, so the next run, finding the change unstored, claims and sends it.
              .catch(async (error: unknown) => {
                await deps.store.releaseNotice?.(result.surveyId, revision).catch(() => undefined);
                throw error;
              });
          }
          if (!(await deps.store.put(change.record))) {
            logger.info('another run stored this survey health first', { surveyId: result.surveyId });
            continue;
          }
          transitions.push({
            surveyId: result.surveyId,
            from: change.from,
            to: change.to,
            reasons: result.evaluation.reasons.map((r) => r.code),
            notified: send,
          });
        } catch (error) {
          failed.push({ surveyId: result.surveyId, error: describe(error) });
        }
      }
      // Stored only when it moves, so a new container starts where the last run stopped too: at the first change
      // not notified, else the first survey not judged.
      const resumeAt = firstDeferred ?? report.left[0];
      if (resumeAt !== report.resumedFrom && deps.store.putResumePoint)
        await deps.store.putResumePoint(resumeAt).catch((error) =>
          logger.warn('survey health check could not store where the next run starts', {
            error: describe(error),
          }),
        );
      const summary: HealthRunSummary = {
        evaluatedAt: report.evaluatedAt,
        ...counts,
        turnedFailing: transitions.filter((t) => t.to === 'failing' && t.from !== 'failing').length,
        recovered: transitions.filter((t) => t.from === 'failing' && t.to !== 'failing').length,
        transitions,
        ...(deferred > 0 ? { deferred } : {}),
      };
      publish('SurveysOk', summary.ok, {});
      publish('SurveysWarning', summary.warning, {});
      publish('SurveysFailing', summary.failing, {});
      publish('SurveysTurnedFailing', summary.turnedFailing, {});
      publish('SurveysRecovered', summary.recovered, {});
      publish('SurveysLeft', report.left.length, {});
      if (deferred > 0)
        logger.warn('survey health check ran out of time for notices: the next run sends them', {
          deferred,
          sent: transitions.length,
        });
      if (failed.length > 0) {
        logger.error('survey health check incomplete: retried next run', { ...summary, failed });
        throw new Error(
          `survey health check incomplete for ${failed.length} surveys: ${failed
            .slice(0, 5)
            .map((f) => `${f.surveyId} (${f.error})`)
            .join(', ')}`,
        );
      }
      if (transitions.length > 0) logger.info('survey health changed', { ...summary });
      return summary;
    });
}

const describe = (error: unknown) =>
  error instanceof Error ? `${error.name}: ${error.message}` : String(error);
