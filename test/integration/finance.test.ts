/**
 * The finance API on the embedded engine: authorization (missing, wrong, right; bearer locally, IAM in AWS),
 * summaries with hand-computed exact sums, filters, pagination, CSV (escaping and formula injection), and one
 * attempt's story by pid or token.
 */
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFinanceHandler, FAILING_IN_JSON } from '../../functions/finance/finance-api';
import { type Finance, finance } from '../../functions/finance/finance-queries';
import {
  createDocumentClient,
  createHealthStore,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
  type HealthStore,
  type LedgerStore,
  type ReconciliationStore,
  type StoredDaySummary,
} from '../../functions/ledger/ledger-store';
import type { VerdictKind } from '../../functions/reconciliation/verdict-kinds';
import { nextDay } from '../../functions/reconciliation/verdict-rules';
import { sumAmounts } from '../../functions/shared/money';
import { apiEvent, type Handler, invoke, jsonBody } from '../support/api-events';
import { type EngineProxy, startEngineProxy } from '../support/engine-proxy';
import { daySummary, freshTable, judgedPostback } from '../support/ledger';

const TOKEN = 'finance-test-token-0123456789';
const D1 = '2026-11-20';
const D2 = '2026-11-21';
let handler: Handler;
let attempts: LedgerStore;
let results: ReconciliationStore;
let queries: Finance;
let proxy: EngineProxy;
let health: HealthStore;
afterAll(() => proxy?.stop());

const auth = { authorization: `Bearer ${TOKEN}` };
const get = (url: string, headers: Record<string, string> = auth) =>
  invoke(handler, apiEvent('GET', url, { headers }));

/**
 * A finance API over a store that answers every day's summaries as ten thousand surveys', each a copy of `stored`
 * (the survey and day set), counting the days read: a supplier ten times the model's size.
 */
function tenThousandSurveys(
  stored: StoredDaySummary,
  failing: Awaited<ReturnType<Finance['failingSurveys']>> = [],
) {
  let daysRead = 0;
  const queries = finance({
    attempts,
    results: {
      ...results,
      daySummaries: async (day: string) => {
        daysRead++;
        return Array.from({ length: 10_000 }, (_, i) => ({ ...stored, surveyId: String(10_000 + i), day }));
      },
    },
  });
  return {
    handler: createFinanceHandler({
      queries: { ...queries, failingSurveys: async () => failing },
      auth: { mode: 'bearer', token: TOKEN },
      timeZone: 'America/Los_Angeles',
    }),
    daysRead: () => daysRead,
  };
}

async function discrepancy(
  surveyId: string,
  day: string,
  token: string,
  kind: VerdictKind,
  status = 'Completed',
) {
  await judgedPostback(
    { attempts, results },
    {
      surveyId,
      token,
      day,
      kind,
      status,
      seenAt: new Date(`${day}T20:00:00Z`),
      recordedAt: new Date(`${day}T23:00:00Z`),
    },
  );
}

beforeAll(async () => {
  const { endpoint, tableName } = await freshTable();
  const client = createDocumentClient({ endpoint });
  attempts = createLedgerStore(client, tableName);
  results = createReconciliationStore(client, tableName);
  await results.putDaySummary(
    daySummary('8001', D1, '0.10', '1.20', { matched: 8, invalidated: 1, complete_not_paid: 1 }),
    new Date(`${D1}T23:00:00Z`),
    'run-1',
  );
  await results.putDaySummary(
    daySummary('8001', D2, '0.20', '0.05', { matched: 9, invalidated: 1 }),
    new Date(`${D2}T23:00:00Z`),
    'run-2',
  );
  await results.putDaySummary(
    daySummary('8002', D2, '1234.567', '0.00', { matched: 10 }),
    new Date(`${D2}T22:00:00Z`),
    'run-2',
  );
  await discrepancy('8001', D1, 'a1', 'invalidated');
  await discrepancy('8001', D1, 'a2', 'complete_not_paid', '=HYPERLINK("http://evil.example","x")');
  await discrepancy('8001', D2, 'a3', 'invalidated');
  await discrepancy('8002', D2, 'b1', 'cpi_mismatch', 'Completed, "verified"');
  await discrepancy('8002', D2, 'b2', 'invalidated');
  // Survey health: 8001 failed for two hours of D1; 8002 has been failing since before the period; 8003 failed
  // only after it. The health reads go through a recording proxy, to count them.
  proxy = await startEngineProxy(endpoint);
  const counted = createDocumentClient({ endpoint: proxy.endpoint });
  health = createHealthStore(counted, tableName);
  const registry = createSurveyRegistry(counted, tableName);
  for (const surveyId of ['8001', '8002', '8003'])
    await registry.put({
      surveyId,
      state: 'active',
      verified: true,
      failures: 0,
      updatedAt: '2026-11-01T00:00:00Z',
    });
  const reasons = [{ code: 'postbacks_stopped' as const, severity: 'failing' as const, detail: 'evidence' }];
  const spell = (surveyId: string, from: string, to?: string) => ({
    surveyId,
    state: to ? ('ok' as const) : ('failing' as const),
    since: to ?? from,
    reasons: to ? [] : reasons,
    history: [
      { at: from, from: 'ok' as const, to: 'failing' as const, reasons: ['postbacks_stopped'] },
      ...(to ? [{ at: to, from: 'failing' as const, to: 'ok' as const, reasons: [] }] : []),
    ],
    updatedAt: to ?? from,
    revision: 1,
  });
  for (const written of [
    spell('8001', `${D1}T18:00:00.000Z`, `${D1}T20:00:00.000Z`),
    spell('8002', '2026-11-10T00:00:00.000Z'),
    spell('8003', '2026-11-25T00:00:00.000Z', '2026-11-25T01:00:00.000Z'),
  ])
    expect(await health.put(written)).toBe(true);
  queries = finance({ attempts, results, health: { registry, store: health } });
  handler = createFinanceHandler({
    queries,
    auth: { mode: 'bearer', token: TOKEN },
    timeZone: 'America/Los_Angeles',
  });
});

