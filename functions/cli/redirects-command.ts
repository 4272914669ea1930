import { randomBytes } from 'node:crypto';
import { Command, InvalidArgumentError, Option } from 'commander';
import {
  failuresOf,
  type RedirectConfiguration,
  redirectConfiguration,
  type SurveyResult,
} from '../marketplace/redirect-configuration';
import { NOT_KEPT_PER_SURVEY, type PostbackMethod } from '../marketplace/redirect-settings';
import { oneLine, signaturesMarked } from '../shared/printable';
import { cliContext } from './context';
import { collectSurveyIds, methodOfVariable, methodOption, surveyIdOption } from './options';
import { complain, say, sayJson } from './terminal';

interface Common {
  dryRun?: boolean;
  json?: boolean;
  successMethod?: PostbackMethod;
  failMethod?: PostbackMethod;
}

/** The longest an old key may stay accepted after a rotation. */
const MAX_RETIRE_IN_HOURS = 8_760;

/** `redirects ...`: point surveys' redirects and postbacks at this receiver, check them, rotate the signing key. */
export function redirectsCommand(): Command {
  const redirects = new Command('redirects').description(
    "configure surveys' redirects and postbacks at the marketplace",
  );
  const withCommon = (command: Command) =>
    command
      .option('--dry-run', 'print the marketplace calls instead of making them; change nothing')
      .option('--json', 'print JSON')
      .addOption(new Option('--success-method <method>', 'success postback method').argParser(methodOption))
      .addOption(new Option('--fail-method <method>', 'fail postback method').argParser(methodOption));

  withCommon(redirects.command('apply'))
    .description("apply a survey's seven URLs and postback methods, then read them back and compare")
    .requiredOption('--survey <id>', 'survey id (repeat for several)', collectSurveyIds)
    .option('--force', 'apply even when the registry says it is already in place')
    .action(
      async (
        options: Common & {
          survey: string[];
          force?: boolean;
          successMethod?: PostbackMethod;
          failMethod?: PostbackMethod;
        },
      ) => {
        const configuration = configure(options);
        report(await configuration.apply(options.survey, options), options);
      },
    );

  withCommon(redirects.command('sync'))
    .description('configure every live survey created or updated since the last sync, and retry failed ones')
    .action(async (options: Common) => {
      const result = await configure(options).sync(options);
      if (options.json) sayJson(result);
      else {
        say(`since ${result.since}: ${result.discovered} new or changed, ${result.retried} to retry`);
        // By the survey it names, when it names one: a row's place in a listing of thousands finds nothing.
        for (const row of result.malformed)
          say(
            `  unreadable survey ${row.reference !== undefined ? oneLine(row.reference) : `row ${row.index}`}: ${row.problem}`,
          );
        if (result.checkpoint) say(`checkpoint moved to ${result.checkpoint}`);
      }
      report(result.results, { ...options, json: false, quietList: options.json });
      // A listing the marketplace refused (a wrong token, an outage) is no "nothing new": said, and the exit fails.
      for (const [what, error] of [
        ['the listing of surveys changed since the checkpoint', result.listingError],
        ['the listing of every live survey', result.fullListingError],
      ] as const)
        if (error) {
          complain(`${what} failed: ${error}`);
          process.exitCode = 1;
        }
    });

  redirects
    .command('show')
    .description('what the marketplace has for a survey against what this receiver expects')
    .requiredOption('--survey <id>', 'survey id', surveyIdOption)
    .option('--json', 'print JSON')
    .addOption(new Option('--success-method <method>', 'success postback method').argParser(methodOption))
    .addOption(new Option('--fail-method <method>', 'fail postback method').argParser(methodOption))
    .action(async (options: { survey: string; json?: boolean } & Common) => {
      const read = await configure(options).show(options.survey);
      // The postback URLs' signatures behind a mark of each: a postback URL is a credential, and this compares them.
      const comparison = JSON.parse(JSON.stringify(read), (_, value) =>
        typeof value === 'string' ? signaturesMarked(value) : value,
      ) as typeof read;
      if (options.json) sayJson(comparison);
      else {
        const r = comparison.registration;
        say(`survey ${comparison.surveyId}  live: ${comparison.live}`);
        say(
          `registry: ${r ? `${r.state}, key ${r.kid ?? '-'}, applied ${r.appliedAt ?? '-'}, ${r.verified ? `verified${r.verifiedAt ? ` ${r.verifiedAt}` : ''} (as of its last read-back)` : 'not verified'}${r.lastError ? `, last error: ${r.lastError}` : ''}` : 'not registered'}`,
        );
        for (const [field, expected] of Object.entries(comparison.expected)) {
          const actual = comparison.actual[field as keyof typeof comparison.actual];
          const same = comparison.differences.every((d) => d.field !== field);
          // What it does not report, or reports as the supplier's global value, is said as such, not shown as ours.
          const note =
            actual === undefined
              ? '  (not reported by the marketplace)'
              : actual === expected
                ? ''
                : NOT_KEPT_PER_SURVEY.has(field)
                  ? `\n${' '.repeat(22)}reads back ${actual} (not kept per survey by the marketplace; not compared)`
                  : `\n${' '.repeat(22)}reads back ${actual} (the same URL, spelled otherwise)`;
          say(
            `${same ? '  ' : '✗ '}${field.padEnd(19)} ${same ? `${expected}${note}` : `expected ${expected}\n${' '.repeat(22)}actual   ${actual ?? '(none)'}`}`,
          );
        }
        // Changed at the marketplace since its last read-back (its console, another integration): the registry
        // still says verified, and `apply` without --force would answer "unchanged" and make no call, while the
        // completes go to where the marketplace now points (the daily read-back puts it back within a day).
        say(
          comparison.differences.length === 0
            ? 'the marketplace agrees'
            : `${comparison.differences.length} fields differ${r?.state === 'active' ? `: set them again now with npm run cli -- redirects apply --force --survey ${comparison.surveyId}` : ''}`,
        );
      }
      if (comparison.differences.length > 0) process.exitCode = 1;
    });

  withCommon(redirects.command('remove'))
    .description("delete a survey's own redirects (the supplier's global ones apply again)")
    .requiredOption('--survey <id>', 'survey id (repeat for several)', collectSurveyIds)
    .action(async (options: Common & { survey: string[] }) => {
      report(await configure(options).remove(options.survey, options), options);
    });

  withCommon(redirects.command('rotate'))
    .description('add a signing key, make it current, re-apply every active survey; old keys retire later')
    .option('--key-id <kid>', 'id of the new key (default: the next k<n>)')
    .option(
      '--retire-in-hours <hours>',
      'how long URLs signed with the old keys stay accepted',
      (v) => {
        const hours = Number(v);
        if (!Number.isFinite(hours) || hours <= 0 || hours > MAX_RETIRE_IN_HOURS)
          throw new InvalidArgumentError(
            `must be a positive number of hours, at most ${MAX_RETIRE_IN_HOURS} (a year)`,
          );
        return hours;
      },
      168,
    )
    .action(async (options: Common & { keyId?: string; retireInHours: number }) => {
      const configuration = configure(options);
      const rotation = await configuration.rotate(
        {
          ...(options.keyId ? { kid: options.keyId } : {}),
          secret: randomBytes(48).toString('base64url'),
          retireAt: new Date(Date.now() + options.retireInHours * 3_600_000),
        },
        options,
      );
      // With --json, standard output is the JSON alone: the line goes to standard error.
      (options.json ? complain : say)(
        `${options.dryRun ? 'would rotate' : 'rotated'}: new key ${rotation.kid}; ${rotation.previousKid} and older keys accepted until ${rotation.retireAt}`,
      );
      report(rotation.results, options);
      // Surveys left on the old keys lose their postbacks at the retirement unless re-signed before it.
      // Failed, or not taken up (the marketplace not answering for ten surveys in a row stops the rotation's applies).
      const left = rotation.results
        .filter((r) => r.status === 'failed' || r.status === 'deferred')
        .map((r) => r.surveyId);
      if (left.length > 0 && !options.dryRun)
        complain(
          `${left.length} surveys still carry URLs signed with the old keys at the marketplace (${left.slice(0, 20).join(', ')}${left.length > 20 ? ', ...' : ''}): their postbacks are refused from ${rotation.retireAt} unless the sync (hourly) or redirects apply --survey <id> re-signs them first; redirects show --survey <id> says what each holds`,
        );
    });

  return redirects;
}

