import { writeFile } from 'node:fs/promises';
import { Command, InvalidArgumentError } from 'commander';
import { finance, foundWithin, readPeriod } from '../finance/finance-queries';
import { periodSummary } from '../finance/finance-report';
import { discrepanciesCsv, failingSurveysCsv, type SummaryDetail, summaryCsv } from '../finance/report-csv';
import { reportHtml } from '../finance/report-html';
import { Rejection } from '../shared/rejection';
import { cliContext, noteUnregistered } from './context';
import { collectSurveyIds, dayOption, daysOption } from './options';
import { complain } from './terminal';

const choice = (allowed: readonly string[]) => (value: string) => {
  if (!allowed.includes(value)) throw new InvalidArgumentError(`must be one of ${allowed.join(', ')}`);
  return value;
};

/** `report --from <day> --to <day>`: finance's report of a period as JSON, CSV or a self-contained HTML file. */
export function reportCommand(): Command {
  return new Command('report')
    .description('what the marketplace owes, what is missing or disputed, for Pacific days [from, to]')
    .option('--from <YYYY-MM-DD>', 'first Pacific day (default: today)', dayOption)
    .option('--to <YYYY-MM-DD>', 'last Pacific day (default: --from)', dayOption)
    .option('--survey <id>', 'only this survey (repeat for several)', collectSurveyIds)
    .option('--format <format>', 'json, csv or html', choice(['json', 'csv', 'html']), 'json')
    .option(
      '--table <table>',
      'for csv: summary (per survey and day), discrepancies, claims (success redirects nothing backs), or failing (surveys whose health was failing)',
      choice(['summary', 'discrepancies', 'claims', 'failing']),
      'summary',
    )
    .option(
      '--detail <detail>',
      'for the csv summary: days (a row per survey and day), surveys (a row per survey) or totals (one row)',
      choice(['days', 'surveys', 'totals']),
      'days',
    )
    .option(
      '--found-from <YYYY-MM-DD>',
      'for the csv discrepancies: only those found from this Pacific day (with --found-to)',
      dayOption,
    )
    .option(
      '--found-to <YYYY-MM-DD>',
      'for the csv discrepancies: only those found up to this Pacific day',
      dayOption,
    )
    .option('--json', 'the same as --format json (as every other command spells it)')
    .option('--out <file>', 'write to this file instead of standard output', (value: string) => {
      // An empty name (a script's unset variable) would otherwise send the report to standard output.
      if (value.trim() === '') throw new InvalidArgumentError('names no file');
      return value;
    })
    .action(
      async (
        options: {
          from?: string;
          to?: string;
          survey?: string[];
          format: string;
          table: string;
          detail: SummaryDetail;
          json?: boolean;
          out?: string;
          foundFrom?: string;
          foundTo?: string;
        },
        command: Command,
      ) => {
        if (options.json && options.format !== 'json')
          throw new Error(`--json cannot go with --format ${options.format}`);
        // A table or detail asked for that the output would not show: said, not silently ignored.
        const given = (name: string) => command.getOptionValueSource(name) === 'cli';
        if (options.format !== 'csv' && (given('table') || given('detail')))
          throw new Error(
            `--table and --detail choose a CSV table: they go with --format csv, not ${options.format}`,
          );
        if (given('detail') && options.table !== 'summary')
          throw new Error(`--detail is for the summary table, not --table ${options.table}`);
        // What was found in these days, whatever day it is filed under (a reversal of a month already reported).
        let found: ReturnType<typeof foundWithin> | undefined;
        if (options.foundFrom !== undefined || options.foundTo !== undefined) {
          if (options.format !== 'csv' || options.table !== 'discrepancies')
            throw new Error('--found-from and --found-to go with --format csv --table discrepancies');
          try {
            found = foundWithin(
              readPeriod(options.foundFrom, options.foundTo, ['--found-from', '--found-to']),
            );
          } catch (error) {
            throw new Error(error instanceof Rejection ? error.message : String(error));
          }
        }
        const context = cliContext();
        await noteUnregistered(context.registry, options.survey ?? [], 'its figures are zero (check the id)');
        const queries = finance({
          attempts: context.store,
          results: context.results,
          health: { registry: context.registry, store: context.health },
        });
        const { from, to } = daysOption(options);
        let period: ReturnType<typeof readPeriod>;
        try {
          period = readPeriod(from, to);
        } catch (error) {
          throw new Error(error instanceof Rejection ? error.message : String(error));
        }
        // Formats that carry no list of them (CSV) still say when figures are stale: a survey whose reconciliation
        // failed is as of its last good run, as finance's CSV header counts them.
        const sayFailing = (failing: readonly { surveyId: string }[]) => {
          if (failing.length > 0 && options.format === 'csv')
            complain(
              `${failing.length} survey(s) failing reconciliation in this period, their figures as of their last good run: ${failing.map((f) => f.surveyId).join(', ')} (the JSON and HTML reports list them)`,
            );
        };
        // The summary by survey or in all, added up as it is read (as the finance API's): a month of ten thousand
        // surveys is not held row by row, nor its discrepancies read at all.
        if (options.format === 'csv' && options.table === 'summary' && options.detail !== 'days') {
          const [totals, failing] = await Promise.all([
            queries.periodTotals(period, options.survey),
            queries.failingReconciliations(period, options.survey),
          ]);
          sayFailing(failing);
          await emit(summaryCsv(totals, { level: options.detail, ...period }));
          return;
        }
        // By day, the survey-day rows alone: the period's discrepancies, which it never prints, are not read (a
        // month at ten times is millions of them).
        if (options.format === 'csv' && options.table === 'summary') {
          const [rows, failing] = await Promise.all([
            queries.summaryRows(period, options.survey && [...new Set(options.survey)]),
            queries.failingReconciliations(period, options.survey),
          ]);
          sayFailing(failing);
          await emit(summaryCsv(periodSummary(rows).days, { level: options.detail, ...period }));
          return;
        }
        const report = await queries.report(period, options.survey);
        sayFailing(report.reconciliationFailing);
        const output = renderedReport(options, report, () =>
          options.format === 'html'
            ? reportHtml(report)
            : options.format === 'csv'
              ? options.table === 'discrepancies'
                ? discrepanciesCsv(found ? report.discrepancies.filter(found) : report.discrepancies)
                : options.table === 'claims'
                  ? discrepanciesCsv(report.claims)
                  : options.table === 'failing'
                    ? failingSurveysCsv(report.failingSurveys)
                    : summaryCsv(report.days, { level: options.detail, ...period })
              : `${JSON.stringify(report, null, 2)}\n`,
        );
        await emit(output);

        async function emit(text: string) {
          if (options.out) {
            await writeFile(options.out, text);
            complain(`wrote ${options.out}`);
          } else {
            process.stdout.write(text);
          }
        }
      },
    );
}

/**
 * The report as one text: past the longest string the runtime holds (about 512 MB: a month of ten thousand surveys
 * with a few discrepancies a day each, as JSON), refused by saying what is smaller, not with the runtime's "Invalid
 * string length" after minutes of reads.
 */
export function renderedReport(
  asked: { readonly format: string; readonly table?: string; readonly detail?: string },
  report: { readonly discrepancies: readonly unknown[]; readonly days: readonly unknown[] },
  render: () => string,
): string {
  try {
    return render();
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    // What is smaller than what was asked, never the report that failed.
    const smaller = [
      ...(asked.format === 'csv' && asked.table === 'discrepancies'
        ? []
        : ['a table of it (--format csv --table discrepancies)']),
      'the summary by survey or in all (--format csv --table summary --detail surveys or totals), which is added up as it is read',
    ];
    throw new Error(
      `the ${asked.format} report of ${report.discrepancies.length} discrepancies and ${report.days.length} survey-days is too large to write as one text: ask for fewer days or surveys (--from, --to, --survey), ${smaller.join(', or ')}`,
    );
  }
}