describe('authorization', () => {
  it('refuses a call without credentials (401) or with the wrong token (403), and says nothing more', async () => {
    const missing = await get(`/finance/summary?from=${D1}&to=${D2}`, {});
    expect(missing.statusCode).toBe(401);
    expect(jsonBody(missing)).toEqual({ error: 'unauthorized', message: 'authentication required' });
    const wrong = await get(`/finance/summary?from=${D1}&to=${D2}`, {
      authorization: `Bearer ${TOKEN.replace(/.$/, 'x')}`,
    });
    expect(wrong.statusCode).toBe(403);
    expect(jsonBody(wrong)).toEqual({ error: 'forbidden', message: 'not authorized' });
    const basic = await get(`/finance/summary?from=${D1}&to=${D2}`, { authorization: `Basic ${TOKEN}` });
    expect(basic.statusCode).toBe(401);
    // The scheme's name is case-insensitive.
    const lower = await get(`/finance/summary?from=${D1}&to=${D2}`, { authorization: `bearer ${TOKEN}` });
    expect(lower.statusCode).toBe(200);
  });

  it('in IAM mode, answers only requests API Gateway says were signed', async () => {
    const iamHandler = createFinanceHandler({
      queries,
      auth: { mode: 'iam' },
      timeZone: 'America/Los_Angeles',
    });
    const unsigned = apiEvent('GET', `/finance/summary?from=${D1}&to=${D2}`, { headers: auth });
    expect((await invoke(iamHandler, unsigned)).statusCode).toBe(403);
    const signed = apiEvent('GET', `/finance/summary?from=${D1}&to=${D2}`);
    (signed.requestContext as unknown as { authorizer: unknown }).authorizer = {
      iam: { userArn: 'arn:aws:iam::123456789012:user/finance', accountId: '123456789012' },
    };
    expect((await invoke(iamHandler, signed)).statusCode).toBe(200);
  });
});

describe('routing', () => {
  it('answers 404 JSON for a path no finance route has, after authentication', async () => {
    const event = apiEvent('GET', `/finance/summary?from=${D1}&to=${D2}`, { headers: auth });
    const stray = {
      ...event,
      rawPath: '/finance/payouts',
      routeKey: 'GET /finance/payouts',
      requestContext: {
        ...event.requestContext,
        http: { ...event.requestContext.http, path: '/finance/payouts' },
      },
    };
    const result = await invoke(handler, stray);
    expect(result.statusCode).toBe(404);
    expect(JSON.parse(result.body as string)).toEqual({ error: 'not_found', message: 'no such route' });
    const anonymous = await invoke(handler, { ...stray, headers: {} });
    expect(anonymous.statusCode).toBe(401);
  });
});

describe('surveys failing in the period', () => {
  it('are in the summary: each failing spell that overlaps the period, read with two Queries and one BatchGet', async () => {
    const start = proxy.operations.length;
    const body = jsonBody(await get(`/finance/summary?from=${D1}&to=${D2}`)) as { failingSurveys: unknown[] };
    // The live registrations and those ended since the review horizon before the period (keys only: whose
    // reconciliations failed), those ended since a week before it (keys only), then their health.
    expect(proxy.operations.slice(start)).toEqual(['Query', 'Query', 'Query', 'Query', 'BatchGetItem']);
    expect(body.failingSurveys).toEqual([
      {
        surveyId: '8001',
        from: `${D1}T18:00:00.000Z`,
        to: `${D1}T20:00:00.000Z`,
        reasons: ['postbacks_stopped'],
      },
      { surveyId: '8002', from: '2026-11-10T00:00:00.000Z', reasons: ['postbacks_stopped'] },
    ]);
  });

  it('for the surveys asked for only, without listing the registry', async () => {
    const start = proxy.operations.length;
    const body = jsonBody(await get(`/finance/summary?from=${D2}&to=${D2}&survey=8001,8002`)) as {
      failingSurveys: { surveyId: string }[];
    };
    // Their registrations (is each known here?) and their health, by key.
    expect(proxy.operations.slice(start)).toEqual(['BatchGetItem', 'BatchGetItem']);
    expect(body.failingSurveys.map((f) => f.surveyId)).toEqual(['8002']);
    expect(body).not.toHaveProperty('unregisteredSurveys');
  });

  it('are in the report, and so in its HTML page', async () => {
    const report = await queries.report({ from: D1, to: D1 });
    expect(report.failingSurveys.map((f) => f.surveyId)).toEqual(['8001', '8002']);
  });

  it('a report of a survey named twice counts its discrepancies once', async () => {
    const once = await queries.report({ from: D1, to: D2 }, ['8001']);
    const twice = await queries.report({ from: D1, to: D2 }, ['8001', '8001']);
    expect(once.discrepancies.length).toBeGreaterThan(0);
    expect(twice.discrepancies).toEqual(once.discrepancies);
    expect(twice.totals).toEqual(once.totals);
  });
});