function configure(options: {
  successMethod?: PostbackMethod;
  failMethod?: PostbackMethod;
}): RedirectConfiguration {
  const context = cliContext();
  const interactive = process.stderr.isTTY;
  return redirectConfiguration({
    marketplace: context.marketplace(),
    registry: context.registry,
    keyRing: context.keyRing,
    saveKeyRing: (ring) => context.keyRingStore.save(ring),
    publicBaseUrl: context.publicBaseUrl,
    // Read when a URL is built (against AWS it must be set): `redirects remove` builds none.
    get postbackBaseUrl() {
      return context.postbackBaseUrl;
    },
    methods: {
      success: options.successMethod ?? methodOfVariable('POSTBACK_METHOD_SUCCESS'),
      fail: options.failMethod ?? methodOfVariable('POSTBACK_METHOD_FAIL'),
    },
    onResult: (_result, done, total) => {
      if (interactive && total > 1)
        process.stderr.write(`\r${done}/${total} surveys${done === total ? '\n' : ''}`);
    },
  });
}

/** Prints the results and sets a non-zero exit code, with a summary of which surveys failed and why. */
function report(results: readonly SurveyResult[], options: Common & { quietList?: boolean | undefined }) {
  if (options.json) sayJson(results);
  else if (!options.quietList) {
    for (const result of results) {
      const detail =
        result.status === 'failed'
          ? `${result.error}${result.drifted ? ` (changed at the marketplace: ${result.drifted.join(', ')}; the apply that followed failed)` : ''}`
          : result.status === 'skipped' || result.status === 'deferred'
            ? result.reason
            : result.status === 'would-apply' || result.status === 'would-remove'
              ? `${result.call.method} ${result.call.path}${result.call.body ? ` ${JSON.stringify(result.call.body)}` : ''}`
              : result.status === 'applied'
                ? `key ${result.kid}, verified${result.drifted ? ` (changed at the marketplace: ${result.drifted.join(', ')})` : ''}`
                : '';
      say(`${result.surveyId.padEnd(12)} ${result.status.padEnd(12)} ${detail}`);
    }
  }
  const failed = failuresOf(results);
  if (failed.length > 0) {
    complain(
      `${failed.length} of ${results.length} surveys failed: ${failed.map((f) => f.surveyId).join(', ')}`,
    );
    process.exitCode = 1;
  }
  // Not taken up (the marketplace not answering for ten surveys in a row): not done either.
  const deferred = results.filter(
    (r): r is Extract<SurveyResult, { status: 'deferred' }> => r.status === 'deferred',
  );
  if (deferred.length > 0) {
    complain(
      `${deferred.length} of ${results.length} surveys were not taken up (${deferred[0]?.reason}): run the command again for them`,
    );
    process.exitCode = 1;
  }
}
