/**
 * The operator CLI: `npm run cli -- <command>`. Each command lives in its own module; this file only wires them.
 */
import './one-invocation';
import { Command } from 'commander';
import { StoreUnavailable } from '../ledger/document-client';
import { attemptCommand } from './attempt-command';
import { attemptsCommand } from './attempts-command';
import { bufferCommand } from './buffer-command';
import { healthCommand } from './health-command';
import { ledgerCommand } from './ledger-command';
import { refuseRepeatedOptions } from './options';
import { reconcileCommand } from './reconcile-command';
import { redirectsCommand } from './redirects-command';
import { rejectedCommand } from './rejected-command';
import { reportCommand } from './report-command';
import { complain } from './terminal';
import { urlsCommand } from './urls-command';

const program = new Command('cli')
  .description('Operate the survey postback and redirect receiver')
  .showHelpAfterError()
  .addCommand(urlsCommand())
  .addCommand(attemptCommand())
  .addCommand(attemptsCommand())
  .addCommand(rejectedCommand())
  .addCommand(redirectsCommand())
  .addCommand(reconcileCommand())
  .addCommand(reportCommand())
  .addCommand(healthCommand())
  .addCommand(bufferCommand())
  .addCommand(ledgerCommand())
  .hook('preAction', (_program, command) => refuseRepeatedOptions(command, process.argv.slice(2)));

// Output cut short by its reader (`| head`): nothing more to say, and no stack trace for it.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(process.exitCode ?? 0);
});

try {
  await program.parseAsync(process.argv);
} catch (error) {
  // Against the local stack's engine, nothing answering almost always means the stack is not running.
  const local = process.env.LOCAL_ENGINE === 'embedded' ? process.env.DYNAMODB_ENDPOINT : undefined;
  // Elsewhere (AWS) what the ledger answered, or why nothing did: a region mistyped, no credentials, no table.
  const cause = error instanceof StoreUnavailable && error.cause instanceof Error ? error.cause : undefined;
  const hint =
    error instanceof StoreUnavailable && local
      ? ` (nothing answers at ${local}: is the local stack running? npm start)`
      : cause
        ? ` (${cause.name}: ${cause.message})`
        : '';
  complain(`error: ${error instanceof Error ? error.message : String(error)}${hint}`);
  process.exitCode = 1;
}