describe('summary', () => {
  it('adds up per survey and over the period, exactly', async () => {
    const result = await get(`/finance/summary?from=${D1}&to=${D2}`);
    expect(result.statusCode).toBe(200);
    const body = jsonBody(result) as {
      totals: Record<string, unknown>;
      surveys: Record<string, unknown>[];
      timeZone: string;
    };
    expect(body.timeZone).toBe('America/Los_Angeles');
    // 0.10 + 0.20 + 1234.567 = 1234.867; pending 1.20 + 0.05 + 0.00 = 1.25
    expect(body.totals).toMatchObject({
      surveys: 2,
      owed: '1234.867',
      pending: '1.25',
      completesPostback: 18,
      completesRedirectOnly: 3,
      marketplaceCompletes: 21,
      validCompletes: 12,
      invalidCompletes: 3,
      discrepancies: { invalidated: 2, complete_not_paid: 1 },
    });
    expect(body.surveys).toEqual([
      expect.objectContaining({
        surveyId: '8001',
        owed: '0.30',
        pending: '1.25',
        lastReconciledAt: `${D2}T23:00:00.000Z`,
      }),
      expect.objectContaining({ surveyId: '8002', owed: '1234.567', pending: '0.00' }),
    ]);
  });

  it('filters by survey and by period', async () => {
    const one = jsonBody(await get(`/finance/summary?from=${D2}&to=${D2}&survey=8001`)) as {
      totals: { owed: string };
      days: unknown[];
    };
    expect(one.totals.owed).toBe('0.20');
    expect(one.days).toHaveLength(1);
    const both = jsonBody(await get(`/finance/summary?from=${D1}&to=${D2}&survey=8001,8002`)) as {
      totals: { surveys: number };
    };
    expect(both.totals.surveys).toBe(2);
    // A survey named twice (in one list, or in two parameters) is one survey, in JSON and in CSV alike.
    for (const twice of ['survey=8001,8001', 'survey=8001&survey=8001']) {
      const answered = await get(`/finance/summary?from=${D1}&to=${D2}&${twice}`);
      expect(answered.statusCode, twice).toBe(200);
      expect(jsonBody(answered)).toEqual(
        jsonBody(await get(`/finance/summary?from=${D1}&to=${D2}&survey=8001`)),
      );
      const csv = await get(`/finance/summary?from=${D1}&to=${D2}&${twice}&format=csv`);
      expect(csv.statusCode, `${twice} csv`).toBe(200);
    }
  });

  it("reads a few named surveys' summaries by key, not every survey's, with the same rows", async () => {
    const read: string[] = [];
    const counting = new Proxy(results, {
      get: (target, name, receiver) => {
        const value = Reflect.get(target, name, receiver);
        return typeof value === 'function'
          ? (...args: unknown[]) => {
              read.push(String(name));
              return value.apply(target, args);
            }
          : value;
      },
    });
    const byKey = finance({ attempts, results: counting });
    const named = await byKey.summaryRows({ from: D1, to: D2 }, ['8002', '8001']);
    expect(read).not.toContain('daySummaries');
    const picked = (await queries.summaryRows({ from: D1, to: D2 })).filter((r) =>
      ['8001', '8002'].includes(r.surveyId),
    );
    expect(picked.length).toBeGreaterThan(1);
    expect(named).toEqual(picked);
  });

  it('a page of discrepancies too large to answer names the page size that fits, not fewer days of one survey', async () => {
    const [one] = (await queries.discrepancyPage({ from: D1, to: D2 }, { limit: 1 })).items;
    if (!one) throw new Error('no discrepancy to copy');
    // Ids of 2,000 control characters each (allowed, and six bytes each in JSON): 1,000 of them are 12 MB.
    const heavy = { ...one, pid: '\u0001'.repeat(2_000) };
    const handler = createFinanceHandler({
      queries: {
        ...queries,
        discrepancyPage: async (_period, options) => ({
          items: Array.from({ length: options.limit }, () => heavy),
        }),
      },
      auth: { mode: 'bearer', token: TOKEN },
      timeZone: 'America/Los_Angeles',
    });
    const page = (limit: number) =>
      invoke(
        handler,
        apiEvent('GET', `/finance/discrepancies?from=${D1}&to=${D1}&survey=8001&limit=${limit}`, {
          headers: auth,
        }),
      );
    const refused = await page(1000);
    expect(refused.statusCode).toBe(400);
    const message = String(jsonBody(refused).message);
    expect(message).not.toMatch(/fewer days/);
    const fits = Number(message.match(/ask for a smaller page \(limit=(\d+)\) and follow its cursor/)?.[1]);
    expect(fits).toBeGreaterThan(100);
    expect((await page(fits)).statusCode).toBe(200);
  });

  it('answers per survey or totals alone when asked, and names what to ask for when the answer would be too large', async () => {
    const surveysOnly = jsonBody(await get(`/finance/summary?from=${D1}&to=${D2}&detail=surveys`));
    expect(Object.keys(surveysOnly)).not.toContain('days');
    expect((surveysOnly as { surveys: unknown[] }).surveys).toHaveLength(2);
    const totals = jsonBody(await get(`/finance/summary?from=${D1}&to=${D2}&detail=totals`));
    expect(Object.keys(totals).sort()).toEqual([
      'failingSurveys',
      'from',
      'reconciliationFailing',
      'timeZone',
      'to',
      'totals',
    ]);
    expect((totals as { totals: { owed: string } }).totals.owed).toBe('1234.867');
    const bad = await get(`/finance/summary?from=${D1}&to=${D2}&detail=all`);
    expect(bad.statusCode).toBe(400);
    expect(jsonBody(bad).message).toBe('detail must be one of days, surveys, totals');

    // A supplier of 10,000 surveys asking for a week: 70,000 survey-days, over what Lambda can answer (a 502).
    const [stored] = await results.summariesOf('8002', [D2]);
    if (!stored) throw new Error('no summary of 8002');
    const row = (await queries.summaryRows({ from: D2, to: D2 }, ['8002']))[0] as Awaited<
      ReturnType<typeof queries.summaryRows>
    >[number];
    const week = { from: D1, to: nextDay(D1, 6) };
    const large = tenThousandSurveys(stored);
    const tooLarge = await invoke(
      large.handler,
      apiEvent('GET', `/finance/summary?from=${week.from}&to=${week.to}`, { headers: auth }),
    );
    expect(tooLarge.statusCode).toBe(400);
    expect(jsonBody(tooLarge).message).toMatch(
      /^the answer would be \d+\.\d MB, more than the 5\.8 MB an answer can carry: .*detail=surveys/,
    );
    const bySurvey = await invoke(
      large.handler,
      apiEvent('GET', `/finance/summary?from=${week.from}&to=${week.to}&detail=surveys`, { headers: auth }),
    );
    expect(bySurvey.statusCode).toBe(200);
    expect((jsonBody(bySurvey) as { totals: { surveys: number } }).totals.surveys).toBe(10_000);
    // The refusal names what is smaller than the request, never the request it refused.
    expect(jsonBody(tooLarge).message).not.toMatch(/detail=days/);
    // Incidents that turned every survey failing a few times (30,000 spells): the lists are bounded, the first
    // thousand of each and how many more, so the answer by survey and the totals still come.
    const incident = tenThousandSurveys(
      stored,
      Array.from({ length: 30_000 }, (_, i) => ({
        surveyId: String(10_000 + (i % 10_000)),
        from: `${D2}T17:00:00.000Z`,
        to: `${D2}T19:00:00.000Z`,
        reasons: ['refused_postbacks', 'success_without_postback', 'configuration_drift'],
      })),
    );
    for (const detail of ['surveys', 'totals']) {
      const answered = await invoke(
        incident.handler,
        apiEvent('GET', `/finance/summary?from=${week.from}&to=${week.to}&detail=${detail}`, {
          headers: auth,
        }),
      );
      expect(answered.statusCode).toBe(200);
      const bounded = jsonBody(answered) as { failingSurveys: unknown[]; failingSurveysLeftOut?: number };
      expect(bounded.failingSurveys).toHaveLength(FAILING_IN_JSON);
      expect(bounded.failingSurveysLeftOut).toBe(30_000 - FAILING_IN_JSON);
    }
    // The CSV too: by day it is as large, and it says so; by survey, one row each; the totals, one row.
    const csvOf = (detail: string) =>
      invoke(
        large.handler,
        apiEvent('GET', `/finance/summary?from=${week.from}&to=${week.to}&format=csv${detail}`, {
          headers: auth,
        }),
      );
    const csvTooLarge = await csvOf('');
    expect(csvTooLarge.statusCode).toBe(400);
    expect(jsonBody(csvTooLarge).message).toMatch(/detail=surveys or detail=totals/);
    const csvSurveys = parse(String((await csvOf('&detail=surveys')).body), { columns: true }) as Record<
      string,
      string
    >[];
    expect(csvSurveys).toHaveLength(10_000);
    expect(csvSurveys[0]).toMatchObject({
      survey_id: '10000',
      day: `${week.from}/${week.to}`,
      owed: sumAmounts(Array(7).fill(row.owed)),
    });
  });

  it("adds a month of ten thousand surveys' figures up as it reads them, and refuses one by day before reading it all", async () => {
    const [stored] = await results.summariesOf('8002', [D2]);
    if (!stored) throw new Error('no summary of 8002');
    const month = { from: '2026-10-01', to: '2026-10-31' };
    const large = tenThousandSurveys(stored);
    const totals = await invoke(
      large.handler,
      apiEvent('GET', `/finance/summary?from=${month.from}&to=${month.to}&detail=totals`, { headers: auth }),
    );
    expect(totals.statusCode).toBe(200);
    expect(large.daysRead()).toBe(31);
    // 310,000 survey-days, to the cent: every one owes what the stored day does.
    expect((jsonBody(totals) as { totals: { surveys: number; owed: string } }).totals).toMatchObject({
      surveys: 10_000,
      owed: sumAmounts(Array(310_000).fill(stored.marketplace.owed)),
      validCompletes: 310_000 * stored.marketplace.validCompletes,
    });

    // By day, it could never be answered (310,000 rows): refused once the days read say so, the rest left unread.
    const byDay = tenThousandSurveys(stored);
    const refused = await invoke(
      byDay.handler,
      apiEvent('GET', `/finance/summary?from=${month.from}&to=${month.to}&format=csv`, { headers: auth }),
    );
    expect(refused.statusCode).toBe(400);
    expect(jsonBody(refused).message).toMatch(
      /^the summary by day of this period has more than \d+ survey-day rows, .*detail=surveys or detail=totals$/,
    );
    expect(byDay.daysRead()).toBeLessThan(31);
  });

  it('answers the CSV summary per survey or as totals, adding up what the days say', async () => {
    const csv = async (detail: string) =>
      parse(String((await get(`/finance/summary?from=${D1}&to=${D2}&format=csv${detail}`)).body), {
        columns: true,
      }) as Record<string, string>[];
    const days = await csv('');
    const surveys = await csv('&detail=surveys');
    const [totals, ...more] = await csv('&detail=totals');
    expect(more).toEqual([]);
    expect(surveys.map((r) => r.survey_id)).toEqual(['8001', '8002']);
    for (const survey of surveys) {
      const own = days.filter((d) => d.survey_id === survey.survey_id);
      expect(survey.day).toBe(`${D1}/${D2}`);
      expect(survey.owed).toBe(sumAmounts(own.map((d) => d.owed as string)));
      expect(Number(survey.valid_completes)).toBe(own.reduce((n, d) => n + Number(d.valid_completes), 0));
      expect(survey.last_reconciled_at).toBe(
        own
          .map((d) => d.last_reconciled_at)
          .sort()
          .pop(),
      );
    }
    expect(totals).toMatchObject({ survey_id: 'all', day: `${D1}/${D2}`, owed: '1234.867' });
    expect(totals?.owed).toBe(sumAmounts(days.map((d) => d.owed as string)));
  });

  it('answers CSV with a stable header and decimal strings', async () => {
    const result = await get(`/finance/summary?from=${D1}&to=${D2}`, { ...auth, accept: 'text/csv' });
    expect(result.headers?.['content-type']).toBe('text/csv; charset=utf-8');
    const rows = parse(String(result.body), { columns: true }) as Record<string, string>[];
    expect(Object.keys(rows[0] ?? {})).toEqual([
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
      'discrepancies_complete_not_received',
      'discrepancies_complete_not_paid',
      'discrepancies_invalidated',
      'discrepancies_status_mismatch',
      'discrepancies_cpi_mismatch',
      'discrepancies_not_received',
      'discrepancies_not_in_marketplace',
      'money_discrepancies',
      'claims_unverified_claim',
      'claims_contradicted_claim',
      'last_reconciled_at',
      // Added later: last, so every column before keeps its place.
      'discrepancies_unknown_status',
      'awaiting',
      'matched',
      'survey_days',
    ]);
    expect(rows.map((r) => [r.survey_id, r.day, r.owed])).toEqual([
      ['8001', D1, '0.10'],
      ['8001', D2, '0.20'],
      ['8002', D2, '1234.567'],
    ]);
    expect(String(result.body).split('\r\n')[0]?.startsWith('survey_id,day,')).toBe(true);
  });

  it.each([
    ['from missing', `/finance/summary?to=${D2}`, 'from is missing (a Pacific day, YYYY-MM-DD)'],
    ['a malformed date', `/finance/summary?from=26-02-03&to=${D2}`, 'from must be a date YYYY-MM-DD'],
    [
      'a day the calendar does not have',
      `/finance/summary?from=2026-02-30&to=${D2}`,
      'from is not a day of the calendar (2026-02-30)',
    ],
    ['from after to', `/finance/summary?from=${D2}&to=${D1}`, 'from must not be after to'],
    [
      'a period too long',
      '/finance/summary?from=2026-01-01&to=2026-12-31',
      'a period may cover at most 92 days',
    ],
    [
      'a period of millennia',
      '/finance/discrepancies?from=0001-01-01&to=9999-12-31',
      'from is outside the years 2000-2199 (0001-01-01)',
    ],
    [
      'a malformed survey',
      `/finance/summary?from=${D1}&to=${D2}&survey=abc`,
      'survey: surveyId must be a positive integer of at most 12 digits',
    ],
    ['an unknown format', `/finance/summary?from=${D1}&to=${D2}&format=xml`, 'format must be json or csv'],
  ])('refuses %s with a 400 naming it', async (_, url, message) => {
    const result = await get(url);
    expect(result.statusCode).toBe(400);
    expect(jsonBody(result)).toEqual({ error: 'bad_request', message });
  });

  it('answers the last day of the years it reads, on every route that reads a period; a year past them is refused', async () => {
    for (const url of [
      '/finance/summary?from=2199-12-30&to=2199-12-31',
      '/finance/discrepancies?from=2199-12-31&to=2199-12-31',
      '/finance/attempts/8001?token=a1&from=2199-12-31&to=2199-12-31',
    ]) {
      const result = await get(url);
      expect(result.statusCode, url).toBeLessThan(500);
    }
    expect(jsonBody(await get('/finance/summary?from=2199-12-31&to=2199-12-31'))).toMatchObject({
      surveys: [],
    });
    const past = await get('/finance/summary?from=9999-12-31&to=9999-12-31');
    expect(past.statusCode).toBe(400);
    expect(jsonBody(past)).toMatchObject({ message: 'from is outside the years 2000-2199 (9999-12-31)' });
  });
});

