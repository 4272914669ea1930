import { Command } from 'commander';
import { cliContext } from './context';
import { dayOption } from './options';
import { say, sayJson } from './terminal';

/** `rejected --day <YYYY-MM-DD>`: refused redirect hits of a UTC day, for investigating forgeries and broken links. */
export function rejectedCommand(): Command {
  return new Command('rejected')
    .description('list the redirect hits refused on a UTC day (bad signature or malformed)')
    .requiredOption('--day <YYYY-MM-DD>', 'UTC day', dayOption)
    .option('--json', 'print JSON')
    .action(async (options: { day: string; json?: boolean }) => {
      const { store } = cliContext();
      const rejected = await store.rejectedHits(options.day);
      if (options.json) {
        sayJson(rejected);
        return;
      }
      if (rejected.length === 0) say(`no rejected hits on ${options.day}`);
      for (const hit of rejected) {
        say(
          `${hit.at}  ${hit.reason}  survey=${hit.surveyId ?? '-'} outcome=${hit.outcome ?? '-'} pid=${hit.pid ?? '-'} token=${hit.token ?? '-'} ip=${hit.sourceIp ?? '-'}`,
        );
      }
    });
}
