import { Command } from 'commander';
import { cliContext, noteUnregistered } from './context';
import { dayOption, surveyIdOption } from './options';
import { complain, oneLine, say, sayJson } from './terminal';

/** `attempts --survey <id> [--day <YYYY-MM-DD>]`: a survey's attempts first seen on a UTC day. */
export function attemptsCommand(): Command {
  return new Command('attempts')
    .description(
      "list a survey's attempts first seen on a UTC day (through the day index, and the attempt feed where it alone holds them)",
    )
    .requiredOption('--survey <id>', 'survey id', surveyIdOption)
    .option('--day <YYYY-MM-DD>', 'UTC day (default: today)', dayOption)
    .option('--json', 'print JSON')
    .action(async (options: { survey: string; day?: string; json?: boolean }) => {
      const { store, registry } = cliContext();
      const day = options.day ?? new Date().toISOString().slice(0, 10);
      const from = new Date(`${day}T00:00:00.000Z`);
      const to = new Date(from.getTime() + 86_400_000);
      const attempts = await store.attemptsOfSurvey(options.survey, from, to);
      // The attempt feed behind: those first seen since it stopped are in neither the index nor the feed.
      const behind = await store.feedBehindSince();
      if (behind !== undefined) {
        complain(
          `the attempt feed is behind: its consumer has noted nothing since ${behind}, so attempts first seen since are missing from this list (attempt --survey ${options.survey} --pid <pid> reads one whole; the attempt-feed-behind alarm says what to do)`,
        );
        process.exitCode = 1;
      }
      if (options.json) {
        sayJson(attempts);
        return;
      }
      if (attempts.length === 0) {
        say(`no attempts at survey ${options.survey} first seen on ${day} (UTC day)`);
        await noteUnregistered(registry, [options.survey], 'check the id');
      }
      for (const a of attempts) {
        say(
          `${a.firstSeenAt ?? `(not seen here; clicked ${a.reconciliation?.marketplace?.clickedAt ?? '?'})`}  pid ${oneLine(a.pid)}  token ${oneLine(a.token)}  redirect ${a.redirect?.outcome ?? '-'}  postback ${a.postback?.outcome ?? '-'}  ${a.complete}${a.conflict ? '  CONFLICT' : ''}`,
        );
      }
    });
}
