/**
 * `ledger backfill-day-index`: after upgrading a table an earlier release wrote, moves the attempts it indexed
 * under day-wide partitions to their survey's partition, so the readers stop querying both. Safe to stop and run
 * again; `--dry-run` only counts.
 */
import { Command } from 'commander';
import { cliContext } from './context';
import { dayOption } from './options';
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
  return ledger;
}
