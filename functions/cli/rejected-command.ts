import { Command } from 'commander';
import { cliContext } from './context';
import { dayOption } from './options';
import { say, sayJson } from './terminal';

/**
 * `rejected --day <YYYY-MM-DD>`: refused redirect and postback hits of a UTC day, for investigating forgeries,
 * broken links and stale keys. They are kept counted: one line per source address, refusal code and minute (and,
 * for postbacks, claimed survey), with its first hit as the sample.
 */
export function rejectedCommand(): Command {
  return new Command('rejected')
    .description('list the redirect and postback hits refused on a UTC day (bad signature or malformed)')
    .requiredOption('--day <YYYY-MM-DD>', 'UTC day', dayOption)
    .option('--json', 'print JSON')
    .action(async (options: { day: string; json?: boolean }) => {
      const { store } = cliContext();
      const rejected = await store.rejectedHits(options.day);
      if (options.json) {
        sayJson(rejected);
        return;
      }
      if (rejected.length === 0) {
        say(`no rejected hits on ${options.day} (UTC day)`);
        return;
      }
      for (const hit of rejected) {
        say(
          `${hit.at}  ${hit.channel}  ${hit.hits} × ${hit.code ?? '-'}  ip=${hit.sourceIp ?? '-'}  first: ${hit.reason}  survey=${hit.surveyId ?? '-'} outcome=${hit.outcome ?? '-'} pid=${hit.pid ?? '-'} token=${hit.token ?? '-'}`,
        );
      }
      const total = rejected.reduce((sum, hit) => sum + hit.hits, 0);
      say(
        `${total} rejected hits recorded on ${options.day} (UTC day; ${rejected.length} per source, code and minute; each receiver container records at most five refusals a second, a flood's rest only in the RefusalsNotRecorded metric)`,
      );
    });
}
