import { type Command, InvalidArgumentError } from 'commander';
import { DEFAULT_FEED_LAG_SECONDS } from '../ledger/feed-keys';
import { dayProblem, pacificDay } from '../marketplace/pacific-time';
import type { PostbackMethod } from '../marketplace/redirect-settings';
import { type IdentifierField, identifierProblem } from '../receiving/identifiers';

const identifier = (field: IdentifierField) => (value: string) => {
  const problem = identifierProblem(field, value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
};

export const surveyIdOption = identifier('surveyId');
export const pidOption = identifier('pid');
export const tokenOption = identifier('token');

/** A whole number within [min, max], or the option (or the named variable) is refused naming the bounds. */
export const wholeNumberOption =
  (min: number, max: number) =>
  (value: string, name?: unknown): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || n < min || n > max)
      throw new InvalidArgumentError(
        // Commander prints it after "argument '...' is invalid.": a sentence of its own.
        `${typeof name === 'string' ? `${name} ` : 'It '}must be a whole number from ${min} to ${max}`,
      );
    return n;
  };

/** A postback method, GET or POST in any case; refused naming the option (or the variable) otherwise. */
export const methodOption = (value: string, name?: unknown): PostbackMethod => {
  const upper = value.toUpperCase();
  if (upper !== 'GET' && upper !== 'POST')
    throw new InvalidArgumentError(`${typeof name === 'string' ? `${name} ` : ''}must be GET or POST`);
  return upper;
};

/** The method a `POSTBACK_METHOD_*` variable names (as the deployed sync reads it), GET when it is not set. */
export const methodOfVariable = (name: 'POSTBACK_METHOD_SUCCESS' | 'POSTBACK_METHOD_FAIL'): PostbackMethod =>
  methodOption(process.env[name] ?? 'GET', name);

export function dayOption(value: string): string {
  const problem = dayProblem(value);
  if (problem) throw new InvalidArgumentError(`It ${problem}.`);
  return value;
}

/** A repeatable `--survey <id>` option's values, each checked as a survey id, each once (a repeat adds nothing). */
export const collectSurveyIds = (value: string, previous: string[] = []) => {
  const surveyId = surveyIdOption(value);
  return previous.includes(surveyId) ? previous : [...previous, surveyId];
};

/**
 * How far the attempt feed may trail the table (ATTEMPT_FEED_LAG_SECONDS, as the deployed readers are given it;
 * default the stack's batching window and margin): the CLI's readers of the feed judge as of that long ago.
 */
export const feedLagMsOf = (env: NodeJS.ProcessEnv = process.env): number =>
  wholeNumberOption(0, 3_600)(
    env.ATTEMPT_FEED_LAG_SECONDS ?? String(DEFAULT_FEED_LAG_SECONDS),
    'ATTEMPT_FEED_LAG_SECONDS',
  ) * 1000;

/** RECONCILE_MATCHED_VERDICTS as the deployed reconciliation reads it: `kept` (unset) or `implied`. */
export function matchedVerdictsOption(value: string | undefined): 'kept' | 'implied' {
  if (value === undefined || value === '' || value === 'kept') return 'kept';
  if (value === 'implied') return 'implied';
  throw new InvalidArgumentError('RECONCILE_MATCHED_VERDICTS must be kept or implied');
}

/** A command's Pacific days from `--from` and `--to`: today by default, and either one alone that day. */
export function daysOption(options: { from?: string; to?: string }): { from: string; to: string } {
  const from = options.from ?? options.to ?? pacificDay(new Date());
  return { from, to: options.to ?? from };
}

/**
 * Refuses an option given twice that takes one value (`--from 2026-11-27 --from 2026-11-20`): commander keeps the
 * last without a word, where the finance API refuses a repeated parameter.
 */
export function refuseRepeatedOptions(command: Command, argv: readonly string[]): void {
  for (const option of command.options) {
    const flag = option.long;
    // Only an option that collects (`--survey` where a command takes several): one that takes one survey answered
    // for the last given without a word (another survey's URLs, an attempt said not to exist).
    if (!flag || option.parseArg === collectSurveyIds) continue;
    const given = argv.filter((arg) => arg === flag || arg.startsWith(`${flag}=`)).length;
    if (given > 1) throw new Error(`${flag} is given ${given} times: give it once`);
  }
}