describe('discrepancies', () => {
  it('lists every discrepancy of the period by day, survey and token, with the facts behind it', async () => {
    const body = jsonBody(await get(`/finance/discrepancies?from=${D1}&to=${D2}`)) as {
      items: Record<string, unknown>[];
    };
    expect(body.items.map((d) => d.token)).toEqual(['a1', 'a2', 'a3', 'b1', 'b2']);
    expect(body.items[0]).toMatchObject({
      surveyId: '8001',
      pid: 'pid-a1',
      kind: 'invalidated',
      day: D1,
      money: true,
      cpi: '1.10',
    });
  });

  it('filters by kind, by survey, and by both', async () => {
    const tokens = async (query: string) =>
      (
        jsonBody(await get(`/finance/discrepancies?from=${D1}&to=${D2}&${query}`)) as {
          items: { token: string }[];
        }
      ).items.map((d) => d.token);
    expect(await tokens('kind=invalidated')).toEqual(['a1', 'a3', 'b2']);
    expect(await tokens('survey=8002')).toEqual(['b1', 'b2']);
    expect(await tokens('survey=8001&kind=complete_not_paid')).toEqual(['a2']);
    expect(await tokens('kind=status_mismatch')).toEqual([]);
  });

  it('lists what was found in a period for earlier days (a reversal of a month already reported), and pages it', async () => {
    // A day of its own (the other tests list D1 and D2): one reversal judged at once, two recorded weeks later,
    // after the day's month was reported.
    const day = '2026-11-19';
    for (const [token, recordedAt] of [
      ['r0', `${day}T23:00:00Z`],
      ['r1', '2026-12-10T20:00:00Z'],
      ['r2', '2026-12-10T21:00:00Z'],
    ] as const)
      await judgedPostback(
        { attempts, results },
        {
          surveyId: '8005',
          token,
          day,
          kind: 'invalidated',
          seenAt: new Date(`${day}T20:00:00Z`),
          recordedAt: new Date(recordedAt),
        },
      );
    // r3: reversed on the day, restored (the buyer's review undone) in November, reversed again in December: found
    // in December, when the reversal that stands was made.
    for (const [kind, verifyToken, recordedAt] of [
      ['invalidated', 'Invalid', `${day}T23:00:00Z`],
      ['matched', 'Valid', '2026-11-25T20:00:00Z'],
      ['invalidated', 'Invalid', '2026-12-12T20:00:00Z'],
    ] as const)
      await judgedPostback(
        { attempts, results },
        {
          surveyId: '8005',
          token: 'r3',
          day,
          kind,
          verifyToken,
          seenAt: new Date(`${day}T20:00:00Z`),
          recordedAt: new Date(recordedAt),
        },
      );
    const found = (extra = '') =>
      get(`/finance/discrepancies?from=${day}&to=${day}&foundFrom=2026-12-01&foundTo=2026-12-31${extra}`);
    const all = jsonBody(await found()) as { items: { token: string; since: string }[]; foundFrom: string };
    expect(all.items.map((d) => d.token)).toEqual(['r1', 'r2', 'r3']);
    expect(all.items.find((d) => d.token === 'r3')?.since).toBe('2026-12-12T20:00:00.000Z');
    expect(all).toMatchObject({ foundFrom: '2026-12-01', foundTo: '2026-12-31' });
    // Found on the day itself: the one judged at once.
    const before = jsonBody(
      await get(`/finance/discrepancies?from=${day}&to=${day}&foundFrom=${day}&foundTo=${D2}`),
    ) as { items: { token: string }[] };
    expect(before.items.map((d) => d.token)).toEqual(['r0']);
    // Paged with its cursor; the cursor continues this list only.
    const first = jsonBody(await found('&limit=1')) as { items: { token: string }[]; nextCursor: string };
    expect(first.items.map((d) => d.token)).toEqual(['r1']);
    const second = jsonBody(await found(`&limit=1&cursor=${first.nextCursor}`)) as {
      items: { token: string }[];
    };
    expect(second.items.map((d) => d.token)).toEqual(['r2']);
    expect(
      (await get(`/finance/discrepancies?from=${day}&to=${day}&limit=1&cursor=${first.nextCursor}`))
        .statusCode,
    ).toBe(400);
    // As CSV, the same rows.
    const csv = await found('&format=csv');
    expect(String(csv.body).trim().split('\n').length).toBe(4);
    // Both days or neither, each a Pacific day.
    for (const [query, message] of [
      ['&foundFrom=2026-12-01', 'foundTo is missing'],
      ['&foundTo=2026-12-01', 'foundFrom is missing'],
      ['&foundFrom=2026-12-31&foundTo=2026-12-01', 'foundFrom must not be after foundTo'],
      ['&foundFrom=2026-13-01&foundTo=2026-12-31', 'foundFrom'],
    ]) {
      const refused = await get(`/finance/discrepancies?from=${day}&to=${day}${query}`);
      expect(refused.statusCode, query).toBe(400);
      expect(String(refused.body), query).toContain(message);
    }
  });

  it('pages with a cursor: every item once, in order', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const body = jsonBody(
        await get(
          `/finance/discrepancies?from=${D1}&to=${D2}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        ),
      ) as { items: { token: string }[]; nextCursor?: string };
      expect(body.items.length).toBeLessThanOrEqual(2);
      seen.push(...body.items.map((d) => d.token));
      cursor = body.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    expect(seen).toEqual(['a1', 'a2', 'a3', 'b1', 'b2']);
  });

  it('pages every row once while reconciliation changes verdicts between the pages', async () => {
    for (const [surveyId, day] of [
      [undefined, '2026-11-10'],
      ['8101', '2026-11-11'],
    ] as const) {
      const period = { from: day, to: day };
      const filter = surveyId ? { surveyId } : {};
      for (const token of ['t1', 't2', 't3']) await discrepancy('8101', day, token, 'complete_not_received');
      for (const token of ['t4', 't5', 't6']) await discrepancy('8101', day, token, 'invalidated');
      const first = await queries.discrepancyPage(period, { limit: 2, ...filter });
      const seen = first.items.map((d) => d.token);
      expect(seen).toEqual(['t1', 't2']);
      // A run re-judges between the pages: a row already shown moves to a kind after it, one not yet shown to a
      // kind before it (paged by kind, the first would be shown twice and the second never).
      await discrepancy('8101', day, 't1', 'invalidated');
      await discrepancy('8101', day, 't6', 'complete_not_paid');
      let cursor = first.nextCursor;
      while (cursor) {
        const page = await queries.discrepancyPage(period, { limit: 2, cursor, ...filter });
        seen.push(...page.items.map((d) => d.token));
        cursor = page.nextCursor;
      }
      expect(seen, surveyId ?? 'every survey').toEqual(['t1', 't2', 't3', 't4', 't5', 't6']);
    }
  });

  it("pages a survey whose rows take more than one of the index's reads, each row once, by token", async () => {
    const day = '2026-11-12';
    const tokens = Array.from({ length: 120 }, (_, i) => `r${String(i).padStart(3, '0')}`);
    for (const [i, token] of tokens.entries())
      await discrepancy('8102', day, token, i % 2 === 0 ? 'invalidated' : 'complete_not_received');
    for (const token of ['s1', 's2']) await discrepancy('8103', day, token, 'invalidated');
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await queries.discrepancyPage(
        { from: day, to: day },
        { limit: 50, ...(cursor ? { cursor } : {}) },
      );
      seen.push(...page.items.map((d) => d.token));
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    expect(seen).toEqual([...tokens, 's1', 's2']);
  });

  it("refuses another filter's cursor: it would start that list where the other had got to, leaving rows out", async () => {
    const cursorOf = async (filter: string) => {
      const first = jsonBody(await get(`/finance/discrepancies?from=${D1}&to=${D2}&${filter}&limit=1`)) as {
        nextCursor?: string;
      };
      expect(first.nextCursor, filter).toBeDefined();
      return encodeURIComponent(first.nextCursor as string);
    };
    for (const [from, others] of [
      ['survey=8001', ['survey=8002', 'survey=8001&kind=cpi_mismatch', '']],
      ['kind=invalidated', ['kind=complete_not_paid', 'kind=unverified_claim', '']],
      ['', ['kind=invalidated', 'survey=8001']],
    ] as const) {
      const cursor = await cursorOf(from);
      for (const filter of others) {
        const result = await get(`/finance/discrepancies?from=${D1}&to=${D2}&${filter}&cursor=${cursor}`);
        expect(result.statusCode, `${from} then ${filter}`).toBe(400);
        expect(jsonBody(result).message).toBe(
          'cursor is not one this API returned for this period, survey and kind',
        );
      }
      // The same filter goes on.
      expect(
        (await get(`/finance/discrepancies?from=${D1}&to=${D2}&${from}&cursor=${cursor}`)).statusCode,
      ).toBe(200);
    }
    // Cursors of the releases before (an index key in them, with or without the filter) cannot say where in the
    // list's order they stand: refused, to start again.
    const current = JSON.parse(
      Buffer.from(decodeURIComponent(await cursorOf('survey=8001')), 'base64url').toString('utf8'),
    ) as { d: string; s: string; t: string; p: string; f?: string };
    expect(current).toMatchObject({ f: `${D1}/${D2}|8001|`, s: '8001', t: 'a1', p: 'ATTEMPT#8001#pid-a1' });
    // Nor does one of another period: its position would skip what the new period holds before it.
    expect(
      (
        await get(
          `/finance/discrepancies?from=${D2}&to=${D2}&survey=8001&cursor=${await cursorOf('survey=8001')}`,
        )
      ).statusCode,
    ).toBe(400);
    const key = {
      gsi2pk: `DISCREPANCIES#${current.d}`,
      gsi2sk: '8001#invalidated#a1',
      pk: current.p,
      sk: 'TOKEN#a1',
    };
    for (const legacy of [
      { d: current.d, k: key },
      { d: current.d, k: key, f: '8001|' },
      { d: current.d, s: current.s, t: current.t, p: current.p, f: '8001|' },
    ])
      for (const filter of ['survey=8001', 'kind=invalidated', ''])
        expect(
          (
            await get(
              `/finance/discrepancies?from=${D1}&to=${D2}&${filter}&cursor=${Buffer.from(JSON.stringify(legacy)).toString('base64url')}`,
            )
          ).statusCode,
          filter,
        ).toBe(400);
  });

  it('refuses a forged cursor, a bad limit and an unknown kind', async () => {
    for (const [query, message] of [
      ['cursor=bm9wZQ', 'cursor is not one this API returned for this period, survey and kind'],
      // Empty (a script's cursor variable that came back empty): refused, not read as the first page again.
      ['cursor=', 'cursor is not one this API returned for this period, survey and kind'],
      // Well-formed JSON with a day in the period but a key DynamoDB would refuse (a 500 before).
      ...[
        { d: D1, k: { pk: 1 } },
        { d: D1, k: { gsi2pk: `DISCREPANCIES#${D1}`, gsi2sk: 'x', pk: 'p', sk: 's', extra: 'e' } },
        { d: D1, k: { gsi2pk: `DISCREPANCIES#${D2}`, gsi2sk: 'x', pk: 'p', sk: 's' } },
        { d: D1, k: [1, 2] },
        // Past DynamoDB's key bounds (sort key 1,024 bytes, partition key 2,048): refused here, not by the store.
        { d: D1, k: { gsi2pk: `DISCREPANCIES#${D1}`, gsi2sk: 'x'.repeat(1025), pk: 'p', sk: 's' } },
        { d: D1, k: { gsi2pk: `DISCREPANCIES#${D1}`, gsi2sk: 'x', pk: 'p'.repeat(2049), sk: 's' } },
        { d: D1, k: { gsi2pk: `DISCREPANCIES#${D1}`, gsi2sk: 'x', pk: 'p', sk: 'é'.repeat(513) } },
        { d: `${D1}T00`, k: undefined },
        null,
        // Positions that are no row of the list: not a survey id, past the key bounds, not strings, given in part.
        ...[
          { s: 'x8001', t: 'a1', p: 'p' },
          { s: '8001', t: 'x'.repeat(1025), p: 'p' },
          { s: '8001', t: 'a1', p: 'p'.repeat(2049) },
          { s: '8001', t: 1, p: 'p' },
          { s: '8001', t: '', p: 'p' },
          { s: '8001' },
          { t: 'a1', p: 'p' },
        ].map((position) => ({ d: D1, f: `${D1}/${D2}||`, ...position })),
      ].map(
        (cursor) =>
          [
            `cursor=${Buffer.from(JSON.stringify(cursor)).toString('base64url')}`,
            'cursor is not one this API returned for this period, survey and kind',
          ] as const,
      ),
      ['limit=0', 'limit must be an integer from 1 to 1000'],
      ...['0x10', '1e2', '%201', '10.0', '', '-5'].map(
        (limit) => [`limit=${limit}`, 'limit must be an integer from 1 to 1000'] as const,
      ),
      ['kind=matched', expect.stringMatching(/^kind must be one of complete_not_received, /)],
      // Empty (a script's unset variable): not read as every kind, or every survey's money.
      ['kind=', expect.stringMatching(/^kind is empty: leave it out for every kind/)],
      ...['survey=', 'survey=8001,', 'survey=8001,,8002', 'survey=8001&survey='].map(
        (survey) =>
          [survey, expect.stringMatching(/^survey is empty: leave it out for every survey/)] as const,
      ),
    ]) {
      const result = await get(`/finance/discrepancies?from=${D1}&to=${D2}&${query}`);
      expect(result.statusCode).toBe(400);
      expect(jsonBody(result).message).toEqual(message);
    }
  });

  it('as CSV: quotes what needs quoting and neutralises formulas', async () => {
    const result = await get(`/finance/discrepancies?from=${D1}&to=${D2}&format=csv`);
    const body = String(result.body);
    const rows = parse(body, { columns: true }) as Record<string, string>[];
    expect(rows.find((r) => r.token === 'a2')?.marketplace_status).toBe(
      `'=HYPERLINK("http://evil.example","x")`,
    );
    expect(rows.find((r) => r.token === 'b1')?.marketplace_status).toBe('Completed, "verified"');
    expect(body).not.toMatch(/(^|,)=HYPERLINK/m);
    expect(rows.every((r) => !/^[=+\-@]/.test(Object.values(r).join('')))).toBe(true);
  });
});

