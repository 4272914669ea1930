import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { renderedReport } from '../../functions/cli/report-command';
import { readPeriod, SMALLEST_DAY_ROW_BYTES } from '../../functions/finance/finance-queries';
import {
  addUp,
  discrepancyOf,
  financeReport,
  periodFold,
  periodSummary,
  type SurveyDayRow,
} from '../../functions/finance/finance-report';
import {
  discrepanciesCsv,
  failingSurveysCsv,
  neutralize,
  summaryCsv,
} from '../../functions/finance/report-csv';
import { reportHtml } from '../../functions/finance/report-html';
import { VERDICT_KINDS } from '../../functions/reconciliation/verdict-kinds';
import { Rejection } from '../../functions/shared/rejection';

const row = (
  surveyId: string,
  day: string,
  owed: string,
  extra: Partial<SurveyDayRow> = {},
): SurveyDayRow => ({
  surveyId,
  day,
  completesPostback: 3,
  completesRedirectOnly: 1,
  marketplaceCompletes: 4,
  validCompletes: 2,
  pendingCompletes: 1,
  invalidCompletes: 1,
  owed,
  pending: '0.10',
  discrepancies: { invalidated: 1 },
  moneyDiscrepancies: 1,
  claims: {},
  awaiting: 0,
  matched: 5,
  lastReconciledAt: `${day}T23:00:00.000Z`,
  ...extra,
});

describe('totals', () => {
  it('add counts as integers and amounts as exact decimals', () => {
    const rows = Array.from({ length: 10 }, (_, i) => row('1', `2026-11-${String(i + 10)}`, '0.10'));
    expect(addUp(rows)).toMatchObject({
      owed: '1.00',
      pending: '1.00',
      completesPostback: 30,
      discrepancies: { invalidated: 10 },
    });
  });
});

describe('a period added up as it is read', () => {
  it('gives what the summary of its rows gives, whatever order the rows come in', () => {
    const rows = [
      row('7', '2026-11-10', '0.10'),
      row('12', '2026-11-10', '1.005', { discrepancies: { complete_not_paid: 2 }, moneyDiscrepancies: 2 }),
      row('7', '2026-11-11', '3', {
        lastReconciledAt: '2026-11-12T01:00:00.000Z',
        claims: { unverified_claim: 1 },
      }),
      row('12', '2026-11-12', '-0.05', { awaiting: 4 }),
      row('7', '2026-11-12', '0.20', { lastReconciledAt: '2026-11-11T01:00:00.000Z' }),
    ];
    const { days: _, ...expected } = periodSummary(rows);
    for (const order of [rows, [...rows].reverse(), [rows[3], rows[0], rows[4], rows[1], rows[2]]]) {
      const fold = periodFold();
      for (const r of order) fold.add(r as SurveyDayRow);
      expect(fold.totals()).toEqual(expected);
      // Byte for byte: the kinds in their own order, not in the order the rows came.
      expect(JSON.stringify(fold.totals())).toBe(JSON.stringify(expected));
      expect(Object.keys(fold.totals().totals.discrepancies)).toEqual(
        VERDICT_KINDS.filter((kind) => kind === 'invalidated' || kind === 'complete_not_paid'),
      );
    }
    expect(expected.surveys.map((s) => [s.surveyId, s.days, s.owed, s.lastReconciledAt])).toEqual([
      ['7', 3, '3.30', '2026-11-12T01:00:00.000Z'],
      ['12', 2, '0.955', '2026-11-12T23:00:00.000Z'],
    ]);
    expect(expected.totals).toMatchObject({ surveys: 2, owed: '4.255', awaiting: 4, moneyDiscrepancies: 6 });
  });
});

describe('the smallest survey-day row', () => {
  it('takes at least the bytes a summary by day is bounded with, in CSV and in JSON', () => {
    const least = row('1', '2026-11-10', '0', {
      completesPostback: 0,
      completesRedirectOnly: 0,
      marketplaceCompletes: 0,
      validCompletes: 0,
      pendingCompletes: 0,
      invalidCompletes: 0,
      pending: '0',
      discrepancies: {},
      moneyDiscrepancies: 0,
      matched: 0,
      lastReconciledAt: '',
    });
    const [, line] = summaryCsv([least]).split('\n');
    expect(Buffer.byteLength(`${line}\n`)).toBeGreaterThanOrEqual(SMALLEST_DAY_ROW_BYTES);
    expect(Buffer.byteLength(JSON.stringify(least))).toBeGreaterThan(SMALLEST_DAY_ROW_BYTES);
  });
});

