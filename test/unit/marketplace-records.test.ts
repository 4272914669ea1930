/**
 * Reading the marketplace's rows as the reference's field tables and the field notes describe them.
 */
import { describe, expect, it } from 'vitest';
import {
  distinctTransactions,
  entryTime,
  filedAt,
  hasEntryTime,
  parseRedirectSettings,
  parseSurvey,
  parseTransaction,
} from '../../functions/marketplace/marketplace-records';

const transaction = {
  ip: '198.51.100.7',
  verifyToken: 'Pending',
  termReason: '',
  CPI: '1.25',
  PID: 'panel-1',
  token: 'b1c2',
  st_date_time: '11/21/2026, 11:55:00 pm PST',
  clkDateTime: '11/21/2026, 11:55:00 pm PST',
  completeDateTime: '11/22/2026, 12:20:00 am PST',
  status: 'Completed',
  trackId: '0f8fad5b-d9cb-469f-a165-70867728950e',
  surveyUrl: 'https://marketplace.example/entry',
};

describe('transactions', () => {
  it('read the reference fields, times to UTC with the raw kept', () => {
    const parsed = parseTransaction(transaction);
    expect(parsed).toEqual({
      ok: true,
      value: expect.objectContaining({
        token: 'b1c2',
        pid: 'panel-1',
        status: 'Completed',
        cpi: '1.25',
        verifyToken: 'Pending',
        termReason: undefined,
        clickedAt: { utc: '2026-11-22T07:55:00.000Z', raw: '11/21/2026, 11:55:00 pm PST' },
        completedAt: { utc: '2026-11-22T08:20:00.000Z', raw: '11/22/2026, 12:20:00 am PST' },
      }),
    });
  });

  it('read CPI 0 as a number, an empty completion time as absent, and extra fields without complaint', () => {
    const parsed = parseTransaction({
      ...transaction,
      CPI: 0,
      status: 'Over Quota',
      completeDateTime: '',
      verifiedTknDt: '11/23/2026, 9:00:00 am PST',
      extra: { x: 1 },
    });
    expect(parsed.ok && parsed.value).toMatchObject({
      cpi: '0.00',
      status: 'Over Quota',
      completedAt: undefined,
      verifiedAt: { utc: '2026-11-23T17:00:00.000Z' },
    });
  });

  it('read an unreadable CPI as nothing earned on a known status that earns nothing', () => {
    const parsed = parseTransaction({ ...transaction, status: 'Failed', CPI: '1,25' });
    expect(parsed.ok && parsed.value.cpi).toBe('0.00');
  });

  it('refuse a complete whose row names another currency than US dollars, rather than add it up as dollars', () => {
    for (const [field, value] of [
      ['currency', 'EUR'],
      ['Currency', 'GBP'],
      ['cpiCurrency', 'INR'],
    ] as const) {
      const parsed = parseTransaction({ ...transaction, [field]: value });
      expect(parsed.ok).toBe(false);
      expect(!parsed.ok && parsed.problem).toContain(`${field} is "${value}"`);
    }
    for (const dollars of ['USD', 'usd ', '', '$', 'US Dollar', 'N/A', '-', '840', 840])
      expect(parseTransaction({ ...transaction, currency: dollars }).ok, String(dollars)).toBe(true);
    expect(parseTransaction({ ...transaction, currency: 978 }).ok).toBe(false);
    expect(parseTransaction({ ...transaction, currency_code: 'inr' }).ok).toBe(false);
    // Fields that do not name the amounts' currency are left alone.
    for (const other of [{ localCurrency: 'EUR' }, { currencyRate: '1.00' }, { isCurrencyConverted: 'no' }])
      expect(parseTransaction({ ...transaction, ...other }).ok, JSON.stringify(other)).toBe(true);
    // A row that earns nothing earns nothing in any currency.
    expect(parseTransaction({ ...transaction, status: 'Failed', currency: 'EUR' }).ok).toBe(true);
  });

  it('read a row whose PID is empty, null or absent (an entry link that carried none) by its token, pid blank', () => {
    for (const PID of ['', null, undefined]) {
      const parsed = parseTransaction({ ...transaction, PID });
      expect(parsed.ok && parsed.value, String(PID)).toMatchObject({ token: transaction.token, pid: '' });
    }
  });

  it('read a numeric PID as a string', () => {
    const parsed = parseTransaction({ ...transaction, PID: 12345 });
    expect(parsed.ok && parsed.value.pid).toBe('12345');
  });

  it('report a numeric id that JSON cannot hold exactly (past 2^53, a fraction) as malformed, not another id', () => {
    // As JSON.parse reads `12345678901234567891.0` and `1.2345678901234567e19`: both rounded.
    for (const PID of [JSON.parse('12345678901234567891.0'), JSON.parse('1.2345678901234567e19'), 12.5]) {
      const parsed = parseTransaction({ ...transaction, PID });
      expect(parsed.ok, String(PID)).toBe(false);
      // Still placed, so only its day is held back, not its whole survey.
      expect(!parsed.ok && parsed.placed, String(PID)).toMatchObject({
        token: transaction.token,
        pid: String(PID),
      });
    }
  });

  it.each([
    ['no token', { token: undefined }, /token/],
    ['an empty token', { token: '' }, /token is empty/],
    ['an unreadable CPI', { CPI: 'n/a' }, /CPI is not an amount/],
    ['a negative CPI', { CPI: -1 }, /CPI is not an amount/],
    [
      'a status it does not know and an unreadable CPI',
      { status: 'Adjusted To Complete', CPI: '1,25' },
      /CPI is not an amount/,
    ],
    ['an unreadable click time', { clkDateTime: '21 Nov 2026' }, /clkDateTime is not a marketplace time/],
    ['no status', { status: undefined }, /status/],
    [
      'no time to place it by',
      { st_date_time: '', clkDateTime: undefined, completeDateTime: null },
      /no clkDateTime, st_date_time or completeDateTime/,
    ],
  ])('report a row with %s as malformed', (_, change, problem) => {
    const parsed = parseTransaction({ ...transaction, ...change });
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.problem).toMatch(problem);
  });

  it('leave out what is only informational when it cannot be read; price a non-complete at nothing', () => {
    const parsed = parseTransaction({
      ...transaction,
      token: 98765,
      completeDateTime: 'Invalid date',
      verifiedTknDt: 'tomorrow',
      ip: null,
      trackId: { id: 1 },
    });
    expect(parsed.ok && parsed.value).toMatchObject({ token: '98765', cpi: '1.25' });
    expect(parsed.ok && [parsed.value.completedAt, parsed.value.verifiedAt, parsed.value.trackId]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    const failed = parseTransaction({ ...transaction, status: 'Failed', CPI: null });
    expect(failed.ok && failed.value.cpi).toBe('0.00');
  });

  it('file a row by its click, else its start, else its completion', () => {
    const read = (change: object) => {
      const parsed = parseTransaction({ ...transaction, ...change });
      return parsed.ok ? filedAt(parsed.value) : 'malformed';
    };
    expect(read({})).toBe('2026-11-22T07:55:00.000Z');
    expect(read({ clkDateTime: '', st_date_time: '' })).toBe('2026-11-22T08:20:00.000Z');
    // The start is only the click's fallback: unreadable, it fails the row only when there is no click.
    expect(read({ st_date_time: 'Nov 21st' })).toBe('2026-11-22T07:55:00.000Z');
    expect(parseTransaction({ ...transaction, clkDateTime: '', st_date_time: 'Nov 21st' })).toEqual({
      ok: false,
      problem: 'st_date_time is not a marketplace time: "Nov 21st"',
    });
  });

  it("take a row's start for its click only where the start tells the click's Pacific day", () => {
    const entered = (st_date_time: string) => {
      const parsed = parseTransaction({ ...transaction, clkDateTime: '', st_date_time });
      return parsed.ok
        ? [entryTime(parsed.value), hasEntryTime(parsed.value), filedAt(parsed.value)]
        : 'malformed';
    };
    // An hour and more after midnight: its own day's.
    expect(entered('11/22/2026, 1:00:00 am PST')).toEqual([
      '2026-11-22T09:00:00.000Z',
      true,
      '2026-11-22T09:00:00.000Z',
    ]);
    // Within the hour after it: the click may be the day before's. No entry time (placed by a day's listing alone);
    // filed by the start until placed.
    expect(entered('11/22/2026, 12:59:59 am PST')).toEqual([undefined, false, '2026-11-22T08:59:59.000Z']);
    expect(entered('11/22/2026, 12:00:05 am PST')).toEqual([undefined, false, '2026-11-22T08:00:05.000Z']);
    // The autumn change's day is 25 hours long: its first hour and more are still within an hour of its midnight.
    expect(entered('11/01/2026, 12:30:00 am PDT')?.[1]).toBe(false);
    expect(entered('11/01/2026, 1:30:00 am PDT')?.[1]).toBe(true);
  });

  it('read a time given as a stand-in that names no instant as none, and file the row by its next time', () => {
    for (const standIn of [
      'N/A',
      'n/a',
      '-',
      '--',
      'null',
      'None',
      ' ',
      '00/00/0000, 12:00:00 am PST',
      '0000-00-00 00:00:00',
    ]) {
      const parsed = parseTransaction({ ...transaction, clkDateTime: standIn });
      expect(parsed.ok && parsed.value.clickedAt, standIn).toBeUndefined();
      expect(parsed.ok && filedAt(parsed.value), standIn).toBe('2026-11-22T07:55:00.000Z');
      // A row unreadable for another reason is still placed, by the start time.
      const unreadable = parseTransaction({ ...transaction, clkDateTime: standIn, CPI: 'n/a' });
      expect(!unreadable.ok && unreadable.placed?.filedAt, standIn).toBe('2026-11-22T07:55:00.000Z');
    }
    const none = parseTransaction({
      ...transaction,
      clkDateTime: 'N/A',
      st_date_time: '-',
      completeDateTime: 'N/A',
    });
    expect(none).toEqual({
      ok: false,
      problem: 'has no clkDateTime, st_date_time or completeDateTime to place it in a day',
    });
  });

  it('read a known status however it is cased or spaced, and keep an unknown one as it came', () => {
    const status = (value: string) => {
      const parsed = parseTransaction({ ...transaction, status: value });
      return parsed.ok ? parsed.value.status : parsed.problem;
    };
    expect(status('completed')).toBe('Completed');
    expect(status(' Completed ')).toBe('Completed');
    expect(status('OverQuota')).toBe('Over Quota');
    expect(status('PRE_SURVEY_DNC')).toBe('Pre Survey DNC');
    expect(status(' Adjusted ')).toBe('Adjusted');
    expect(status('  ')).toMatch(/status/);
    // A complete spelled otherwise still needs its price.
    expect(parseTransaction({ ...transaction, status: 'completed', CPI: 'n/a' }).ok).toBe(false);
  });

  it('read the buyer review trimmed, and a blank one as none', () => {
    const review = (value: string) => {
      const parsed = parseTransaction({ ...transaction, verifyToken: value });
      return parsed.ok ? parsed.value.verifyToken : parsed.problem;
    };
    expect(review('Valid ')).toBe('Valid');
    expect(review(' Invalid')).toBe('Invalid');
    expect(review('   ')).toBeUndefined();
  });

  it('keeps the copy that earns less of two verified in the repeated autumn hour, whose order the times do not tell', () => {
    const row = (change: object) => {
      const parsed = parseTransaction({ ...transaction, ...change });
      if (!parsed.ok) throw new Error(parsed.problem);
      return parsed.value;
    };
    // Reviewed Valid at 1:50 PDT, then Invalid at 1:10 PST (20 minutes later): both written "PST", both read as the
    // later occurrence (Valid then looks 40 minutes later). Which came last cannot be told: the one earning less.
    const valid = row({ verifyToken: 'Valid', verifiedTknDt: '11/01/2026, 1:50:00 am PST' });
    const invalid = row({ verifyToken: 'Invalid', verifiedTknDt: '11/01/2026, 1:10:00 am PST' });
    for (const order of [
      [valid, invalid],
      [invalid, valid],
    ])
      expect(distinctTransactions(order).rows.map((t) => t.verifyToken)).toEqual(['Invalid']);
    // More than an hour apart, the order is told whatever the hour.
    const later = row({ verifyToken: 'Valid', verifiedTknDt: '11/01/2026, 3:30:00 am PST' });
    expect(distinctTransactions([invalid, later]).rows.map((t) => t.verifyToken)).toEqual(['Valid']);
  });

  it('count a token listed twice once, keeping the copy verified last, else the one that earns less, in any order', () => {
    const row = (change: object) => {
      const parsed = parseTransaction({ ...transaction, ...change });
      if (!parsed.ok) throw new Error(parsed.problem);
      return parsed.value;
    };
    const pending = row({});
    const valid = row({ verifyToken: 'Valid', verifiedTknDt: '11/23/2026, 9:00:00 am PST' });
    const other = row({ token: 'x9' });
    expect(distinctTransactions([valid, other, pending])).toEqual({
      rows: [valid, other],
      duplicates: 1,
      copies: [],
    });
    expect(distinctTransactions([pending, valid]).rows).toEqual([valid]);
    expect(distinctTransactions([pending, { ...pending, status: 'Failed' }]).rows[0]?.status).toBe('Failed');
    // Copies verified at the same time that disagree: the listing's order does not decide.
    const at = '11/23/2026, 9:00:00 am PST';
    const paid = row({ verifyToken: 'Valid', verifiedTknDt: at });
    const copies = [
      row({ verifyToken: 'Valid', verifiedTknDt: at, status: 'Quality Termination', CPI: 0 }),
      row({ verifyToken: 'Invalid', verifiedTknDt: at }),
      row({ verifyToken: 'Valid', verifiedTknDt: at, CPI: '1.00' }),
    ];
    const expected = ['Quality Termination', 'Completed/Invalid', 'Completed/Valid/1.00'];
    copies.forEach((copy, i) => {
      for (const order of [
        [paid, copy],
        [copy, paid],
      ]) {
        const [kept] = distinctTransactions(order).rows;
        const described =
          kept?.status === 'Completed'
            ? `Completed/${kept.verifyToken}${kept.verifyToken === 'Valid' ? `/${kept.cpi}` : ''}`
            : kept?.status;
        expect(described).toBe(expected[i]);
      }
    });
    // Two copies alike but for a fact that earns nothing either way: the same one whatever the order.
    const early = row({ clkDateTime: '11/22/2026, 7:00:00 am PST' });
    expect(distinctTransactions([pending, early]).rows).toEqual(distinctTransactions([early, pending]).rows);
    // Or only in the start time of a row without a click: the day it is filed under does not hang on the order.
    const started = (at: string) => row({ clkDateTime: '', st_date_time: at });
    const [late, next] = [started('11/21/2026, 11:55:00 pm PST'), started('11/22/2026, 12:05:00 am PST')];
    expect(distinctTransactions([late, next]).rows).toEqual(distinctTransactions([next, late]).rows);
  });

  it('keep a token filed under two days on the earliest; the later days give one copy each, apart', () => {
    const row = (change: object) => {
      const parsed = parseTransaction({ ...transaction, ...change });
      if (!parsed.ok) throw new Error(parsed.problem);
      return parsed.value;
    };
    const [monday, tuesday] = ['11/23/2026, 9:00:00 am PST', '11/24/2026, 9:00:00 am PST'];
    const first = row({ clkDateTime: monday });
    const later = row({ clkDateTime: tuesday, status: 'Failed', CPI: 0 });
    const laterAgain = row({ clkDateTime: tuesday, verifyToken: 'Valid', verifiedTknDt: tuesday });
    for (const order of [
      [first, later, laterAgain],
      [laterAgain, later, first],
    ])
      expect(distinctTransactions(order)).toEqual({ rows: [first], duplicates: 1, copies: [laterAgain] });
  });
});