describe('requests', () => {
  it('refuses a query parameter the route does not read, naming it: a misspelt filter would answer for everything', async () => {
    for (const [url, name] of [
      [`/finance/summary?from=${D1}&to=${D2}&detail=totals&surveyId=8001`, '"surveyId"'],
      [`/finance/summary?from=${D1}&to=${D2}&surveys=8001`, '"surveys"'],
      [`/finance/discrepancies?from=${D1}&to=${D2}&kinds=invalidated`, '"kinds"'],
      ['/finance/attempts/8001?pid=pid-a1&survey=8001', '"survey"'],
    ] as const) {
      const result = await get(url);
      expect(result.statusCode, url).toBe(400);
      expect(jsonBody(result).message, url).toMatch(
        new RegExp(`^unknown query parameter ${name}: this route reads `),
      );
    }
    // A signature carried in the query (a presigned URL) is API Gateway's, not the route's.
    const presigned = await get(
      `/finance/summary?from=${D1}&to=${D2}&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=abc&x-amz-date=20261125T000000Z`,
    );
    expect(presigned.statusCode).toBe(200);
  });

  it('refuses a parameter given twice (but survey, a list), naming it: the second would be dropped unread', async () => {
    for (const [url, name] of [
      [`/finance/summary?from=${D1}&to=${D2}&from=2020-01-01`, '"from"'],
      [`/finance/summary?from=${D1}&to=${D2}&format=json&format=csv`, '"format"'],
      [`/finance/summary?from=${D1}&to=${D2}&detail=totals&detail=bogus`, '"detail"'],
    ] as const) {
      const result = await get(url);
      expect(result.statusCode, url).toBe(400);
      expect(jsonBody(result).message, url).toBe(`query parameter ${name} given more than once`);
    }
    expect((await get(`/finance/summary?from=${D1}&to=${D2}&survey=8001&survey=8002`)).statusCode).toBe(200);
  });

  it('answers CSV or JSON as format says, else as Accept prefers', async () => {
    const typeOf = async (query: string, accept?: string) =>
      String(
        (await get(`/finance/summary?from=${D1}&to=${D2}${query}`, accept ? { ...auth, accept } : auth))
          .headers?.['content-type'],
      ).split(';')[0];
    expect(await typeOf('&format=json', 'text/csv')).toBe('application/json');
    expect(await typeOf('&format=csv', 'application/json')).toBe('text/csv');
    expect(await typeOf('', 'text/csv')).toBe('text/csv');
    expect(await typeOf('', 'application/json, text/csv;q=0.1')).toBe('application/json');
    expect(await typeOf('', 'text/csv;q=0.9, application/json;q=0.5')).toBe('text/csv');
    expect(await typeOf('', 'text/csv;q=0')).toBe('application/json');
    expect(await typeOf('', '*/*')).toBe('application/json');
  });

  it('names a survey asked for that has no registration here: its zeros are a mistyped id, not nothing owed or disputed', async () => {
    const body = jsonBody(await get(`/finance/summary?from=${D1}&to=${D2}&survey=8001,9999`)) as {
      unregisteredSurveys?: string[];
    };
    expect(body.unregisteredSurveys).toEqual(['9999']);
    const csv = await get(`/finance/summary?from=${D1}&to=${D2}&survey=8001,9999&format=csv`);
    expect(csv.headers).toMatchObject({ 'x-unregistered-surveys': '9999' });
    const all = jsonBody(await get(`/finance/summary?from=${D1}&to=${D2}`));
    expect(all).not.toHaveProperty('unregisteredSurveys');
    // Its discrepancies too: none, and said why.
    const listed = jsonBody(await get(`/finance/discrepancies?from=${D1}&to=${D2}&survey=9999`));
    expect(listed).toMatchObject({ items: [], unregisteredSurveys: ['9999'] });
    const listedCsv = await get(`/finance/discrepancies?from=${D1}&to=${D2}&survey=9999&format=csv`);
    expect(listedCsv.headers).toMatchObject({ 'x-unregistered-surveys': '9999' });
    expect(jsonBody(await get(`/finance/discrepancies?from=${D1}&to=${D2}&survey=8001`))).not.toHaveProperty(
      'unregisteredSurveys',
    );
  });

  it("names surveys whose reconciliation of the period's days failed, in JSON and in the CSV's headers, with the zone", async () => {
    await results.putSurveyState({
      surveyId: '8004',
      failedDays: [D1],
      lastError: 'the marketplace answered HTTP 503',
      lastErrorAt: `${D2}T10:00:00.000Z`,
      failingSince: `${D2}T09:00:00.000Z`,
    });
    const body = jsonBody(await get(`/finance/summary?from=${D1}&to=${D2}&survey=8004`)) as {
      reconciliationFailing: unknown[];
    };
    expect(body.reconciliationFailing).toEqual([
      {
        surveyId: '8004',
        days: [D1],
        error: 'the marketplace answered HTTP 503',
        failingSince: `${D2}T09:00:00.000Z`,
        lastFailedAt: `${D2}T10:00:00.000Z`,
      },
    ]);
    const csv = await get(`/finance/summary?from=${D1}&to=${D2}&survey=8004,8001&format=csv`);
    expect(csv.headers).toMatchObject({
      'x-reconciliation-failing': '8004',
      'x-reconciliation-failing-count': '1',
      'x-time-zone': 'America/Los_Angeles',
    });
    // A marketplace outage fails every survey: the header names the first fifty, the count says how many.
    const many = Array.from({ length: 80 }, (_, i) => String(8200 + i));
    for (const surveyId of many)
      await results.putSurveyState({ surveyId, failedDays: [D1], lastError: 'the marketplace is down' });
    const outage = await get(`/finance/summary?from=${D1}&to=${D2}&survey=${many.join(',')}&format=csv`);
    expect(outage.headers?.['x-reconciliation-failing-count']).toBe('80');
    expect(String(outage.headers?.['x-reconciliation-failing']).split(',')).toEqual(many.slice(0, 50));
    const fine = await get(`/finance/summary?from=${D1}&to=${D2}&survey=8001&format=csv`);
    expect(fine.headers).not.toHaveProperty('x-reconciliation-failing');
    expect(jsonBody(await get('/finance/attempts/8001?pid=pid-a1')) as { timeZone: string }).toMatchObject({
      timeZone: 'America/Los_Angeles',
    });
  });
});