describe('awaiting judgement', () => {
  it('is counted per day, added up, and shown in every format: the figures it concerns are provisional', () => {
    const rows = [
      row('1', '2026-11-10', '0.10', { awaiting: 2 }),
      row('2', '2026-11-10', '0.10', { awaiting: 1 }),
    ];
    expect(addUp(rows).awaiting).toBe(3);
    const csv = parse(summaryCsv(rows, { level: 'totals', from: '2026-11-10', to: '2026-11-10' }), {
      columns: true,
    }) as Record<string, string>[];
    expect(csv[0]).toMatchObject({ awaiting: '3', matched: '10', survey_days: '2' });
    const bySurvey = parse(summaryCsv(rows, { level: 'surveys', from: '2026-11-01', to: '2026-11-30' }), {
      columns: true,
    }) as Record<string, string>[];
    // The survey's row names the period, and says how many of its days have figures.
    expect(bySurvey.map((r) => [r.day, r.survey_days])).toEqual([
      ['2026-11-01/2026-11-30', '1'],
      ['2026-11-01/2026-11-30', '1'],
    ]);
    const report = financeReport('2026-11-10', '2026-11-10', rows, [], new Date('2026-11-11T00:00:00.000Z'));
    expect(report.totals.awaiting).toBe(3);
    expect(reportHtml(report)).toMatch(/id="awaiting-count">[^<]*<b>3<\/b>/);
  });
});

describe('CSV', () => {
  it.each([
    ['=SUM(A1:A9)', "'=SUM(A1:A9)"],
    ['+1', "'+1"],
    ['-2', "'-2"],
    ['@cmd', "'@cmd"],
    ['\ttab', "'\ttab"],
    ['1.25', '1.25'],
    ['Over Quota', 'Over Quota'],
    [' =1+1', "' =1+1"],
    ['\u3000+1', "'\u3000+1"],
    ['＝1+1', "'＝1+1"],
    ['＠SUM(1)', "'＠SUM(1)"],
    ['a;=1+1', 'a;=1+1'],
    ['a@b.com', 'a@b.com'],
    ['\u200b=1+1', "'\u200b=1+1"],
    ['\ufeff+1', "'\ufeff+1"],
  ])('neutralises %j', (cell, expected) => {
    expect(neutralize(cell)).toBe(expected);
  });

  it('writes bidirectional controls in an id escaped, so it cannot pass for another in a spreadsheet', () => {
    const discrepancy = {
      surveyId: '1',
      day: '2026-11-20',
      kind: 'unverified_claim',
      pid: 'abc\u202efed',
      token: '\u2066=1+1',
    } as unknown as Parameters<typeof discrepanciesCsv>[0][number];
    const [parsed] = parse(discrepanciesCsv([discrepancy]), { columns: true }) as Record<string, string>[];
    expect(parsed?.pid).toBe('abc\\u202efed');
    // Escaped, it starts with a backslash: no formula.
    expect(parsed?.token).toBe('\\u2066=1+1');
  });

  it('quotes a cell holding a semicolon, so a semicolon-splitting spreadsheet keeps it whole', () => {
    const discrepancy = {
      surveyId: '1',
      day: '2026-11-20',
      kind: 'status_mismatch',
      pid: 'a;=1+1',
      token: ' =2+2',
    } as unknown as Parameters<typeof discrepanciesCsv>[0][number];
    const csv = discrepanciesCsv([discrepancy]);
    expect(csv).toContain('"a;=1+1"');
    expect(csv).toContain("' =2+2");
    const [parsed] = parse(csv, { columns: true }) as Record<string, string>[];
    expect(parsed?.pid).toBe('a;=1+1');
  });

  it('round-trips through an RFC 4180 parser, quoting commas and quotes, a line break escaped', () => {
    const report = financeReport(
      '2026-11-20',
      '2026-11-21',
      [row('1', '2026-11-20', '1.50')],
      [],
      new Date('2026-11-22T00:00:00Z'),
    );
    const csv = summaryCsv(report.days);
    expect(csv.endsWith('\r\n')).toBe(true);
    const [parsed] = parse(csv, { columns: true }) as Record<string, string>[];
    expect(parsed).toMatchObject({
      survey_id: '1',
      day: '2026-11-20',
      owed: '1.50',
      discrepancies_invalidated: '1',
    });
    const tricky = discrepanciesCsv([
      {
        surveyId: '1',
        pid: 'p',
        token: 't',
        kind: 'status_mismatch',
        day: '2026-11-20',
        money: false,
        marketplaceStatus: 'a, "b"\nc',
        verifyToken: '',
        cpi: '0.00',
        postback: 'fail',
        redirect: 'overquota',
        since: '2026-11-20T23:00:00.000Z',
        searchedFrom: '',
        expectedCpi: '',
      },
    ]);
    // Commas and quotes round-trip; a line break is written as its escape (as the CLI and the HTML report show it:
    // kept raw, a spreadsheet shows a tab or line end in an id as a space, another respondent's id).
    expect((parse(tricky, { columns: true }) as Record<string, string>[])[0]?.marketplace_status).toBe(
      'a, "b"\\u000ac',
    );
  });
});

