/**
 * `ledger backfill-day-index`: after upgrading a table an earlier release wrote, moves the attempts it indexed
 * under day-wide partitions to their survey's partition, so the readers stop querying both. Safe to stop and run
 * again; `--dry-run` only counts.
 *
 * `ledger rebuild-feed`: writes days of the attempt feed from the attempt items (the days before the feed began, or
 * a batch its consumer set aside), and moves the feed's start back once every survey's days are in it.
 *
 * `ledger index-attempts`: after turning the attempt feed off, puts back into the day index the attempts the
 * receivers left out of it while the feed covered them.
 */
import { Command } from 'commander';
import { cliContext } from './context';
import { collectSurveyIds, dayOption } from './options';
import { complain, say, sayJson } from './terminal';

/** The first day an earlier release may have indexed attempts under a day-wide partition. */
const FIRST_LEGACY_DAY = '2025-01-01';

export function ledgerCommand(): Command {
  const ledger = new Command('ledger').description('maintenance of the ledger table');
  ledger
    .command('backfill-day-index')
    .description(
      "move attempts an earlier release indexed by day alone to their survey's day partition (run once after upgrading; safe to repeat)",
    )
    .option('--from <YYYY-MM-DD>', 'first UTC day to move', dayOption, FIRST_LEGACY_DAY)
    .option('--to <YYYY-MM-DD>', 'last UTC day to move (default today)', dayOption)
    .option('--dry-run', 'only count what would move')
    .option('--json', 'print JSON')
    .action(async (options: { from: string; to?: string; dryRun?: boolean; json?: boolean }) => {
      const { dayIndex } = cliContext();
      const to = options.to ?? new Date().toISOString().slice(0, 10);
      const report = await dayIndex.run({
        from: options.from,
        to,
        dryRun: options.dryRun === true,
        onDay: (day, moved) => {
          if (moved > 0 && !options.json) complain(`${day}: ${moved}`);
        },
      });
      if (options.json) {
        sayJson(report);
        return;
      }
      say(
        `${options.dryRun ? 'would move' : 'moved'} ${report.moved} attempts over ${report.days} days${report.alreadyMoved ? ` (${report.alreadyMoved} had moved already)` : ''}`,
      );
      if (report.unrecognised > 0)
        say(
          `${report.unrecognised} index entries were not attempts and were left alone; the readers keep reading both`,
        );
      if (report.checkpointed) say('the readers now query only the survey partitions');
      else if (!options.dryRun && to < new Date().toISOString().slice(0, 10))
        say('the run did not reach today: run it again up to today to let the readers stop reading both');
    });
  ledger
    .command('rebuild-feed')
    .description(
      'write UTC days of the attempt feed from the attempt items (the days before it began, or a batch its consumer set aside); safe to repeat',
    )
    .requiredOption('--from <YYYY-MM-DD>', 'first UTC day to rebuild', dayOption)
    .option('--to <YYYY-MM-DD>', 'last UTC day to rebuild (default today)', dayOption)
    .option(
      '--survey <id>',
      'only this survey (repeat for several; the feed keeps its start)',
      collectSurveyIds,
    )
    .option('--dry-run', 'only count what would be written')
    .option('--json', 'print JSON')
    .action(
      async (options: { from: string; to?: string; survey?: string[]; dryRun?: boolean; json?: boolean }) => {
        const { feedRebuild } = cliContext();
        const report = await feedRebuild.run({
          from: options.from,
          to: options.to ?? new Date().toISOString().slice(0, 10),
          ...(options.survey ? { surveys: options.survey } : {}),
          dryRun: options.dryRun === true,
          onDay: (day, attempts) => {
            if (attempts > 0 && !options.json) complain(`${day}: ${attempts}`);
          },
        });
        if (options.json) {
          sayJson(report);
          return;
        }
        say(
          `${options.dryRun ? 'would write' : 'wrote'} ${report.attempts} attempts of ${report.surveys} surveys over ${report.days} days`,
        );
        say(
          report.startMovedTo
            ? `the feed now holds every change since ${report.startMovedTo} (it began ${report.feedStart})`
            : `the feed's start stays ${report.feedStart}`,
        );
      },
    );
  ledger
    .command('index-attempts')
    .description(
      'after turning the attempt feed off: put the attempts the receivers left out of the day index (the feed covering them) back in; safe to repeat',
    )
    .option(
      '--from <YYYY-MM-DD>',
      'only attempts first seen on or after this UTC day (default: every one)',
      dayOption,
    )
    .option('--dry-run', 'only count what would be indexed')
    .option('--json', 'print JSON')
    .action(async (options: { from?: string; dryRun?: boolean; json?: boolean }) => {
      const { reindex } = cliContext();
      const report = await reindex.run({
        ...(options.from ? { from: options.from } : {}),
        dryRun: options.dryRun === true,
      });
      if (options.json) {
        sayJson(report);
        return;
      }
      const which = options.from ? ` first seen since ${options.from}` : '';
      say(
        options.dryRun
          ? `would index ${report.unindexed} attempts${which}`
          : `indexed ${report.indexed} of ${report.unindexed} attempts${which} without an index entry`,
      );
    });
  return ledger;
}
