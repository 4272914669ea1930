/**
 * Finance reports as CSV: RFC 4180 quoting (csv-stringify), one header row of stable snake_case names, amounts
 * as decimal strings, and no cell a spreadsheet would read as a formula.
 */
import { stringify } from 'csv-stringify/sync';
import type { FailingSpell } from '../health/health-transition';
import { CLAIM_KINDS, LISTED_DISCREPANCY_KINDS, type VerdictKind } from '../reconciliation/verdict-kinds';
import { oneLine } from '../shared/printable';
import { type Discrepancy, type PeriodTotals, periodSummary, type SurveyDayRow } from './finance-report';

/**
 * A cell a spreadsheet would run as a formula gets a leading `'`: one starting with = + - @, a tab or a carriage
 * return, also after leading spaces (spreadsheets trim them), and with the fullwidth forms ＝ ＋ － ＠ that some
 * spreadsheets fold to ASCII. Applied to every cell, whoever wrote it (receiver, marketplace or respondent).
 */
export function neutralize(value: string): string {
  return /^[\t\r]|^[\s\u3000\p{Cf}]*[=+\-@\uFF1D\uFF0B\uFF0D\uFF20]/u.test(value) ? `'${value}` : value;
}

/**
 * A cell as written: its control characters (a tab or a line end an id may hold), bidirectional controls and
 * invisible characters escaped as `\uXXXX`, as the CLI and the HTML report show them, then neutralised. A tab or a
 * line break kept raw in a quoted cell is valid CSV, but a spreadsheet shows `victim\t42` as `victim 42`: another
 * respondent's id, and the same row read otherwise than the HTML report shows it.
 */
export const csvCell = (value: string): string => neutralize(oneLine(value));

function table(header: readonly string[], rows: readonly (readonly (string | number | boolean)[])[]): string {
  return stringify([header, ...rows.map((row) => row.map((cell) => csvCell(String(cell))))], {
    // `;` too: a spreadsheet set to split on semicolons would otherwise start a new cell (`a;=1+1`) inside one.
    quoted_match: /[",;\r\n']/,
    record_delimiter: '\r\n',
  });
}

/**
 * Kinds added after the summary's columns were first published: their columns come last, so a reader that takes
 * columns by position still finds every earlier one where it was.
 */
const ADDED_KINDS: readonly VerdictKind[] = ['unknown_status'];
const EARLIER_KINDS = LISTED_DISCREPANCY_KINDS.filter((kind) => !ADDED_KINDS.includes(kind));

export const SUMMARY_COLUMNS = [
  'survey_id',
  'day',
  'completes_postback',
  'completes_redirect_only',
  'marketplace_completes',
  'valid_completes',
  'pending_completes',
  'invalid_completes',
  'owed',
  'pending_amount',
  ...EARLIER_KINDS.map((kind) => `discrepancies_${kind}`),
  'money_discrepancies',
  ...[...CLAIM_KINDS].map((kind) => `claims_${kind}`),
  'last_reconciled_at',
  ...ADDED_KINDS.map((kind) => `discrepancies_${kind}`),
  // Added later still, last for the same reason.
  'awaiting',
  'matched',
  // How many survey-days of figures the row adds up (1 on a day's row): a survey's row may cover fewer days than the
  // period its `day` names (days not reconciled yet, or without traffic).
  'survey_days',
] as const;

/**
 * The summary as CSV, one row per survey and day; `detail` `surveys` adds each survey's days up into one row and
 * `totals` everything into one (survey `all`), their `day` the period as an ISO 8601 interval (`from/to`), so a
 * month of thousands of surveys fits an answer with the same columns.
 */
export type SummaryDetail = 'days' | 'surveys' | 'totals';

export function summaryCsv(
  /** The survey-day rows, or (for `surveys` and `totals`) the period's figures added up as they were read. */
  figures: readonly SurveyDayRow[] | PeriodTotals,
  detail: { readonly level: SummaryDetail; readonly from: string; readonly to: string } = {
    level: 'days',
    from: '',
    to: '',
  },
): string {
  const period = `${detail.from}/${detail.to}`;
  const rows = Array.isArray(figures) ? (figures as readonly SurveyDayRow[]) : undefined;
  if (detail.level === 'days' && !rows) throw new Error('a summary by day needs its rows');
  const { surveys, totals } = rows ? periodSummary(rows) : (figures as PeriodTotals);
  const lastOf = (list: readonly { lastReconciledAt: string }[]) =>
    list
      .map((r) => r.lastReconciledAt)
      .sort()
      .pop() ?? '';
  const shown: readonly (SurveyDayRow & { readonly surveyDays: number })[] =
    rows && detail.level === 'days'
      ? rows.map((row) => ({ ...row, surveyDays: 1 }))
      : detail.level === 'surveys'
        ? surveys.map(({ days, ...survey }) => ({ ...survey, day: period, surveyDays: days }))
        : [
            {
              ...totals,
              surveyId: 'all',
              day: period,
              lastReconciledAt: lastOf(surveys),
              surveyDays: surveys.reduce((sum, survey) => sum + survey.days, 0),
            },
          ];
  return table(
    SUMMARY_COLUMNS,
    shown.map((r) => [
      r.surveyId,
      r.day,
      r.completesPostback,
      r.completesRedirectOnly,
      r.marketplaceCompletes,
      r.validCompletes,
      r.pendingCompletes,
      r.invalidCompletes,
      r.owed,
      r.pending,
      ...EARLIER_KINDS.map((kind) => r.discrepancies[kind] ?? 0),
      r.moneyDiscrepancies,
      ...[...CLAIM_KINDS].map((kind) => r.claims[kind] ?? 0),
      r.lastReconciledAt,
      ...ADDED_KINDS.map((kind) => r.discrepancies[kind] ?? 0),
      r.awaiting,
      r.matched,
      r.surveyDays,
    ]),
  );
}

export const DISCREPANCY_COLUMNS = [
  'survey_id',
  'day',
  'pid',
  'token',
  'kind',
  'money',
  'marketplace_status',
  'verify_token',
  'cpi',
  'postback',
  'redirect',
  'since',
  'searched_from',
  'expected_cpi',
] as const;

export function discrepanciesCsv(rows: readonly Discrepancy[]): string {
  return table(
    DISCREPANCY_COLUMNS,
    rows.map((d) => [
      d.surveyId,
      d.day,
      d.pid,
      d.token,
      d.kind,
      d.money,
      d.marketplaceStatus,
      d.verifyToken,
      d.cpi,
      d.postback,
      d.redirect,
      d.since,
      d.searchedFrom,
      d.expectedCpi,
    ]),
  );
}

export const FAILING_COLUMNS = ['survey_id', 'failing_from', 'failing_to', 'reasons'] as const;

/**
 * The surveys failing in the period, one row per spell: `failing_from` empty when it began before the history
 * kept, `failing_to` empty while it still fails; reason codes separated by spaces.
 */
export function failingSurveysCsv(spells: readonly FailingSpell[]): string {
  return table(
    FAILING_COLUMNS,
    spells.map((s) => [s.surveyId, s.from ?? '', s.to ?? '', s.reasons.join(' ')]),
  );
}