describe('money discrepancies', () => {
  let n = 0;
  /** An attempt carrying a verdict of 2026-11-20, each with ids of its own. */
  const withVerdict = (
    verdict: string,
    detail: Record<string, string>,
    marketplace?: { status: string; cpi: string },
  ) => ({
    surveyId: '1',
    pid: `p${++n}`,
    token: `t${n}`,
    complete: 'postback-confirmed' as const,
    conflict: false,
    reconciliation: {
      verdict,
      day: '2026-11-20',
      detail,
      at: '2026-11-21T00:00:00.000Z',
      ...(marketplace ? { marketplace } : {}),
      history: [],
    },
  });
  const judged = (...args: Parameters<typeof withVerdict>) => discrepancyOf(withVerdict(...args));

  it.each([
    // A bidirectional override: not reordered into another respondent's id.
    ['abc\u202efed', 'abc\\u202efed', '\u202e'],
    // A line feed: not shown as a space (two pids would read as one).
    ['p-17\nvictim', 'p-17\\u000avictim', 'p-17\nvictim'],
  ])('show an id holding %j in the HTML report as its escape', (pid, shown, hidden) => {
    const spoofing = { ...withVerdict('invalidated', { reversedCpi: '1.50' }), pid };
    const html = reportHtml(
      financeReport('2026-11-20', '2026-11-20', [], [spoofing], new Date('2026-11-21T00:00:00.000Z')),
    );
    expect(html).toContain(shown);
    expect(html).not.toContain(hidden);
  });

  it('add up in the report by what they are: reversed, signed here and not paid, listed there and never received, listed below the price (received or not)', () => {
    const attempt = (verdict: string, detail: Record<string, string>, cpi = '0') =>
      withVerdict(verdict, detail, { status: 'Completed', cpi });
    const report = financeReport(
      '2026-11-20',
      '2026-11-20',
      [],
      [
        attempt('invalidated', { reversedCpi: '1.50' }),
        attempt('invalidated', { reversedCpi: '1.25' }),
        // Recorded before prices were kept: counted apart, not as 0.
        attempt('invalidated', {}),
        attempt('complete_not_paid', { claimedCpi: '1.50' }),
        attempt('complete_not_received', {}, '2.00'),
        // Never received here, and listed below the price at its click: short all the same.
        attempt('complete_not_received', { expectedCpi: '1.50' }, '1.00'),
        attempt('cpi_mismatch', { expectedCpi: '1.50 or 1.75' }, '1.25'),
        // A Valid complete listed at 0 (earning nothing): its whole price.
        attempt('cpi_mismatch', { expectedCpi: '1.50' }, '0'),
        // Listed above the price: nothing owed back.
        attempt('cpi_mismatch', { expectedCpi: '1.50' }, '1.80'),
      ],
      new Date('2026-11-21T00:00:00.000Z'),
    );
    expect(report.amounts).toEqual({
      reversed: '2.75',
      notPaid: '1.50',
      notReceived: '3.00',
      underpaid: '2.25',
      unpriced: 1,
    });
    expect(reportHtml(report)).toMatch(/id="underpaid-amount">[^<]*<b>2\.25<\/b>/);
    const stale = financeReport(
      '2026-11-20',
      '2026-11-20',
      [],
      [],
      new Date(),
      [],
      [
        {
          surveyId: '7',
          days: ['2026-11-20'],
          error: 'marketplace answered HTTP 503 <x>',
          failingSince: '2026-11-19T10:00:00.000Z',
          lastFailedAt: '2026-11-20T10:00:00.000Z',
        },
      ],
    );
    expect(reportHtml(stale)).toContain(
      '<tr><td>7</td><td>2026-11-20</td><td>marketplace answered HTTP 503 &lt;x&gt;</td><td>2026-11-19T10:00:00.000Z</td><td>2026-11-20T10:00:00.000Z</td></tr>',
    );
    expect(reportHtml(report)).toContain(
      "Every survey's days of the period were reconciled by its last run.",
    );
    // The unpriced count is of every summed kind, so it is said beside all the sums, not on one card.
    expect(reportHtml(report)).toContain('id="reversed-amount">Reversed after the fact<b>2.75</b>');
    expect(reportHtml(report)).toContain(
      '<p class="meta" id="unpriced-note">1 money discrepancy below has no price known: not in the reversed, not-paid, never-received or below-price sums above.</p>',
    );
  });

  it('say what each was worth, so what is disputed can be added up', () => {
    expect(judged('complete_not_paid', { claimedCpi: '1.50' })).toMatchObject({
      cpi: '',
      expectedCpi: '1.50',
    });
    expect(
      judged('complete_not_paid', { claimedCpi: '1.50' }, { status: 'Failed', cpi: '0.00' }),
    ).toMatchObject({
      cpi: '0.00',
      expectedCpi: '1.50',
    });
    expect(
      judged(
        'cpi_mismatch',
        { expectedCpi: '1.50 or 1.75', cpi: '1.25' },
        { status: 'Completed', cpi: '1.25' },
      ),
    ).toMatchObject({ cpi: '1.25', expectedCpi: '1.50 or 1.75' });
    // A verdict recorded before the price was kept: nothing to show, never a made-up figure.
    expect(judged('complete_not_paid', {})).toMatchObject({ expectedCpi: '' });
    const csv = parse(discrepanciesCsv([judged('complete_not_paid', { claimedCpi: '1.50' }) as never]), {
      columns: true,
    }) as Record<string, string>[];
    expect(csv[0]).toMatchObject({ cpi: '', expected_cpi: '1.50' });
  });
});

