import { Command } from 'commander';
import { MAX_PERIOD_DAYS, periodDays } from '../finance/finance-queries';
import { feedAttempts } from '../reconciliation/feed-attempts';
import { reconciler, totals } from '../reconciliation/reconciler';
import { CLAIM_KINDS, MONEY_KINDS, VERDICT_KINDS } from '../reconciliation/verdict-kinds';
import { cliContext, noteUnregistered, unregistered } from './context';
import {
  collectSurveyIds,
  dayOption,
  daysOption,
  feedLagMsOf,
  matchedVerdictsOption,
  wholeNumberOption,
} from './options';
import { complain, oneLine, say, sayJson } from './terminal';

/** Days of look-back: a whole number from 0 to 62, as the reconcile function accepts. */
const lookbackDaysOption = wholeNumberOption(0, 62);

/** `reconcile --from <day> --to <day> [--survey <id> ...]`: reconcile Pacific days against the marketplace. */
export function reconcileCommand(): Command {
  return new Command('reconcile')
    .description("reconcile the ledger against the marketplace's transactions for Pacific days [from, to]")
    .option('--from <YYYY-MM-DD>', 'first Pacific day (default: today)', dayOption)
    .option('--to <YYYY-MM-DD>', 'last Pacific day (default: --from)', dayOption)
    .option(
      '--survey <id>',
      'only this survey (repeat for several; default: every registered survey)',
      collectSurveyIds,
    )
    .option('--concurrency <n>', 'surveys at once', wholeNumberOption(1, 32), 4)
    .option(
      '--settle-seconds <s>',
      'judge a discrepancy only once it has been quiet this long (default: RECONCILE_SETTLE_SECONDS, else 600)',
      wholeNumberOption(0, 86_400),
    )
    .option(
      '--lookback-days <n>',
      'look for transactions this many Pacific days before the window (default: RECONCILE_LOOKBACK_DAYS, else 7)',
      lookbackDaysOption,
    )
    .option('--json', 'print the full report as JSON')
    .option(
      '--force',
      'reconcile a survey named with --survey that has no registration here (its days then show in finance)',
    )
    .action(
      async (options: {
        from?: string;
        to?: string;
        survey?: string[];
        concurrency: number;
        settleSeconds?: number;
        lookbackDays?: number;
        json?: boolean;
        force?: boolean;
      }) => {
        const context = cliContext();
        const env = process.env;
        const interactive = process.stderr.isTTY;
        // With the attempt feed, surveys read their attempts from it as the scheduled runs do (the receivers leave
        // those it covers out of the day index), each bucket-day once for the bucket's surveys.
        const fromFeed =
          (await context.feedAsDeployed.state()).startedAt === undefined
            ? undefined
            : feedAttempts({
                feed: context.feedAsDeployed,
                items: context.store,
                feedLagMs: feedLagMsOf(),
              });
        const engine = reconciler({
          marketplace: context.marketplace(),
          attempts: context.store,
          ...(fromFeed
            ? {
                attempts: { ...context.store, attemptsOfSurvey: fromFeed.attemptsOfSurvey },
                attemptsLagMs: fromFeed.lagMs,
                attemptsAsOf: fromFeed.asOf,
                readOrder: fromFeed.inReadOrder,
              }
            : {}),
          registry: context.registry,
          results: context.results,
          concurrency: options.concurrency,
          settleMs:
            (options.settleSeconds ??
              wholeNumberOption(0, 86_400)(
                env.RECONCILE_SETTLE_SECONDS ?? '600',
                'RECONCILE_SETTLE_SECONDS',
              )) * 1000,
          lookbackDays:
            options.lookbackDays ??
            lookbackDaysOption(env.RECONCILE_LOOKBACK_DAYS || '7', 'RECONCILE_LOOKBACK_DAYS'),
          // As the deployed function judges (the stack's `matchedVerdicts`): either way the verdicts are the same.
          impliedMatches: matchedVerdictsOption(env.RECONCILE_MATCHED_VERDICTS) === 'implied',
          onSurvey: (outcome, done, total) => {
            if (interactive) process.stderr.write(`\r${done}/${total} surveys${done === total ? '\n' : ''}`);
            else if (outcome.status === 'failed')
              complain(`survey ${outcome.surveyId} failed: ${outcome.error}`);
          },
        });
        const { from, to } = daysOption(options);
        // A period of years would list every day of every survey at once (and time out as "the ledger store is
        // unavailable"): as long as finance's longest period, which covers the review horizon.
        const span = periodDays(from, to);
        if (span < 1) throw new Error('--from must not be after --to');
        if (span > MAX_PERIOD_DAYS)
          throw new Error(
            `reconcile at most ${MAX_PERIOD_DAYS} days at a time (asked for ${span}: run it in parts)`,
          );
        // A mistyped id would write its days' summaries, and show in every report after: refused unless forced.
        if (options.force)
          await noteUnregistered(
            context.registry,
            options.survey ?? [],
            'reconciling it anyway (--force: its days will show in finance)',
          );
        else {
          const missing = await unregistered(context.registry, options.survey ?? []);
          if (missing.length > 0)
            throw new Error(
              `survey ${missing.join(', ')} has no redirects registered here (check the id; --force reconciles it anyway, and its days then show in finance)`,
            );
        }
        const report = await engine.run(from, to, options.survey);
        const sum = totals(report.outcomes);
        if (options.json) {
          sayJson({ ...report, totals: sum });
        } else {
          say(
            `reconciled ${from}..${to} (Pacific days): ${sum.reconciled} surveys, ${sum.transactions} transactions, ${sum.attempts} attempts here`,
          );
          for (const kind of VERDICT_KINDS) {
            const n = sum.verdicts[kind] ?? 0;
            if (n > 0)
              say(
                `  ${kind.padEnd(22)} ${String(n).padStart(7)}${MONEY_KINDS.has(kind) ? '  (money)' : CLAIM_KINDS.has(kind) ? '  (unverified claim, not money: a burst is a forgery signal)' : ''}`,
              );
          }
          say(`  verdicts new ${sum.new}, changed ${sum.changed}; ${sum.awaiting} too recent to judge yet`);
          say(
            `  late finishers: ${sum.readByKey} attempts read by key, ${sum.lookbacks} look-back calls, ${sum.earlier} attempts left to their earlier click day${sum.superseded > 0 ? `, ${sum.superseded} items retired (their transaction's attempt arrived under another pid)` : ''}${sum.withdrawn > 0 ? `, ${sum.withdrawn} items withdrawn (their transaction is listed no more)` : ''}${sum.collapsed > 0 ? `, ${sum.collapsed} verdicts cleared (their respondent is judged by another attempt)` : ''}`,
          );
          for (const outcome of report.outcomes) {
            for (const change of outcome.changed)
              say(
                `  survey ${outcome.surveyId} token ${oneLine(change.token)}: ${change.from} -> ${change.to}`,
              );
            // Only the first few are shown: said, with where the rest are (a buyer invalidating a batch).
            const unshown = outcome.changes.changed - outcome.changed.length;
            if (unshown > 0)
              say(
                `  survey ${outcome.surveyId}: ${unshown} more changed verdicts not shown; its discrepancies as they stand: npm run cli -- report --from ${from} --to ${to} --survey ${outcome.surveyId} --format csv --table discrepancies`,
              );
            if (outcome.malformedRows > 0)
              say(
                `  survey ${outcome.surveyId}: ${outcome.malformedRows} unreadable transaction rows skipped`,
              );
            if (outcome.duplicateRows > 0)
              say(
                `  survey ${outcome.surveyId}: ${outcome.duplicateRows} rows of a token listed twice counted once (on the earliest day listing it)`,
              );
            if (outcome.elsewhereRows)
              say(
                `  survey ${outcome.surveyId}: ${outcome.elsewhereRows} rows that ended before the survey was this stack's or after its removal, nothing here heard of, left out`,
              );
          }
        }
        // Days outside those asked for that the run needed and could not read: the days asked for are reconciled,
        // with what the last run found of those.
        for (const outcome of report.outcomes)
          if (outcome.openFailures > 0)
            complain(
              `survey ${outcome.surveyId}: ${outcome.openFailures} listings of days outside ${from}..${to} failed (${outcome.openError ?? 'no error given'}); what an earlier run found of them stands, read again by the next run`,
            );
        const failed = report.outcomes.filter((o) => o.status === 'failed');
        if (failed.length > 0) {
          complain(
            `${failed.length} of ${report.outcomes.length} surveys could not be reconciled: ${failed.map((f) => `${f.surveyId} (${f.error})`).join('; ')}`,
          );
          process.exitCode = 1;
        }
        // Not taken up: the marketplace asked for no calls for a while, or stopped answering.
        const left = report.outcomes.filter((o) => o.status === 'deferred');
        if (left.length > 0) {
          complain(
            `${left.length} of ${report.outcomes.length} surveys were not taken up (${report.marketplaceRefusedUntil ? `the marketplace is refusing calls (429): none is made until ${report.marketplaceRefusedUntil}` : 'the marketplace is not answering'}): run the command again for them${report.marketplaceRefusedUntil ? ' after then' : ''} (${left
              .slice(0, 20)
              .map((o) => o.surveyId)
              .join(', ')}${left.length > 20 ? ', ...' : ''})`,
          );
          process.exitCode = 1;
        }
      },
    );
}