describe('surveys', () => {
  const survey = {
    surveyId: 1001,
    surveyName: 'Grocery habits',
    N: 500,
    isRevShr: false,
    supCmps: 3,
    remainingN: 497,
    LOI: 8,
    IR: 50,
    Country: 'United States',
    Language: 'ENGLISH',
    groupType: 'Consumer',
    deviceType: 'All',
    createdDate: '11/18/2026, 9:15:00 am PST',
    modifiedDate: '11/20/2026, 4:00:00 pm PST',
    reContact: false,
    entryLink: 'https://marketplace.example/entry/1001?pid=[%%pid%%]',
    testEntryLink: '',
    targeting: [],
    CPI: '1.25',
    isQuota: true,
    jobCategory: 'Other',
    isPIIRequired: false,
    JobId: 1,
    BuyerId: 2,
    expected_end_date: '12/31/2026',
    duplicateSurveyIds: [],
    duplicateCheckLevel: 'Survey Level',
    statuses: ['Completed', 'Failed'],
  };

  it('read v1 surveys', () => {
    const parsed = parseSurvey(survey);
    expect(parsed.ok && parsed.value).toMatchObject({
      surveyId: '1001',
      cpi: '1.25',
      loiMinutes: 8,
      createdAt: { utc: '2026-11-18T17:15:00.000Z' },
      testEntryLink: undefined,
    });
  });

  it('read the fields v2 adds, and a numeric CPI or string ids', () => {
    const parsed = parseSurvey({
      ...survey,
      surveyId: '1001',
      CPI: 2,
      CountryCode: 'US',
      LanguageCode: 'en',
      numberOfCompletes: 5,
      numberOfStarts: 9,
    });
    expect(parsed.ok && parsed.value).toMatchObject({
      surveyId: '1001',
      cpi: '2.00',
      countryCode: 'US',
      numberOfCompletes: 5,
    });
  });

  it('report a survey whose row names another currency than US dollars: its price is not one to check against', () => {
    expect(parseSurvey({ ...survey, currency: 'EUR' })).toMatchObject({
      ok: false,
      problem: 'currency is "EUR": amounts are counted in US dollars',
    });
    expect(parseSurvey({ ...survey, currency: 'USD' }).ok).toBe(true);
  });

  it('report a survey without an id or a price', () => {
    expect(parseSurvey({ ...survey, surveyId: undefined }).ok).toBe(false);
    expect(parseSurvey({ ...survey, CPI: 'n/a' }).ok).toBe(false);
  });

  it('read a survey whose other fields do not read, leaving them out: its price is what matters', () => {
    const odd = parseSurvey({
      ...survey,
      isRevShr: 0,
      isQuota: 1,
      reContact: 'true',
      isPIIRequired: null,
      LOI: 12.5,
      N: null,
      targeting: null,
      statuses: null,
      duplicateSurveyIds: null,
      createdDate: '2026-11-18',
    });
    expect(odd.ok).toBe(true);
    if (!odd.ok) return;
    expect(odd.value).toMatchObject({ surveyId: String(survey.surveyId), cpi: expect.any(String) });
    expect(odd.value.isQuota).toBeUndefined();
    expect(odd.value.loiMinutes).toBeUndefined();
    expect(odd.value.createdAt).toBeUndefined();
    expect(odd.value.targeting).toEqual([]);
  });
});

describe('redirect settings', () => {
  it('keep the nine fields and ignore others', () => {
    expect(parseRedirectSettings({ sUrl: 'a', pstbck: 'b', pstBckSuccessMethod: 'POST', other: 1 })).toEqual({
      ok: true,
      value: { sUrl: 'a', pstbck: 'b', pstBckSuccessMethod: 'POST' },
    });
  });

  it('refuse a non-string field', () => {
    expect(parseRedirectSettings({ sUrl: 5 }).ok).toBe(false);
  });
});