describe('the report', () => {
  it('lists discrepancies by day, survey (as a number), kind and token, as the API does but for the survey order', () => {
    const item = (surveyId: string, verdict: string, token: string) => ({
      surveyId,
      pid: `p-${token}`,
      token,
      complete: 'postback-confirmed' as const,
      conflict: false,
      reconciliation: { verdict, day: '2026-11-20', detail: {}, at: '2026-11-21T00:00:00.000Z', history: [] },
    });
    const report = financeReport(
      '2026-11-20',
      '2026-11-20',
      [],
      [
        item('10', 'invalidated', 'a'),
        item('9', 'invalidated', 'y'),
        item('9', 'complete_not_paid', 'z'),
        item('100', 'complete_not_paid', 'b'),
      ],
      new Date('2026-11-21T00:00:00.000Z'),
    );
    expect(report.discrepancies.map((d) => [d.surveyId, d.kind, d.token])).toEqual([
      ['9', 'complete_not_paid', 'z'],
      ['9', 'invalidated', 'y'],
      ['10', 'invalidated', 'a'],
      ['100', 'complete_not_paid', 'b'],
    ]);
  });
});

describe('failing surveys CSV', () => {
  it('one row per spell, open ends empty, reason codes separated by spaces', () => {
    const csv = failingSurveysCsv([
      {
        surveyId: '7',
        from: '2026-11-20T10:00:00.000Z',
        to: '2026-11-20T11:30:00.000Z',
        reasons: ['postbacks_stopped'],
      },
      { surveyId: '8', reasons: ['refused_postbacks', 'configuration_drift'] },
    ]);
    expect(parse(csv, { columns: true })).toEqual([
      {
        survey_id: '7',
        failing_from: '2026-11-20T10:00:00.000Z',
        failing_to: '2026-11-20T11:30:00.000Z',
        reasons: 'postbacks_stopped',
      },
      { survey_id: '8', failing_from: '', failing_to: '', reasons: 'refused_postbacks configuration_drift' },
    ]);
  });
});

