/**
 * `buffer redrive`: after a ledger outage long enough to park buffered hits in the dead-letter queue, moves them
 * back to the buffer, where the drainer records each once. Safe to run twice; `--dry-run` only counts.
 */
import { Command } from 'commander';
import type { DeadLetters, RedriveResult } from '../runtime/dead-letters';
import { cliDeadLetters } from './context';
import { complain, say, sayJson } from './terminal';

export function bufferCommand(): Command {
  const buffer = new Command('buffer').description('the hit buffer (SQS) and its dead-letter queue');
  buffer
    .command('redrive')
    .description(
      'move every hit in the dead-letter queue back to the buffer, where the drainer records each once (safe to run twice)',
    )
    .option('--dry-run', 'only count what the dead-letter queue holds; move nothing')
    .option('--json', 'print JSON')
    .action(async (options: { dryRun?: boolean; json?: boolean }) => {
      const deadLetters = cliDeadLetters();
      const queueUrl = await deadLetters.source().catch((error: unknown) => {
        const local = process.env.RECEIVER_TARGET !== 'aws';
        throw new Error(
          `cannot reach the dead-letter queue ${deadLetters.deadLetterUrl}: ${error instanceof Error ? error.message : String(error)}${local ? ' (is npm start running? it prints its "Hit buffer" endpoint: SQS_ENDPOINT)' : ''}`,
        );
      });
      if (options.dryRun) await dryRun(deadLetters, queueUrl, options.json);
      else await redrive(deadLetters, queueUrl, options.json);
    });
  return buffer;
}

async function dryRun(deadLetters: DeadLetters, queueUrl: string, json?: boolean) {
  const count = await deadLetters.count();
  if (json) {
    sayJson({ dryRun: true, deadLetterQueueUrl: deadLetters.deadLetterUrl, queueUrl, ...count });
    return;
  }
  say(
    `dead-letter queue ${deadLetters.deadLetterUrl}: about ${count.waiting} hits waiting${count.inFlight ? `, ${count.inFlight} being moved or looked at` : ''}`,
  );
  say(`a redrive would move them to ${queueUrl}; nothing was moved (dry run)`);
}

async function redrive(deadLetters: DeadLetters, queueUrl: string, json?: boolean) {
  const interactive = process.stderr.isTTY && !json;
  const result: RedriveResult = await deadLetters.redrive((soFar) => {
    if (interactive) process.stderr.write(`\rmoved ${soFar.moved}`);
  });
  if (interactive) process.stderr.write('\n');
  if (json) sayJson({ deadLetterQueueUrl: deadLetters.deadLetterUrl, queueUrl, ...result });
  else {
    say(
      `moved ${result.by === 'move-task' && result.moved > 0 ? 'about ' : ''}${result.moved} hits from ${deadLetters.deadLetterUrl} to ${queueUrl}${result.by === 'move-task' ? " (SQS's move task)" : ''}; the drainer records each once`,
    );
    if (result.notDeleted > 0)
      say(
        `${result.notDeleted} were moved but not deleted from the dead-letter queue: the next run moves them again, harmlessly`,
      );
  }
  if (result.failed > 0) {
    complain(
      `${result.failed} could not be sent to the buffer and are still in the dead-letter queue: run again`,
    );
    process.exitCode = 1;
  }
}