describe('one attempt', () => {
  it('by pid or by token, with its hits and verdict history; 404 when unknown', async () => {
    const byPid = jsonBody(await get('/finance/attempts/8001?pid=pid-a1')) as {
      attempts: Record<string, unknown>[];
    };
    expect(byPid.attempts[0]).toMatchObject({
      token: 'a1',
      postback: { outcome: 'success', hits: 1 },
      reconciliation: { verdict: 'invalidated', history: [{ verdict: 'invalidated' }] },
    });
    const byToken = jsonBody(await get(`/finance/attempts/8002?token=b1&from=${D1}&to=${D2}`)) as {
      attempts: { pid: string }[];
    };
    expect(byToken.attempts.map((a) => a.pid)).toEqual(['pid-b1']);
    // Another pid claiming the same token (its postback signed, days later): shown beside the first, every one.
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '8002',
        outcome: 'success',
        pid: 'other-b1',
        token: 'b1',
        source: 'query',
      },
      new Date(`${D2}T21:00:00.000Z`),
    );
    const both = jsonBody(await get(`/finance/attempts/8002?token=b1&from=${D1}&to=${D2}`)) as {
      attempts: { pid: string }[];
    };
    expect(both.attempts.map((a) => a.pid)).toEqual(['pid-b1', 'other-b1']);
    expect((await get(`/finance/attempts/8002?token=nope&from=${D1}&to=${D2}`)).statusCode).toBe(404);
    expect((await get('/finance/attempts/8002')).statusCode).toBe(400);
    // A token whose bytes are not UTF-8 is named, not looked for as replacement characters (404).
    const garbled = await get('/finance/attempts/8002?token=%C0%AF');
    expect([garbled.statusCode, jsonBody(garbled)]).toEqual([
      400,
      { error: 'bad_request', message: 'token is not well-formed UTF-8' },
    ]);
    // A Latin-1 pid, kept by the receivers with its stray byte escaped: found by the pid as the panel sends it.
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '8003',
        outcome: 'success',
        pid: 'Jos%E9',
        token: 'l1',
        source: 'query',
      },
      new Date(`${D1}T20:00:00Z`),
    );
    const latin1 = jsonBody(await get('/finance/attempts/8003?pid=Jos%E9')) as {
      attempts: { token: string }[];
    };
    expect(latin1.attempts?.map((a) => a.token)).toEqual(['l1']);
    // The empty pid (an entry link that carried none), as the receivers record it: found by `pid=` alone; beside a
    // token, `pid=` asks for no pid (every attempt of the token).
    await attempts.recordHit(
      { channel: 'postback', surveyId: '8003', outcome: 'success', pid: '', token: 'e1', source: 'query' },
      new Date(`${D1}T20:00:00Z`),
    );
    const empty = jsonBody(await get('/finance/attempts/8003?pid=')) as { attempts: { token: string }[] };
    expect(empty.attempts?.map((a) => a.token)).toEqual(['e1']);
    const emptyWithToken = jsonBody(
      await get(`/finance/attempts/8003?pid=&token=e1&from=${D1}&to=${D1}`),
    ) as {
      attempts: { token: string; pid: string }[];
    };
    expect(emptyWithToken.attempts?.map((a) => [a.pid, a.token])).toEqual([['', 'e1']]);
    // By pid within a period: the attempts first seen in it (a period before the hit finds none).
    const inPeriod = jsonBody(await get(`/finance/attempts/8003?pid=Jos%E9&from=${D1}&to=${D1}`)) as {
      attempts: { token: string }[];
    };
    expect(inPeriod.attempts?.map((a) => a.token)).toEqual(['l1']);
    expect((await get('/finance/attempts/8003?pid=Jos%E9&from=2020-01-01&to=2020-01-31')).statusCode).toBe(
      404,
    );
    // A complete clicked before Pacific midnight whose postback came after it (or days late): judged, and listed
    // among the discrepancies, on its click's day; found by pid for that day as by token.
    await judgedPostback(
      { attempts, results },
      {
        surveyId: '8004',
        token: 'late',
        day: D1,
        kind: 'invalidated',
        // 00:20 Pacific on the day after D1, the click ten minutes before midnight.
        seenAt: new Date(`${D2}T08:20:00Z`),
        clickedAt: `${D2}T07:50:00.000Z`,
        recordedAt: new Date(`${D2}T23:00:00Z`),
      },
    );
    const listed = jsonBody(await get(`/finance/discrepancies?from=${D1}&to=${D1}&survey=8004`)) as {
      items: { pid: string }[];
    };
    expect(listed.items.map((d) => d.pid)).toEqual(['pid-late']);
    for (const query of ['pid=pid-late', 'token=late']) {
      const found = await get(`/finance/attempts/8004?${query}&from=${D1}&to=${D1}`);
      expect(found.statusCode, query).toBe(200);
      expect((jsonBody(found) as { attempts: { token: string }[] }).attempts.map((a) => a.token)).toEqual([
        'late',
      ]);
    }
    // Asked for as CSV: said to be JSON only, not answered as JSON as if CSV were given.
    const csv = await get('/finance/attempts/8001?pid=pid-a1&format=csv');
    expect(csv.statusCode).toBe(400);
    expect(jsonBody(csv).message).toMatch(/^attempts are answered as JSON only/);
  });
});