describe('periods', () => {
  it('accept a valid period and refuse the rest with a 400', () => {
    expect(readPeriod('2026-11-01', '2026-11-30')).toEqual({ from: '2026-11-01', to: '2026-11-30' });
    for (const [from, to] of [
      [undefined, '2026-11-01'],
      ['2026-13-01', '2026-11-01'],
      ['2026-11-02', '2026-11-01'],
    ] as const) {
      expect(() => readPeriod(from, to)).toThrow(Rejection);
    }
  });
});

describe('HTML report', () => {
  it('is self-contained: no script, no external asset, everything escaped', () => {
    const html = reportHtml(
      financeReport(
        '2026-11-20',
        '2026-11-21',
        [row('1', '2026-11-20', '1.50')],
        [],
        new Date('2026-11-22T00:00:00Z'),
      ),
    );
    expect(html).not.toMatch(/<script|<link|src=|url\(|@import|https?:\/\//i);
    expect(html).toContain('time zone America/Los_Angeles');
    // The card counts the rows still filed Completed; the kind counts every reversal: neither reads as the other.
    expect(html).toMatch(/id="invalidated">Completes reviewed Invalid \(rows still Completed\)<b>/);
    expect(html).toContain('invalidated (money) (every reversal: rows re-filed under another status too)');
    expect(html).toContain('No survey was failing in this period.');
  });

  it('lists the surveys failing in the period, an open spell as still failing', () => {
    const html = reportHtml(
      financeReport('2026-11-20', '2026-11-21', [], [], new Date('2026-11-22T00:00:00Z'), [
        {
          surveyId: '1001',
          from: '2026-11-20T10:00:00.000Z',
          to: '2026-11-20T11:30:00.000Z',
          reasons: ['postbacks_stopped'],
        },
        { surveyId: '1001', from: '2026-11-21T09:00:00.000Z', reasons: ['refused_postbacks'] },
        { surveyId: '1002', reasons: ['<b>'] },
      ]),
    );
    expect(html).toMatch(/id="failing-count">[^<]*<b>2<\/b>/);
    expect(html).toContain(
      '<tr><td>1001</td><td>2026-11-20T10:00:00.000Z</td><td>2026-11-20T11:30:00.000Z</td><td>postbacks_stopped</td></tr>',
    );
    expect(html).toContain('<td>2026-11-21T09:00:00.000Z</td><td>still failing</td>');
    expect(html).toContain('<td>before the history kept</td>');
    expect(html).toContain('&lt;b&gt;');
  });
});

describe('the CLI report rendered as one text', () => {
  it('past the longest string the runtime holds, says what smaller report to ask for instead of "Invalid string length"', () => {
    const report = { discrepancies: Array(3), days: Array(2) };
    const json = { format: 'json' };
    expect(renderedReport(json, report, () => '{}')).toBe('{}');
    const tooLong = () => {
      throw new RangeError('Invalid string length');
    };
    expect(() => renderedReport(json, report, tooLong)).toThrow(
      /^the json report of 3 discrepancies and 2 survey-days is too large .*--table discrepancies.*--detail surveys or totals/,
    );
    // The discrepancy table itself too large: the summary, not the table again.
    expect(() => renderedReport({ format: 'csv', table: 'discrepancies' }, report, tooLong)).toThrow(
      /^(?!.*--table discrepancies).*--detail surveys or totals/,
    );
    // Anything else is not mistaken for it.
    expect(() =>
      renderedReport(json, report, () => {
        throw new TypeError('other');
      }),
    ).toThrow(TypeError);
  });
});
