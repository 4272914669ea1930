import { Command } from 'commander';
import { pacificDay } from '../marketplace/pacific-time';
import type { Attempt } from '../receiving/attempt';
import { identifierProblem } from '../receiving/identifiers';
import { fromOneLine } from '../shared/printable';
import { cliContext } from './context';
import { pidOption, surveyIdOption, tokenOption } from './options';
import { complain, oneLine, printable, say, sayJson } from './terminal';

/** `attempt --survey <id> --pid <pid>`: what the ledger holds for a respondent's attempts at a survey. */
export function attemptCommand(): Command {
  return new Command('attempt')
    .description("show a respondent's attempts at a survey as the ledger holds them")
    .requiredOption('--survey <id>', 'survey id', surveyIdOption)
    .requiredOption('--pid <pid>', "the respondent's pid", pidOption)
    .option('--token <token>', 'only the attempt with this transaction token', tokenOption)
    .option('--json', 'print JSON')
    .action(async (options: { survey: string; pid: string; token?: string; json?: boolean }) => {
      const { store } = cliContext();
      const find = async (pid: string) =>
        (await store.attemptsOf(options.survey, pid)).filter(
          (attempt) => !options.token || attempt.token === options.token,
        );
      let attempts = await find(options.pid);
      // A pid copied from a listing, where a control or invisible character shows as its escape (`a\u0009b`) and a
      // backslash doubled: read as printed when nothing holds it as typed.
      const printed = attempts.length === 0 ? fromOneLine(options.pid) : undefined;
      if (
        printed !== undefined &&
        printed !== options.pid &&
        identifierProblem('pid', printed) === undefined
      ) {
        attempts = await find(printed);
        // Said as typed (its controls escaped, a backslash as typed); with --json on standard error, the output JSON alone.
        const note = `pid ${asTyped(options.pid)} read as printed in a listing (its escapes as the characters they stand for)`;
        if (attempts.length > 0) (options.json ? complain : say)(note);
      }
      if (options.json) {
        sayJson(attempts);
      } else if (attempts.length === 0) {
        say(`no attempt of pid ${asTyped(options.pid)} at survey ${options.survey}`);
      } else {
        say(attempts.map(describeAttempt).join('\n\n'));
      }
      if (attempts.length === 0) process.exitCode = 1;
    });
}

/** A pid as the operator typed it, on one line: its controls escaped, a backslash left as typed. */
const asTyped = (pid: string) => printable(pid).replaceAll('\n', '\\u000a');

function describeAttempt(attempt: Attempt): string {
  const lines = [
    `survey ${attempt.surveyId}  pid ${oneLine(attempt.pid)}  token ${oneLine(attempt.token)}`,
    attempt.firstSeenAt
      ? `  first seen ${attempt.firstSeenAt}  last seen ${attempt.lastSeenAt}`
      : '  never seen here: an item reconciliation keeps for a transaction the marketplace lists',
    `  complete: ${attempt.complete}${attempt.conflict ? '  CONFLICT' : ''}`,
  ];
  const verdict = attempt.reconciliation;
  if (!verdict && attempt.firstSeenAt)
    lines.push(
      `  reconciled: no verdict on it: not judged yet, or it agrees with the marketplace (with the matchedVerdicts setting implied, such an attempt is counted in the figures of ${pacificDay(new Date(attempt.firstSeenAt))} only)`,
    );
  if (verdict) {
    const listed = verdict.marketplace
      ? ` (marketplace: ${verdict.marketplace.status}${verdict.marketplace.verifyToken ? `, ${verdict.marketplace.verifyToken}` : ''}, cpi ${verdict.marketplace.cpi})`
      : '';
    lines.push(
      `  reconciled: ${verdict.verdict} on ${verdict.day} (Pacific day)${listed}, judged ${verdict.at}`,
    );
    // A matched complete's acceptance (Pending to Valid) is not written back (verdict-equality.ts).
    const review = verdict.marketplace?.verifyToken;
    if (
      verdict.verdict === 'matched' &&
      verdict.marketplace?.status === 'Completed' &&
      (review === undefined || /^pending$/i.test(review))
    )
      lines.push(
        '  (the review as listed when judged: an acceptance since then is counted in the day, not here)',
      );
  }
  for (const channel of ['postback', 'redirect'] as const) {
    const record = attempt[channel];
    if (!record) {
      lines.push(`  ${channel}: none`);
      continue;
    }
    const sightings = record.sightings.map((s) => `${s.outcome} x${s.hits} since ${s.firstAt}`).join('; ');
    lines.push(`  ${channel}: ${record.outcome} (${record.hits} hits: ${sightings})`);
  }
  return lines.join('\n');
}
