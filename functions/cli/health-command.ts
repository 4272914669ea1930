import { Command } from 'commander';
import type { HealthCheckReport } from '../health/health-check';
import { healthCheck } from '../health/health-check';
import { readHealthSettings } from '../runtime/runtime-config';
import { cliContext, unregistered } from './context';
import { collectSurveyIds, feedLagMsOf } from './options';
import { complain, say, sayJson } from './terminal';

/** The health of each survey as the CLI prints it with --json. */
export interface HealthView {
  readonly generatedAt: string;
  readonly surveys: readonly {
    readonly surveyId: string;
    readonly state: string;
    readonly since: string;
    readonly reasons: readonly { readonly code: string; readonly detail: string }[];
    /** Its redirects were removed: no longer watched. */
    readonly removed?: true;
    /** The marketplace closed it: no longer watched. */
    readonly closed?: true;
  }[];
  /** Surveys named that have no registration here (an id mistyped, redirects set by hand): nothing watches them. */
  readonly notWatched?: readonly string[];
}

/**
 * The report as shown: `since` is the stored state's when the stored state is the one found now, else now (the
 * scheduled check has not recorded the change yet, or never needed to: an ok survey is stored only once it was not).
 */
export function healthView(report: HealthCheckReport): HealthView {
  return {
    generatedAt: report.evaluatedAt,
    surveys: report.surveys.map((s) => ({
      surveyId: s.surveyId,
      state: s.evaluation.state,
      since: s.stored && s.stored.state === s.evaluation.state ? s.stored.since : report.evaluatedAt,
      reasons: s.evaluation.reasons.map((r) => ({ code: r.code, detail: r.detail })),
      ...(s.closed ? { closed: true as const } : s.removed ? { removed: true as const } : {}),
    })),
  };
}

/**
 * `health [--survey <id> ...] [--json]`: each active survey's health now, judged by the same rules and settings
 * (`HEALTH_*`) as the scheduled check. Reads only: it stores nothing and notifies no one.
 */
export function healthCommand(): Command {
  return new Command('health')
    .description(
      'each active survey now: ok, warning or failing, with the evidence and what to do (reads only)',
    )
    .option('--survey <id>', 'only this survey (repeat for several)', collectSurveyIds)
    .option('--json', 'print JSON')
    .action(async (options: { survey?: string[]; json?: boolean }) => {
      const context = cliContext();
      // With the attempt feed, read as the scheduled check reads it (each bucket of surveys once, as of its lag ago):
      // the receivers leave the attempts it covers out of the day index.
      const keepsFeed = (await context.feedAsDeployed.state()).startedAt !== undefined;
      const check = healthCheck({
        attempts: context.store,
        registry: context.registry,
        health: context.health,
        settings: readHealthSettings(),
        concurrency: 4,
        ...(keepsFeed
          ? {
              feed: context.feedAsDeployed,
              feedLagMs: feedLagMsOf(),
            }
          : {}),
      });
      // A survey named that has no registration is not judged (it would read as ok): said not to be watched.
      const notWatched = await unregistered(context.registry, options.survey ?? []);
      const named = options.survey?.filter((id) => !notWatched.includes(id));
      const now = new Date();
      const report: HealthCheckReport =
        named?.length === 0
          ? { evaluatedAt: now.toISOString(), surveys: [], failed: [], left: [] }
          : await check.evaluate(now, { surveys: named ?? [] });
      const view = { ...healthView(report), ...(notWatched.length > 0 ? { notWatched } : {}) };
      if (options.json) sayJson(view);
      else if (view.surveys.length === 0 && report.failed.length === 0 && notWatched.length === 0)
        say('no active survey');
      else {
        for (const surveyId of notWatched)
          say(`${surveyId.padEnd(12)} not watched: no redirects registered here (check the id)`);
        for (const survey of view.surveys) {
          say(
            `${survey.surveyId.padEnd(12)} ${survey.state.padEnd(8)} since ${survey.since}${survey.closed ? ' (closed at the marketplace: no longer watched)' : survey.removed ? ' (removed: no longer watched)' : ''}`,
          );
          for (const reason of survey.reasons) say(`  ${reason.code}: ${reason.detail}`);
        }
        // Removed and closed surveys are counted in no state (as the scheduled check counts them): their last state is
        // shown, but nothing watches them, and an "ok" among the totals would say they are watched and healthy.
        const watched = view.surveys.filter((s) => !s.removed && !s.closed);
        const count = (state: string) => watched.filter((s) => s.state === state).length;
        const removed = view.surveys.filter((s) => s.removed).length;
        const closed = view.surveys.filter((s) => s.closed).length;
        const ended = [removed > 0 ? `${removed} removed` : '', closed > 0 ? `${closed} closed` : ''].filter(
          Boolean,
        );
        say(
          `${count('ok')} ok, ${count('warning')} warning, ${count('failing')} failing${ended.length > 0 ? `; ${ended.join(', ')}, not watched` : ''}`,
        );
      }
      if (report.failed.length > 0) {
        complain(
          `could not judge ${report.failed.map((f) => `${f.surveyId} (${f.error instanceof Error ? f.error.message : String(f.error)})`).join(', ')}`,
        );
        process.exitCode = 1;
      }
    });
}
