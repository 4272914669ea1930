/**
 * The reconciler against the local marketplace and the embedded engine: verdicts and summaries written,
 * idempotent re-runs, statuses that change after the fact, failures isolated and retried, and runs that resume.
 */
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { finance } from '../../functions/finance/finance-queries';
import { discrepanciesCsv, summaryCsv } from '../../functions/finance/report-csv';
import { reportHtml } from '../../functions/finance/report-html';
import { StoreUnavailable } from '../../functions/ledger/document-client';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
  type LedgerStore,
  pricedAt,
  type ReconciliationStore,
  type SurveyRegistration,
  type SurveyRegistry,
} from '../../functions/ledger/ledger-store';
import {
  createMarketplaceClient,
  MARKETPLACE_DOWN_SURVEYS,
  type MarketplaceClient,
  MarketplaceError,
} from '../../functions/marketplace/marketplace-client';
import { formatPacificTime, pacificDay, pacificDayRange } from '../../functions/marketplace/pacific-time';
import { REVIEW_HORIZON_DAYS } from '../../functions/reconciliation/recheck-policy';
import {
  createReconcileHandler,
  summarizeReconcileRun,
} from '../../functions/reconciliation/reconcile-handler';
import {
  LISTED_BY_DAY_MS,
  type RunReport,
  reconciler,
  SCHEDULED_RUN,
} from '../../functions/reconciliation/reconciler';
import { MONEY_KINDS } from '../../functions/reconciliation/verdict-kinds';
import { nextDay, pacificDays } from '../../functions/reconciliation/verdict-rules';
import {
  type LocalMarketplace,
  NO_API_FAULTS,
  startLocalMarketplace,
} from '../../infra/local/marketplace/server';
import type { SimTransaction } from '../../infra/local/marketplace/state';
import { apiEvent, filledUrl, type Handler, invoke } from '../support/api-events';
import { receivers } from '../support/handlers';
import { freshTable, TEST_KEY_RING } from '../support/ledger';

const TOKEN = 'reconciler-token';
let marketplace: LocalMarketplace;
let attempts: LedgerStore;
let registry: SurveyRegistry;
let results: ReconciliationStore;
let sequence = 0;
let redirect: Handler;

/**
 * The day these tests reconcile: yesterday in Pacific time, with every attempt and transaction placed around its
 * noon. With the real "now" the fixtures' "an hour ago" fell on the day before whenever the suite ran in the first
 * hour after Pacific midnight.
 */
const REFERENCE_MS = pacificDayRange(nextDay(pacificDay(new Date()), -1)).start.getTime() + 12 * 3_600_000;
const today = pacificDay(new Date(REFERENCE_MS));
const engine = (overrides: Partial<Parameters<typeof reconciler>[0]> = {}) =>
  reconciler({
    marketplace: createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 1,
      minBackoffMs: 1,
      maxBackoffMs: 2,
    }),
    attempts,
    registry,
    results,
    ...overrides,
  });

beforeAll(async () => {
  const { endpoint, tableName } = await freshTable();
  const client = createDocumentClient({ endpoint });
  attempts = createLedgerStore(client, tableName);
  registry = createSurveyRegistry(client, tableName);
  results = createReconciliationStore(client, tableName);
  marketplace = await startLocalMarketplace({ accessToken: TOKEN, seedSurveys: false });
  ({ redirect } = await receivers({ endpoint, tableName }));
});
afterAll(() => marketplace.stop());
beforeEach(() => {
  marketplace.apiFaults = { ...NO_API_FAULTS };
});

async function survey(surveyId: number, cpi = '1.50') {
  marketplace.state.addSurvey({ surveyId, cpi });
  const at = new Date().toISOString();
  await registry.put({
    surveyId: String(surveyId),
    state: 'active',
    verified: true,
    failures: 0,
    expectedCpi: cpi,
    updatedAt: at,
  });
}

/** A transaction at the marketplace, and optionally what arrived here for it. */
async function attempt(
  surveyId: number,
  status: string,
  here?: { postback?: 'success' | 'fail'; redirect?: 'success' | 'fail' | 'overquota' },
) {
  const token = `tok-${surveyId}-${++sequence}`;
  const pid = `pid-${sequence}`;
  const clickedAt = new Date(REFERENCE_MS - 30 * 60_000);
  const transaction: SimTransaction = {
    surveyId,
    token,
    pid,
    status,
    ip: '198.51.100.1',
    trackId: token,
    termReason: '',
    clickedAt,
    ...(status === 'Completed' ? { completedAt: new Date(REFERENCE_MS - 20 * 60_000) } : {}),
    verifyToken: 'Pending',
    notified: true,
  };
  marketplace.state.transactions.push(transaction);
  for (const [channel, outcome] of Object.entries(here ?? {})) {
    await attempts.recordHit(
      {
        channel: channel as 'postback',
        surveyId: String(surveyId),
        outcome: outcome as 'success',
        pid,
        token,
        source: 'query',
      },
      new Date(REFERENCE_MS - 15 * 60_000),
    );
  }
  return { token, pid, transaction };
}

/** A valid complete as the marketplace's list writes it, clicked in an hour before the reference time. */
const listedComplete = (token: string, pid: string) => ({
  token,
  PID: pid,
  status: 'Completed',
  CPI: '1.50',
  verifyToken: 'Valid',
  clkDateTime: formatPacificTime(new Date(REFERENCE_MS - 3_600_000)),
});

/** A listing of more than one day refused as too large for the client to read, as a large survey's week is. */
const tooLarge = (id: string) =>
  new MarketplaceError({
    endpoint: `/getSurveyTransactions/${id}`,
    kind: 'malformed',
    detail: 'the answer is over 64 MB, not read',
    tooLarge: true,
  });

/** `client`, answering only listings of one day: any longer one is too large (`tooLarge`). */
const dayAtATime = (client: MarketplaceClient): MarketplaceClient => ({
  ...client,
  getSurveyTransactions: (id, range) =>
    range && range.startDate !== range.endDate
      ? Promise.reject(tooLarge(id))
      : client.getSurveyTransactions(id, range),
});

/** A marketplace client whose every list is `rows(asked)` as they stand when it is called. */
const listing = (rows: (asked: URLSearchParams) => unknown[]) =>
  createMarketplaceClient({
    baseUrl: marketplace.url,
    accessToken: () => TOKEN,
    retries: 0,
    fetch: async (input) =>
      new Response(
        JSON.stringify({ apiStatus: 'success', result: rows(new URL(String(input)).searchParams) }),
        { status: 200 },
      ),
  });

/**
 * A marketplace whose listings of the window (ending today or later: a look-back's ends before, and lists nothing)
 * answer `whole()`, or `cut()` once after `cutNext()`; `answers` counts them.
 */
function cutOnce(whole: () => unknown[], cut: () => unknown[]) {
  let short = false;
  const counted = { answers: 0 };
  const client = listing((asked) => {
    if ((asked.get('endDate') ?? '') < today) return [];
    counted.answers++;
    const listed = short ? cut() : whole();
    short = false;
    return listed;
  });
  return {
    client,
    counted,
    cutNext: () => {
      short = true;
      counted.answers = 0;
    },
  };
}

describe('a reconciliation run', () => {
  it('writes a verdict on every attempt and a summary per day, and a re-run changes nothing', async () => {
    await survey(7001, '2.00');
    const good = await attempt(7001, 'Completed', { postback: 'success', redirect: 'success' });
    const missing = await attempt(7001, 'Completed', { redirect: 'success' });
    const unseen = await attempt(7001, 'Over Quota');
    const first = await engine().run(today, today, ['7001']);
    expect(first.outcomes[0]).toMatchObject({
      status: 'reconciled',
      transactions: 3,
      verdicts: { matched: 1, complete_not_received: 1, not_received: 1 },
      changes: { new: 3 },
    });

    expect((await attempts.attemptsOf('7001', good.pid))[0]?.reconciliation).toMatchObject({
      verdict: 'matched',
      day: today,
      history: [{ verdict: 'matched' }],
    });
    expect((await attempts.attemptsOf('7001', missing.pid))[0]?.reconciliation).toMatchObject({
      verdict: 'complete_not_received',
      detail: { successRedirect: true },
      marketplace: { status: 'Completed', cpi: '2.00', verifyToken: 'Pending' },
    });
    // The transaction never seen here now has an attempt in the ledger, carrying its verdict.
    expect((await attempts.attemptsOf('7001', unseen.pid))[0]).toMatchObject({
      complete: 'none',
      reconciliation: { verdict: 'not_received' },
    });

    const [summary] = (await results.daySummaries(today)).filter((s) => s.surveyId === '7001');
    expect(summary).toMatchObject({
      here: { attempts: 2, postbackCompletes: 1, redirectOnlyCompletes: 1 },
      marketplace: { completes: 2, pending: '4.00', owed: '0.00' },
    });
    expect((await results.discrepancies(today, '7001')).map((a) => a.token).sort()).toEqual(
      [missing.token, unseen.token].sort(),
    );

    const again = await engine().run(today, today, ['7001']);
    expect(again.outcomes[0]?.changes).toEqual({ new: 0, changed: 0, refreshed: 0 });
    // Attempts here: the two that arrived, not the item kept for the transaction never seen here.
    expect(again.outcomes[0]?.attempts).toBe(2);
    expect((await attempts.attemptsOf('7001', good.pid))[0]?.reconciliation?.history).toHaveLength(1);
  });

  it('prices a reversal at what owed counted: a complete listed at its own price, then reviewed Invalid and listed at 0', async () => {
    await survey(7041, '2.00');
    const complete = await attempt(7041, 'Completed', { postback: 'success' });
    // Filed at a price of its own (the buyer's), not the survey's.
    complete.transaction.cpi = '2.10';
    await engine().run(today, today, ['7041']);
    const [pending] = await attempts.attemptsOf('7041', complete.pid);
    expect(pending?.reconciliation).toMatchObject({ marketplace: { cpi: '2.10', verifyToken: 'Pending' } });
    // The buyer rejects it; the marketplace lists an Invalid complete as earning nothing (CPI the number 0).
    complete.transaction.verifyToken = 'Invalid';
    await engine().run(today, today, ['7041']);
    const [reversed] = await attempts.attemptsOf('7041', complete.pid);
    expect(reversed?.reconciliation).toMatchObject({
      verdict: 'invalidated',
      marketplace: { cpi: '0.00' },
      detail: { reversedCpi: '2.10' },
    });
    const report = await finance({ attempts, results }).report({ from: today, to: today }, ['7041']);
    expect(report.amounts.reversed).toBe('2.10');
  });

  it('a complete owed with no postback here (a redirect, or nothing) whose row the marketplace lists no more is shown reversed, at what owed counted', async () => {
    await survey(7018, '1.25');
    const redirected = await attempt(7018, 'Completed', { redirect: 'success' });
    const terminated = await attempt(7018, 'Completed', { redirect: 'fail' });
    const unheard = await attempt(7018, 'Completed');
    // The redirected respondent back later the same day, not completing: no sign its complete is still listed.
    marketplace.state.transactions.push({
      ...redirected.transaction,
      token: `${redirected.token}-again`,
      status: 'Failed',
      clickedAt: new Date(REFERENCE_MS + 3 * 3_600_000),
      completedAt: undefined,
    });
    // The terminated respondent back later the same day, completing under a token of its own with its postback
    // here: its own complete, not the one whose row goes.
    const back: SimTransaction = {
      ...terminated.transaction,
      token: `${terminated.token}-again`,
      clickedAt: new Date(REFERENCE_MS + 3 * 3_600_000),
      completedAt: new Date(REFERENCE_MS + 3.2 * 3_600_000),
      verifyToken: 'Valid',
    };
    marketplace.state.transactions.push(back);
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7018',
        outcome: 'success',
        pid: back.pid,
        token: back.token,
        source: 'query',
      },
      new Date(REFERENCE_MS + 3.3 * 3_600_000),
    );
    // A redirect under a token the marketplace does not list, paired by pid with a complete of its respondent (a
    // complete not received, at first); then that complete's own postback arrives and takes its row by token. The
    // row still listed, the redirect is no reversal.
    const paired = await attempt(7018, 'Completed');
    const stray = { pid: paired.pid, token: `${paired.token}-stray` };
    const hit = (channel: 'redirect' | 'postback', token: string) =>
      attempts.recordHit(
        { channel, surveyId: '7018', outcome: 'success', pid: paired.pid, token, source: 'query' },
        new Date(REFERENCE_MS - 15 * 60_000),
      );
    await hit('redirect', stray.token);
    for (const t of [redirected, terminated, unheard, paired]) t.transaction.verifyToken = 'Valid';
    await engine().run(today, today, ['7018']);
    const strayVerdict = async () =>
      (await attempts.attemptsOf('7018', paired.pid)).find((a) => a.token === stray.token)?.reconciliation;
    expect(await strayVerdict()).toMatchObject({ verdict: 'complete_not_received' });
    await hit('postback', paired.token);
    const report = () => finance({ attempts, results }).report({ from: today, to: today }, ['7018']);
    expect((await report()).amounts).toMatchObject({ notReceived: '5.00', reversed: '0.00' });
    expect((await report()).totals).toMatchObject({ owed: '6.25' });
    // Gone from the listing.
    for (const t of [redirected, terminated, unheard])
      marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(t.transaction), 1);
    await engine().run(today, today, ['7018']);
    for (const t of [redirected, terminated, unheard]) {
      const [judged] = await attempts.attemptsOf('7018', t.pid);
      expect(judged?.reconciliation).toMatchObject({
        verdict: 'invalidated',
        detail: { marketplaceStatus: 'missing', reversedCpi: '1.25' },
      });
    }
    expect(await strayVerdict()).toMatchObject({ verdict: 'unverified_claim' });
    expect((await report()).amounts).toMatchObject({ notReceived: '0.00', reversed: '3.75' });
    expect((await report()).totals).toMatchObject({ owed: '2.50' });
  });

  it('a redirect paired by pid with a row that one listing leaves out, then listed again and taken by its own postback: a claim again, no reversal left', async () => {
    await survey(7019, '1.25');
    const paired = await attempt(7019, 'Completed');
    paired.transaction.verifyToken = 'Valid';
    const stray = `${paired.token}-stray`;
    const hit = (channel: 'redirect' | 'postback', token: string) =>
      attempts.recordHit(
        { channel, surveyId: '7019', outcome: 'success', pid: paired.pid, token, source: 'query' },
        new Date(REFERENCE_MS - 15 * 60_000),
      );
    await hit('redirect', stray);
    const strayVerdict = async () =>
      (await attempts.attemptsOf('7019', paired.pid)).find((a) => a.token === stray)?.reconciliation;
    await engine().run(today, today, ['7019']);
    expect(await strayVerdict()).toMatchObject({ verdict: 'complete_not_received' });
    // One listing without the row (taken at its word at once here): what owed counted is shown reversed.
    marketplace.state.transactions.splice(marketplace.state.transactions.indexOf(paired.transaction), 1);
    await engine({ emptyConfirmMs: 0 }).run(today, today, ['7019']);
    expect(await strayVerdict()).toMatchObject({ verdict: 'invalidated' });
    // Listed again, its own postback in.
    marketplace.state.transactions.push(paired.transaction);
    await hit('postback', paired.token);
    for (let run = 0; run < 2; run++) {
      await engine().run(today, today, ['7019']);
      expect(await strayVerdict()).toMatchObject({ verdict: 'unverified_claim' });
      const report = await finance({ attempts, results }).report({ from: today, to: today }, ['7019']);
      expect(report.amounts.reversed).toBe('0.00');
      expect(report.totals.owed).toBe('1.25');
    }
  });

  it('keeps the history of a verdict that changes after the fact, and refreshes facts that change without it', async () => {
    await survey(7002);
    const reversed = await attempt(7002, 'Completed', { postback: 'success' });
    const approved = await attempt(7002, 'Completed', { postback: 'success' });
    const refiled = await attempt(7002, 'Completed', { postback: 'success' });
    await engine().run(today, today, ['7002']);
    reversed.transaction.verifyToken = 'Invalid';
    approved.transaction.verifyToken = 'Valid';
    // The buyer's review and a completion time filed anew: the time is a fact the attempt shows, written.
    refiled.transaction.verifyToken = 'Valid';
    refiled.transaction.completedAt = new Date(REFERENCE_MS - 10 * 60_000);
    const later = await engine().run(today, today, ['7002']);
    expect(later.outcomes[0]?.changes).toEqual({ new: 0, changed: 1, refreshed: 1 });
    expect(later.outcomes[0]?.changed).toEqual([
      { token: reversed.token, from: 'matched', to: 'invalidated' },
    ]);
    const history = (await attempts.attemptsOf('7002', reversed.pid))[0]?.reconciliation?.history ?? [];
    expect(history.map((h) => h.verdict)).toEqual(['matched', 'invalidated']);
    // A matched complete's review moving on to Valid alone is not written: the attempt shows it as judged.
    const [judged] = await attempts.attemptsOf('7002', approved.pid);
    expect(judged?.reconciliation).toMatchObject({
      verdict: 'matched',
      marketplace: { verifyToken: 'Pending' },
    });
    expect((await attempts.attemptsOf('7002', refiled.pid))[0]?.reconciliation).toMatchObject({
      verdict: 'matched',
      marketplace: { verifyToken: 'Valid', completedAt: new Date(REFERENCE_MS - 10 * 60_000).toISOString() },
    });
    expect((await results.daySummaries(today)).find((s) => s.surveyId === '7002')?.marketplace).toMatchObject(
      { owed: '3.00', validCompletes: 2, pendingCompletes: 0, invalidCompletes: 1 },
    );
    expect((await results.discrepancies(today, '7002')).map((a) => a.token)).toEqual([reversed.token]);
    // Unchanged the run after: no write for it, every run.
    const steady = await engine().run(today, today, ['7002']);
    expect(steady.outcomes[0]?.changes).toEqual({ new: 0, changed: 0, refreshed: 0 });
    expect((await attempts.attemptsOf('7002', approved.pid))[0]?.reconciliation?.at).toBe(
      judged?.reconciliation?.at,
    );
    // Reversed after its approval (re-filed at 0): priced at what the row was listed at when judged.
    approved.transaction.verifyToken = 'Invalid';
    approved.transaction.cpi = '0';
    await engine().run(today, today, ['7002']);
    expect((await attempts.attemptsOf('7002', approved.pid))[0]?.reconciliation).toMatchObject({
      verdict: 'invalidated',
      detail: { reversedCpi: '1.50' },
    });
    const report = await finance({ attempts, results }).report({ from: today, to: today }, ['7002']);
    expect(report.amounts.reversed).toBe('3.00');
  });

  it('a day of more rows than one call takes as arguments, listed a day at a time: read whole, not a stack overflow', async () => {
    await survey(7465);
    const day = nextDay(today, -2);
    // Rows that do not read: the day's 200,000 are all reported, the survey failed by them, not by the stack.
    const rows = Array.from({ length: 200_000 }, (_, i) => ({
      endpoint: 'GET /supply/getSurveyTransactions/7465',
      index: i,
      problem: 'CPI is not an amount: "n/a"',
      reference: `big-${i}`,
    }));
    const listing = {
      getSurveyTransactions: async (surveyId: string, range?: { startDate?: string; endDate?: string }) => {
        // Too large for a window: listed a day at a time.
        if (range?.startDate !== range?.endDate)
          throw new MarketplaceError({
            endpoint: `GET /supply/getSurveyTransactions/${surveyId}`,
            kind: 'malformed',
            detail: 'the answer is over 64 MB, not read',
            tooLarge: true,
          });
        return { rows: [], malformed: range?.startDate === day ? rows : [] };
      },
    } as unknown as MarketplaceClient;
    const [outcome] = (await engine({ marketplace: listing }).run(day, day, ['7465'])).outcomes;
    expect(outcome?.status).toBe('failed');
    expect(outcome?.error).toContain('200000 unreadable transaction rows');
  });

  it('a marketplace error fails that survey only, never as zero transactions, and the failed days are retried later', async () => {
    await survey(7003);
    await survey(7004);
    const here = await attempt(7003, 'Completed', { postback: 'success' });
    await attempt(7004, 'Completed', { postback: 'success' });
    const failing = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: (input, init) =>
        String(input).includes('/7003')
          ? Promise.resolve(new Response('{"apiStatus":"Failure","msg":"Internal error"}', { status: 500 }))
          : fetch(input, init),
    });
    const report = await engine({ marketplace: failing }).run(today, today, ['7003', '7004']);
    expect(report.outcomes.map((o) => [o.surveyId, o.status])).toEqual([
      ['7003', 'failed'],
      ['7004', 'reconciled'],
    ]);
    expect(report.outcomes[0]?.error).toMatch(/HTTP 500: Internal error/);
    expect((await attempts.attemptsOf('7003', here.pid))[0]?.reconciliation).toBeUndefined();
    expect(await results.surveyState('7003')).toMatchObject({
      failedDays: [today],
      lastError: expect.stringMatching(/HTTP 500/),
    });
    // Finance's report says which days' figures are not up to date, and why.
    const { reconciliationFailing } = await finance({ attempts, results }).report(
      { from: today, to: today },
      ['7003', '7004'],
    );
    const first = await results.surveyState('7003');
    expect(first?.failingSince).toBe(first?.lastErrorAt);
    // Failing again: since when it has been failing stays, the last failure moves.
    await new Promise((resolve) => setTimeout(resolve, 5));
    await engine({ marketplace: failing }).run(today, today, ['7003']);
    const again = await results.surveyState('7003');
    expect(again?.failingSince).toBe(first?.failingSince);
    expect((again?.lastErrorAt ?? '') > (first?.lastErrorAt ?? '')).toBe(true);
    expect(reconciliationFailing).toEqual([
      {
        surveyId: '7003',
        days: [today],
        error: expect.stringMatching(/HTTP 500/),
        failingSince: first?.failingSince,
        lastFailedAt: expect.any(String),
      },
    ]);

    // A later run for another window still picks up the failed day.
    const tomorrow = nextDay(today);
    const retried = await engine().run(tomorrow, tomorrow, ['7003']);
    expect(retried.outcomes[0]).toMatchObject({ status: 'reconciled', days: [today, tomorrow] });
    expect((await attempts.attemptsOf('7003', here.pid))[0]?.reconciliation?.verdict).toBe('matched');
    expect((await results.surveyState('7003'))?.failedDays).toEqual([]);
  });

  it("checks a complete's price against the survey's price when its respondent clicked in, not today's", async () => {
    await survey(7021, '1.50');
    const paid = await attempt(7021, 'Completed', { postback: 'success' });
    expect((await engine().run(today, today, ['7021'])).outcomes[0]?.verdicts).toEqual({ matched: 1 });
    const clicked = paid.transaction.clickedAt.getTime();
    const reprice = async (since: number) => {
      const registration = await registry.get('7021');
      await registry.put({
        ...(registration as SurveyRegistration),
        ...pricedAt(registration, '1.75', new Date(since).toISOString()),
      });
    };
    // The price changes two hours after the click: the complete was sold at the price of then.
    await reprice(clicked + 2 * 3_600_000);
    expect((await registry.get('7021'))?.cpiHistory).toEqual([
      { cpi: '1.50', since: '' },
      { cpi: '1.75', since: new Date(clicked + 2 * 3_600_000).toISOString() },
    ]);
    const after = await engine().run(today, today, ['7021']);
    expect(after.outcomes[0]).toMatchObject({ verdicts: { matched: 1 }, changes: { changed: 0 } });
    // Had 1.75 been the price three hours before the click, 1.50 would be a mismatch.
    const registration = await registry.get('7021');
    await registry.put({
      ...(registration as SurveyRegistration),
      cpiHistory: [
        { cpi: '1.50', since: '' },
        { cpi: '1.75', since: new Date(clicked - 3 * 3_600_000).toISOString() },
      ],
    });
    const [verdict] = (await engine().run(today, today, ['7021'])).outcomes;
    expect(verdict?.verdicts).toEqual({ cpi_mismatch: 1 });
  });

  it('refuses a day still to come: nothing to reconcile, and no summary saying it was checked', async () => {
    await survey(7031);
    const future = nextDay(pacificDay(new Date()), 2);
    await expect(engine().run(today, future, ['7031'])).rejects.toThrow(
      `${future} is after today (${pacificDay(new Date())}, Pacific): it has nothing to reconcile yet`,
    );
    expect(await results.summariesOf('7031', [today, future])).toEqual([]);
  });

  it('"No data found" is zero transactions: what arrived here is then not in the marketplace', async () => {
    await survey(7005);
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7005',
        outcome: 'success',
        pid: 'lonely',
        token: 'lonely-1',
        source: 'query',
      },
      new Date(REFERENCE_MS - 3_600_000),
    );
    const report = await engine().run(today, today, ['7005']);
    expect(report.outcomes[0]).toMatchObject({
      status: 'reconciled',
      transactions: 0,
      verdicts: { complete_not_paid: 1 },
    });
  });

  it('fails a survey with an unreadable row, naming it, rather than leave its money out; reads what is only informational', async () => {
    await survey(7006);
    const good = listedComplete('g1', 'g');
    let rows: unknown[] = [good, { ...good, token: 'g2', CPI: 'n/a' }];
    const failed = await engine({ marketplace: listing(() => rows) }).run(today, today, ['7006']);
    expect(failed.outcomes[0]).toMatchObject({ status: 'failed' });
    expect(failed.outcomes[0]?.error).toMatch(
      /1 unreadable transaction rows \(row 1 .*CPI is not an amount: "n\/a"/,
    );
    expect(await results.summariesOf('7006', [today])).toEqual([]);
    expect((await results.surveyState('7006'))?.failedDays).toContain(today);

    // The row reads again; fields nothing is counted by may be unreadable; a non-complete's price is nothing;
    // a row listed twice counts once.
    rows = [
      { ...good, completeDateTime: 'Invalid date', verifiedTknDt: '2026-11-20T10:00:00Z', ip: { v: 4 } },
      { ...good, token: 'g2', CPI: 1.5 },
      { ...good, token: 'g2', CPI: 1.5 },
      { ...good, token: 'g3', status: 'Failed', CPI: null },
    ];
    const read = await engine({ marketplace: listing(() => rows) }).run(today, today, ['7006']);
    expect(read.outcomes[0]).toMatchObject({
      status: 'reconciled',
      transactions: 3,
      duplicateRows: 1,
      verdicts: { complete_not_received: 2, not_received: 1 },
    });
    const [summary] = await results.summariesOf('7006', [today]);
    expect(summary?.marketplace).toMatchObject({ transactions: 3, validCompletes: 2, owed: '3.00' });
    expect((await results.surveyState('7006'))?.failedDays).toEqual([]);
  });
});

describe('a listing cut short without saying so', () => {
  it('is listed once more before anything is judged: paid completes are not made unpaid, nor owed cut, by one short answer', async () => {
    await survey(7457);
    const rows = [1, 2, 3].map((n) => listedComplete(`tok-7457-${n}`, `pid-7457-${n}`));
    for (const n of [1, 2, 3])
      await attempts.recordHit(
        {
          channel: 'postback',
          surveyId: '7457',
          outcome: 'success',
          pid: `pid-7457-${n}`,
          token: `tok-7457-${n}`,
          source: 'query',
        },
        new Date(REFERENCE_MS - 50 * 60_000),
      );
    const listed = cutOnce(
      () => rows,
      () => rows.slice(0, 2),
    );
    await engine({ marketplace: listed.client }).run(today, today, ['7457']);
    const figures = async () => (await results.summariesOf('7457', [today]))[0];
    const full = await figures();
    expect(full?.marketplace).toMatchObject({ transactions: 3, owed: '4.50' });
    // One answer a row short (no paging field, no word of it): listed again, judged from the whole answer.
    listed.cutNext();
    const again = await engine({ marketplace: listed.client }).run(today, today, ['7457']);
    expect(listed.counted.answers).toBe(2);
    expect(again.outcomes[0]).toMatchObject({ status: 'reconciled', verdicts: { matched: 3 } });
    expect((await figures())?.marketplace).toMatchObject({ transactions: 3, owed: '4.50' });
    // Short twice in a row: taken as it is (a row withdrawn), its complete chased as unpaid.
    rows.pop();
    listed.counted.answers = 0;
    const withdrawn = await engine({ marketplace: listed.client }).run(today, today, ['7457']);
    expect(listed.counted.answers).toBe(2);
    expect(withdrawn.outcomes[0]).toMatchObject({ verdicts: { matched: 2, complete_not_paid: 1 } });
    expect((await figures())?.marketplace).toMatchObject({ transactions: 2, owed: '3.00' });
    // The day's figures now count two: the next answer of two is read once.
    listed.counted.answers = 0;
    await engine({ marketplace: listed.client }).run(today, today, ['7457']);
    expect(listed.counted.answers).toBe(1);
  });
});

describe('a listing cut short: whole days, and a day emptied for good beside one listed short', () => {
  const dayBefore = nextDay(today, -1);
  const complete = (token: string, pid: string, daysBack: number) => ({
    ...listedComplete(token, pid),
    clkDateTime: formatPacificTime(new Date(REFERENCE_MS - daysBack * 86_400_000 - 3_600_000)),
  });
  async function paidCompletes(
    surveyId: string,
    rows: ReturnType<typeof complete>[],
    daysBack: (n: number) => number,
  ) {
    for (const [i, r] of rows.entries())
      await attempts.recordHit(
        { channel: 'postback', surveyId, outcome: 'success', pid: r.PID, token: r.token, source: 'query' },
        new Date(REFERENCE_MS - daysBack(i) * 86_400_000 - 50 * 60_000),
      );
  }

  it('a multi-day answer that leaves a whole day out is listed once more, not judged as it is', async () => {
    await survey(7458);
    const early = [1, 2].map((n) => complete(`tok-7458-e${n}`, `pid-7458-e${n}`, 1));
    const late = [1, 2].map((n) => complete(`tok-7458-l${n}`, `pid-7458-l${n}`, 0));
    await paidCompletes('7458', [...early, ...late], (i) => (i < 2 ? 1 : 0));
    // A page the answer did not mention: the later day's rows left out.
    const listed = cutOnce(
      () => [...early, ...late],
      () => early,
    );
    await engine({ marketplace: listed.client }).run(dayBefore, today, ['7458']);
    listed.cutNext();
    await engine({ marketplace: listed.client }).run(dayBefore, today, ['7458']);
    expect(listed.counted.answers).toBe(2);
    const [summary] = await results.summariesOf('7458', [today]);
    expect(summary?.marketplace).toMatchObject({ transactions: 2, owed: '3.00' });
  });

  it('a day emptied for good is confirmed an hour later even when another day of its window is listed short', async () => {
    await survey(7459);
    let early = [1, 2].map((n) => complete(`tok-7459-e${n}`, `pid-7459-e${n}`, 1));
    let late = [1, 2].map((n) => complete(`tok-7459-l${n}`, `pid-7459-l${n}`, 0));
    const client = listing((asked) => {
      const [from, to] = [asked.get('startDate') ?? '', asked.get('endDate') ?? ''];
      return from !== to ? [...early, ...late] : from === dayBefore ? early : from === today ? late : [];
    });
    // A survey too large to list several days at once: a day at a time.
    const perDay = dayAtATime(client);
    let clock = Date.now();
    const run = () =>
      engine({ marketplace: perDay, emptyConfirmMs: 45 * 60_000, now: () => new Date(clock) }).run(
        dayBefore,
        today,
        ['7459'],
      );
    expect((await run()).outcomes[0]?.status).toBe('reconciled');
    // The marketplace withdraws every row of the day before and one of the day.
    early = [];
    late = late.slice(0, 1);
    const statuses: (string | undefined)[] = [];
    for (let i = 0; i < 3; i++) {
      clock += 60 * 60_000;
      statuses.push((await run()).outcomes[0]?.status);
    }
    // Held once (the empty day's first answer), then confirmed: not held again and again by the re-listing.
    expect(statuses).toEqual(['failed', 'reconciled', 'reconciled']);
  });
});

describe('a row listed without a click or start time', () => {
  /** A valid complete listed without a click or start time, finished at the reference time. */
  const undatedComplete = (token: string) => {
    const { clkDateTime: _, ...complete } = listedComplete(token, token);
    return { ...complete, completeDateTime: formatPacificTime(new Date(REFERENCE_MS)) };
  };

  /** A listing that filters by creation day, as the marketplace does, and says "No data found" for none. */
  const byCreation = (rows: { created: string; row: Record<string, unknown> }[], calls: string[]) =>
    createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async (input) => {
        const url = new URL(String(input));
        const [from, to] = [url.searchParams.get('startDate') ?? '', url.searchParams.get('endDate') ?? ''];
        calls.push(`${from}..${to}`);
        const result = rows.filter((r) => r.created >= from && r.created <= to).map((r) => r.row);
        return result.length > 0
          ? new Response(JSON.stringify({ apiStatus: 'success', result }), { status: 200 })
          : new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'No data found for survey: 7011' }), {
              status: 400,
            });
      },
    });

  it('is owed on the day a listing of that day alone shows it, not on the day its respondent finished', async () => {
    await survey(7011);
    const created = nextDay(today, -2);
    // Clicked in two days before it finished; the marketplace left out the click and start times.
    const row = undatedComplete('c1');
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7011', outcome: 'success', pid: 'c1', token: 'c1', source: 'query' },
      new Date(REFERENCE_MS),
    );
    const calls: string[] = [];
    const run = await engine({ marketplace: byCreation([{ created, row }], calls) }).run(created, created, [
      '7011',
    ]);
    expect(run.outcomes[0]).toMatchObject({
      status: 'reconciled',
      transactions: 1,
      undated: 0,
      dayListings: 2,
      verdicts: { matched: 1 },
    });
    // The window's listing (the day either side too), then its days one by one until the row is found.
    expect(calls).toEqual([
      `${nextDay(created, -1)}..${nextDay(created, 1)}`,
      `${nextDay(created, -1)}..${nextDay(created, -1)}`,
      `${created}..${created}`,
    ]);
    const [summary] = await results.summariesOf('7011', [created]);
    expect(summary?.marketplace).toMatchObject({ transactions: 1, validCompletes: 1, owed: '1.50' });
    expect((await attempts.attemptsOf('7011', 'c1'))[0]?.reconciliation).toMatchObject({
      verdict: 'matched',
      day: created,
    });
  });

  it('a row without a click whose start is just after a midnight is owed on the day it was created, the day before', async () => {
    await survey(7393);
    const created = nextDay(today, -2);
    const midnight = pacificDayRange(nextDay(created, 1)).start.getTime();
    // Clicked in 20 s before midnight; started 5 s after it; the marketplace left out the click time.
    const { clkDateTime: _, ...row } = listedComplete('m1', 'm1');
    const listed = {
      ...row,
      st_date_time: formatPacificTime(new Date(midnight + 5_000)),
      completeDateTime: formatPacificTime(new Date(midnight + 15 * 60_000)),
    };
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7393', outcome: 'success', pid: 'm1', token: 'm1', source: 'query' },
      new Date(midnight + 15 * 60_000),
    );
    const calls: string[] = [];
    const run = await engine({ marketplace: byCreation([{ created, row: listed }], calls) }).run(
      created,
      nextDay(created, 1),
      ['7393'],
    );
    expect(run.outcomes[0]).toMatchObject({
      status: 'reconciled',
      transactions: 1,
      verdicts: { matched: 1 },
    });
    const [clickDay, startDay] = await results.summariesOf('7393', [created, nextDay(created, 1)]);
    expect(clickDay?.marketplace).toMatchObject({ transactions: 1, validCompletes: 1, owed: '1.50' });
    expect(startDay?.marketplace).toMatchObject({ transactions: 0, owed: '0.00' });
    // A start well inside its day tells the day by itself: nothing is listed a day alone for it.
    const noon = {
      ...listed,
      token: 'n1',
      PID: 'n1',
      st_date_time: formatPacificTime(new Date(midnight + 12 * 3_600_000)),
    };
    const quiet: string[] = [];
    await engine({ marketplace: byCreation([{ created: nextDay(created, 1), row: noon }], quiet) }).run(
      nextDay(created, 1),
      nextDay(created, 1),
      ['7393'],
    );
    expect(quiet).toHaveLength(1);
  });

  it('such a row turning unreadable fails its survey, the figures of the day it was owed on kept', async () => {
    await survey(7394);
    const created = nextDay(today, -2);
    const midnight = pacificDayRange(nextDay(created, 1)).start.getTime();
    const { clkDateTime: _, ...complete } = listedComplete('u1', 'u1');
    let cpi: unknown = '1.50';
    const row = () => ({
      ...complete,
      CPI: cpi,
      st_date_time: formatPacificTime(new Date(midnight + 5_000)),
      completeDateTime: formatPacificTime(new Date(midnight + 15 * 60_000)),
    });
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7394', outcome: 'success', pid: 'u1', token: 'u1', source: 'query' },
      new Date(midnight + 15 * 60_000),
    );
    const marketplace = createMarketplaceClient({
      baseUrl: 'http://marketplace.invalid',
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async (input) => {
        const url = new URL(String(input));
        const from = url.searchParams.get('startDate') ?? '';
        const listed = from <= created && created <= (url.searchParams.get('endDate') ?? '');
        return listed
          ? new Response(JSON.stringify({ apiStatus: 'success', result: [row()] }), { status: 200 })
          : new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'No data found for survey: 7394' }), {
              status: 400,
            });
      },
    });
    const run = () => engine({ marketplace }).run(created, nextDay(created, 1), ['7394']);
    expect((await run()).outcomes[0]).toMatchObject({ status: 'reconciled' });
    expect((await results.summariesOf('7394', [created]))[0]?.marketplace).toMatchObject({ owed: '1.50' });
    // Its price no longer reads: which day to hold it on, its start does not tell (the day before, as placed, or
    // its own). Not held on the start's day while the day it was owed on loses it: the survey fails, naming it.
    cpi = 'n/a';
    const failed = (await run()).outcomes[0];
    expect(failed).toMatchObject({ status: 'failed', error: expect.stringMatching(/u1/) });
    expect((await results.summariesOf('7394', [created]))[0]?.marketplace).toMatchObject({ owed: '1.50' });
  });

  it('one token created on two days, neither row with a time: each copy is placed on its own day, the first counts it', async () => {
    await survey(7016);
    const [first, second] = [nextDay(today, -4), nextDay(today, -1)];
    const finished = (day: string) =>
      formatPacificTime(new Date(pacificDayRange(day).start.getTime() + 11 * 3_600_000));
    const base = { token: 'pl', PID: 'pl', trackId: 'pl', ip: '198.51.100.1', termReason: '' };
    const rows = [
      {
        created: first,
        row: {
          ...base,
          status: 'Completed',
          CPI: '1.50',
          verifyToken: 'Valid',
          completeDateTime: finished(first),
        },
      },
      {
        created: second,
        row: {
          ...base,
          status: 'Failed',
          CPI: 0,
          verifyToken: 'Pending',
          completeDateTime: finished(second),
        },
      },
    ];
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7016', outcome: 'success', pid: 'pl', token: 'pl', source: 'query' },
      new Date(pacificDayRange(first).start.getTime() + 11 * 3_600_000),
    );
    const judged = async () => {
      const [summary] = await results.summariesOf('7016', [first]);
      return [
        summary?.marketplace.owed,
        summary?.verdicts,
        (await attempts.attemptsOf('7016', 'pl'))[0]?.reconciliation?.verdict,
      ];
    };
    const marketplace = byCreation(rows, []);
    // The first day alone, both days together, then the second alone: the same every time.
    for (const [from, to] of [
      [first, first],
      [first, second],
      [second, second],
      [first, second],
    ] as const) {
      await engine({ marketplace }).run(from, to, ['7016']);
      expect(await judged()).toEqual(['1.50', { matched: 1 }, 'matched']);
    }
    expect((await results.summariesOf('7016', [second]))[0]?.marketplace.transactions).toBe(0);
  });

  it('a complete nothing arrived for, its row re-filed onto the quiet day before: judged there in the same run, owed on one day', async () => {
    await survey(7463);
    const [before, day] = [nextDay(today, -3), nextDay(today, -2)];
    const clickedOn = (d: string) =>
      formatPacificTime(new Date(pacificDayRange(d).start.getTime() + 10 * 3_600_000));
    const row = (d: string) => ({ ...listedComplete('nr63', 'nr63'), clkDateTime: clickedOn(d) });
    const rows = [{ created: day, row: row(day) }];
    const marketplace = byCreation(rows, []);
    await engine({ marketplace }).run(day, day, ['7463']);
    const owedOn = async (d: string) => (await results.summariesOf('7463', [d]))[0]?.marketplace.owed ?? '0';
    expect(await owedOn(day)).toBe('1.50');
    // Re-filed onto the day before, which has no rows, attempts or verdicts of its own: the day's run sees it
    // there (its listing reads the days beside it) and judges that day too.
    rows.splice(0, rows.length, { created: before, row: row(before) });
    await engine({ marketplace }).run(day, day, ['7463']);
    expect([await owedOn(before), await owedOn(day)]).toEqual(['1.50', '0.00']);
    expect((await attempts.attemptsOf('7463', 'nr63'))[0]?.reconciliation).toMatchObject({
      day: before,
      verdict: 'complete_not_received',
    });
  });

  it('a complete re-filed onto a day after a price rise, at the price it earned: no underpayment claimed', async () => {
    const [day, next] = [nextDay(today, -3), nextDay(today, -2)];
    const at = (d: string, hours: number) => new Date(pacificDayRange(d).start.getTime() + hours * 3_600_000);
    marketplace.state.addSurvey({ surveyId: 7464, cpi: '2.00' });
    await registry.put({
      surveyId: '7464',
      state: 'active',
      verified: true,
      failures: 0,
      expectedCpi: '2.00',
      // 1.50 until the next day began, 2.00 since.
      cpiHistory: [
        { cpi: '1.50', since: '' },
        { cpi: '2.00', since: at(next, 0).toISOString() },
      ],
      updatedAt: new Date().toISOString(),
    });
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7464',
        outcome: 'success',
        pid: 'pr64',
        token: 'pr64',
        source: 'query',
      },
      at(day, 10.1),
    );
    const row = (d: string) => ({
      ...listedComplete('pr64', 'pr64'),
      clkDateTime: formatPacificTime(at(d, 10)),
    });
    const rows = [{ created: day, row: row(day) }];
    const marketplace64 = byCreation(rows, []);
    await engine({ marketplace: marketplace64 }).run(day, day, ['7464']);
    expect((await attempts.attemptsOf('7464', 'pr64'))[0]?.reconciliation).toMatchObject({
      verdict: 'matched',
    });
    // Re-filed onto the next day, after the rise, still at 1.50: what it earned when its respondent clicked.
    rows.splice(0, rows.length, { created: next, row: row(next) });
    await engine({ marketplace: marketplace64 }).run(day, next, ['7464']);
    expect((await attempts.attemptsOf('7464', 'pr64'))[0]?.reconciliation).toMatchObject({
      day: next,
      verdict: 'matched',
    });
    // A complete clicked after the rise that is paid the old price is still underpaid.
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7464',
        outcome: 'success',
        pid: 'pr65',
        token: 'pr65',
        source: 'query',
      },
      at(next, 11.1),
    );
    rows.push({
      created: next,
      row: { ...listedComplete('pr65', 'pr65'), clkDateTime: formatPacificTime(at(next, 11)) },
    });
    await engine({ marketplace: marketplace64 }).run(next, next, ['7464']);
    expect((await attempts.attemptsOf('7464', 'pr65'))[0]?.reconciliation).toMatchObject({
      verdict: 'cpi_mismatch',
    });
  });

  it("a row the earlier day still lists with the later day's time is the later day's, not a copy", async () => {
    await survey(7017);
    const [earlier, later] = [nextDay(today, -4), nextDay(today, -2)];
    const clickedOn = (day: string) =>
      formatPacificTime(new Date(pacificDayRange(day).start.getTime() + 10 * 3_600_000));
    const row = (day: string) => ({ ...listedComplete('rf', 'rf'), clkDateTime: clickedOn(day) });
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7017', outcome: 'success', pid: 'rf', token: 'rf', source: 'query' },
      new Date(pacificDayRange(later).start.getTime() + 11 * 3_600_000),
    );
    const rows = [{ created: earlier, row: row(earlier) }];
    const marketplace = byCreation(rows, []);
    await engine({ marketplace }).run(earlier, earlier, ['7017']);
    expect((await attempts.attemptsOf('7017', 'rf'))[0]?.reconciliation).toMatchObject({ day: earlier });
    // Its time re-filed onto the later day: that day's listing shows it, and so does the earlier day's still.
    rows.splice(0, rows.length, { created: earlier, row: row(later) }, { created: later, row: row(later) });
    const run = await engine({ marketplace }).run(later, later, ['7017']);
    expect(run.outcomes[0]).toMatchObject({ status: 'reconciled', verdicts: { matched: 1 } });
    expect((await attempts.attemptsOf('7017', 'rf'))[0]?.reconciliation).toMatchObject({ day: later });
    expect((await results.summariesOf('7017', [later]))[0]?.marketplace.owed).toBe('1.50');
  });

  it('a window whose listing is too large to read is listed a day at a time', async () => {
    await survey(7014);
    const day = nextDay(today, -1);
    // Without a click or start time too: the day it is listed under places it (no second round of day listings).
    const row = undatedComplete('z1');
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7014', outcome: 'success', pid: 'z1', token: 'z1', source: 'query' },
      new Date(REFERENCE_MS - 24.9 * 3_600_000),
    );
    const calls: string[] = [];
    const marketplace = byCreation([{ created: day, row }], calls);
    const tooLargeForMoreThanADay = dayAtATime(marketplace);
    let wide = 0;
    const counted = {
      ...tooLargeForMoreThanADay,
      getSurveyTransactions: (id: string, range?: { startDate: string; endDate: string }) => {
        if (range && range.startDate !== range.endDate) wide++;
        return tooLargeForMoreThanADay.getSurveyTransactions(id, range);
      },
    } as typeof marketplace;
    const run = await engine({ marketplace: counted }).run(day, day, ['7014']);
    expect(run.outcomes[0]).toMatchObject({
      status: 'reconciled',
      transactions: 1,
      dayListings: 3,
      verdicts: { matched: 1 },
    });
    expect(calls).toEqual([nextDay(day, -1), day, nextDay(day, 1)].map((d) => `${d}..${d}`));
    expect(wide).toBe(1);
    // Remembered for a week: the next run lists a day at a time from the start, the cap's bytes not downloaded first.
    const { listedByDayAt } = (await results.surveyState('7014')) ?? {};
    expect(listedByDayAt).toEqual(expect.any(String));
    calls.length = 0;
    const again = await engine({ marketplace: counted }).run(day, day, ['7014']);
    expect(again.outcomes[0]).toMatchObject({ status: 'reconciled', dayListings: 3 });
    expect(wide).toBe(1);
    // A week on, the whole range is tried again (a survey whose traffic fell back is one call again).
    const weekOn = new Date(Date.parse(listedByDayAt as string) + LISTED_BY_DAY_MS + 60_000);
    await engine({ marketplace: counted, now: () => weekOn }).run(day, day, ['7014']);
    expect(wide).toBe(2);
  });

  it('a listing too large to read is remembered by a run that then fails (a day listed alone refused)', async () => {
    await survey(7015);
    const day = nextDay(today, -1);
    const row = undatedComplete('y15');
    const calls: string[] = [];
    const inner = byCreation([{ created: day, row }], calls);
    let wide = 0;
    let failTomorrow = true;
    const flaky = {
      ...inner,
      getSurveyTransactions: (id: string, range?: { startDate: string; endDate: string }) => {
        if (range && range.startDate !== range.endDate) {
          wide++;
          return Promise.reject(tooLarge(id));
        }
        if (failTomorrow && range?.startDate === nextDay(day, 1)) {
          failTomorrow = false;
          return Promise.reject(
            new MarketplaceError({
              endpoint: `/getSurveyTransactions/${id}`,
              kind: 'http',
              httpStatus: 502,
              detail: 'HTTP 502',
              retriable: true,
            }),
          );
        }
        return inner.getSurveyTransactions(id, range);
      },
    } as typeof inner;
    expect((await engine({ marketplace: flaky }).run(day, day, ['7015'])).outcomes[0]?.status).toBe('failed');
    expect(await results.surveyState('7015')).toMatchObject({
      failedDays: expect.arrayContaining([day]),
      listedByDayAt: expect.any(String),
    });
    expect((await engine({ marketplace: flaky }).run(day, day, ['7015'])).outcomes[0]?.status).toBe(
      'reconciled',
    );
    expect(wide).toBe(1);
  });

  it("a run of one day counts that day's transactions and attempts, not those of the days its listing reads beside it", async () => {
    await survey(7462);
    // Two completes of the day, one of the day before and one of the day after, each with its postback here.
    const made = await Promise.all(
      [0, 0, -1, 1].map(() => attempt(7462, 'Completed', { postback: 'success' })),
    );
    for (const [index, shift] of [
      [2, -1],
      [3, 1],
    ] as const) {
      const moved = made[index];
      if (!moved) throw new Error('no attempt');
      moved.transaction.clickedAt = new Date(moved.transaction.clickedAt.getTime() + shift * 86_400_000);
      moved.transaction.completedAt = new Date(moved.transaction.clickedAt.getTime() + 10 * 60_000);
      // Its postback when it finished, on its own day (the one recorded with the others removed first).
      await attempts.recordHit(
        {
          channel: 'postback',
          surveyId: '7462',
          outcome: 'success',
          pid: moved.pid,
          token: moved.token,
          source: 'query',
        },
        moved.transaction.completedAt,
      );
    }
    const run = await engine().run(today, today, ['7462']);
    expect(run.outcomes[0]).toMatchObject({ status: 'reconciled', transactions: 2, attempts: 2 });
  });

  it('a window whose listing times out is listed a day at a time, and remembered only once every day answered', async () => {
    await survey(7460);
    await survey(7461);
    const day = nextDay(today, -1);
    const timedOut = (id: string) =>
      new MarketplaceError({
        endpoint: `/getSurveyTransactions/${id}`,
        kind: 'timeout',
        detail: 'no answer within 10000 ms',
        retriable: true,
      });
    const calls: string[] = [];
    const inner = byCreation([{ created: day, row: undatedComplete('t60') }], calls);
    let wide = 0;
    let down = false;
    // Slow to gather several days (every try of them times out), quick with one; or down altogether.
    const slow = {
      ...inner,
      getSurveyTransactions: (id: string, range?: { startDate: string; endDate: string }) => {
        if (range && range.startDate !== range.endDate) wide++;
        return down || (range && range.startDate !== range.endDate)
          ? Promise.reject(timedOut(id))
          : inner.getSurveyTransactions(id, range);
      },
    } as typeof inner;
    const run = await engine({ marketplace: slow }).run(day, day, ['7460']);
    expect(run.outcomes[0]).toMatchObject({ status: 'reconciled', transactions: 1, dayListings: 3 });
    expect((await results.surveyState('7460'))?.listedByDayAt).toEqual(expect.any(String));
    // The next run does not ask for the range again.
    await engine({ marketplace: slow }).run(day, day, ['7460']);
    expect(wide).toBe(1);
    // A marketplace down answers no day either: the survey fails, and is not listed a day at a time for a week.
    down = true;
    expect((await engine({ marketplace: slow }).run(day, day, ['7461'])).outcomes[0]?.status).toBe('failed');
    expect((await results.surveyState('7461'))?.listedByDayAt).toBeUndefined();
  });

  it('in the look-back, where no single day lists it, leaves the window reconciled (the look-back is best effort)', async () => {
    await survey(7013);
    const earlier = { created: nextDay(today, -4), row: undatedComplete('y1') };
    // A postback here the window's listing does not have: looked for on the days before.
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7013', outcome: 'success', pid: 'x1', token: 'x1', source: 'query' },
      new Date(REFERENCE_MS),
    );
    const calls: string[] = [];
    const marketplace = byCreation([earlier], calls);
    const noDayAlone = {
      ...marketplace,
      getSurveyTransactions: (id: string, range?: { startDate: string; endDate: string }) =>
        range && range.startDate === range.endDate
          ? Promise.resolve({ rows: [], malformed: [] })
          : marketplace.getSurveyTransactions(id, range),
    } as typeof marketplace;
    const run = await engine({ marketplace: noDayAlone }).run(today, today, ['7013']);
    expect(run.outcomes[0]).toMatchObject({ status: 'reconciled', lookbacks: 1 });
    expect((await attempts.attemptsOf('7013', 'x1'))[0]?.reconciliation?.verdict).toBe('complete_not_paid');
  });

  it('fails its survey for the run when no single day lists it (its day cannot be told), and is judged once one does', async () => {
    await survey(7012);
    const created = nextDay(today, -2);
    const row = undatedComplete('c2');
    let dayListsIt = false;
    const calls: string[] = [];
    const marketplace = byCreation([{ created, row }], calls);
    const flaky = {
      ...marketplace,
      getSurveyTransactions: (id: string, range?: { startDate: string; endDate: string }) =>
        range && range.startDate === range.endDate && !dayListsIt
          ? Promise.resolve({ rows: [], malformed: [] })
          : marketplace.getSurveyTransactions(id, range),
    } as typeof marketplace;
    const failed = await engine({ marketplace: flaky }).run(created, created, ['7012']);
    expect(failed.outcomes[0]).toMatchObject({ status: 'failed' });
    expect(failed.outcomes[0]?.error).toMatch(
      /without a click or start time that no day of .* lists alone \(row c2\)/,
    );
    expect(await results.summariesOf('7012', [created])).toEqual([]);
    dayListsIt = true;
    const judged = await engine({ marketplace: flaky }).run(created, created, ['7012']);
    expect(judged.outcomes[0]).toMatchObject({ status: 'reconciled', transactions: 1 });
    expect((await results.summariesOf('7012', [created]))[0]?.marketplace).toMatchObject({ owed: '1.50' });
  });
});

describe('a row that cannot be read, whose token and day still read', () => {
  it('holds back only its day and its token: the other days are reconciled, and the day is judged once it reads', async () => {
    await survey(7008);
    const previous = nextDay(today, -1);
    const clicked = (ms: number) => ({ clkDateTime: formatPacificTime(new Date(ms)) });
    const good = listedComplete('g1', 'g1');
    const rows: unknown[] = [
      { ...good, ...clicked(REFERENCE_MS - 25 * 3_600_000) },
      // Clicked in late the day before, finished after midnight: its postback is first seen today.
      { ...good, token: 'h2', PID: 'h2', CPI: 'n/a', ...clicked(REFERENCE_MS - 12.5 * 3_600_000) },
      { ...good, token: 't1', PID: 't1', ...clicked(REFERENCE_MS - 3_600_000) },
    ];
    const postback = (token: string, ms: number) =>
      attempts.recordHit(
        { channel: 'postback', surveyId: '7008', outcome: 'success', pid: token, token, source: 'query' },
        new Date(ms),
      );
    await postback('g1', REFERENCE_MS - 24.8 * 3_600_000);
    await postback('h2', REFERENCE_MS - 11.5 * 3_600_000);
    await postback('t1', REFERENCE_MS - 0.8 * 3_600_000);
    const held = await engine({ marketplace: listing(() => rows) }).run(previous, today, ['7008']);
    expect(held.outcomes[0]).toMatchObject({ status: 'failed', malformedRows: 1, verdicts: { matched: 1 } });
    expect(held.outcomes[0]?.error).toMatch(/1 unreadable transaction rows \(row 1 h2: CPI is not an amount/);
    // Today is reconciled without it; its day is not, and its postback, first seen today, is not judged there
    // as a complete the marketplace does not pay.
    expect((await results.summariesOf('7008', [previous, today])).map((s) => [s.day, s.verdicts])).toEqual([
      [today, { matched: 1 }],
    ]);
    const [late] = await results.attemptsByKey('7008', [{ pid: 'h2', token: 'h2' }]);
    expect(late?.reconciliation).toBeUndefined();
    expect(await results.surveyState('7008')).toMatchObject({
      failedDays: [previous],
      lastError: expect.stringMatching(/row 1 h2/),
    });

    // The row reads again: its day is judged with it, the state is clear.
    rows[1] = { ...(rows[1] as object), CPI: '1.50' };
    const read = await engine({ marketplace: listing(() => rows) }).run(previous, today, ['7008']);
    expect(read.outcomes[0]).toMatchObject({ status: 'reconciled', malformedRows: 0 });
    expect((await results.summariesOf('7008', [previous]))[0]?.verdicts).toEqual({ matched: 2 });
    expect(
      (await results.attemptsByKey('7008', [{ pid: 'h2', token: 'h2' }]))[0]?.reconciliation,
    ).toMatchObject({
      verdict: 'matched',
      day: previous,
    });
    expect(await results.surveyState('7008')).toMatchObject({ failedDays: [] });
  });

  it("holds back attempts of the row's pid too: one under another token is not judged a complete not paid", async () => {
    await survey(7010);
    const previous = nextDay(today, -1);
    const rows: unknown[] = [
      {
        ...listedComplete('h3', 'p3'),
        CPI: 'n/a',
        clkDateTime: formatPacificTime(new Date(REFERENCE_MS - 12.2 * 3_600_000)),
      },
    ];
    // Its postback, the next day, under another token (matched by pid once the row reads).
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7010', outcome: 'success', pid: 'p3', token: 'x3', source: 'query' },
      new Date(REFERENCE_MS - 11.5 * 3_600_000),
    );
    const held = await engine({ marketplace: listing(() => rows) }).run(previous, today, ['7010']);
    expect(held.outcomes[0]).toMatchObject({ status: 'failed', verdicts: {} });
    expect(await results.discrepancies(today, '7010')).toEqual([]);
  });

  it("holds back no attempt of the row's pid whose own token has a row: that one is judged, and counted once", async () => {
    await survey(7059);
    const previous = nextDay(today, -1);
    const rows: unknown[] = [
      // The pid's attempt of the day before, its row unreadable; its attempt of today, its row readable.
      {
        ...listedComplete('u1', 'p9'),
        CPI: '1,25',
        clkDateTime: formatPacificTime(new Date(REFERENCE_MS - 25 * 3_600_000)),
      },
      listedComplete('u2', 'p9'),
    ];
    const postback = (token: string, ms: number) =>
      attempts.recordHit(
        { channel: 'postback', surveyId: '7059', outcome: 'success', pid: 'p9', token, source: 'query' },
        new Date(ms),
      );
    await postback('u1', REFERENCE_MS - 24.8 * 3_600_000);
    await postback('u2', REFERENCE_MS - 0.8 * 3_600_000);
    const run = await engine({ marketplace: listing(() => rows) }).run(previous, today, ['7059']);
    expect(run.outcomes[0]).toMatchObject({ status: 'failed', malformedRows: 1 });
    const [summary] = await results.summariesOf('7059', [today]);
    expect(summary?.verdicts).toEqual({ matched: 1 });
    expect(summary?.here).toMatchObject({ postbackCompletes: 1 });
    expect(await results.discrepancies(today, '7059')).toEqual([]);
    const [own] = await results.attemptsByKey('7059', [{ pid: 'p9', token: 'u2' }]);
    expect(own?.reconciliation).toMatchObject({ verdict: 'matched', day: today });
    // The held one waits for its row.
    const [held] = await results.attemptsByKey('7059', [{ pid: 'p9', token: 'u1' }]);
    expect(held?.reconciliation).toBeUndefined();
  });

  it('an attempt its reading did not hold is not judged as an item nothing arrived for: not counted, its day judged again', async () => {
    await survey(7060);
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7060', outcome: 'success', pid: 'r1', token: 'r1', source: 'query' },
      new Date(REFERENCE_MS - 3_000_000),
    );
    const rows = [listedComplete('r1', 'r1')];
    // A reader behind the table (an index a moment late): the attempt is not in what the run reads.
    const hidden = (a: { token: string }) => a.token !== 'r1';
    const behind = await engine({
      marketplace: listing(() => rows),
      attempts: {
        ...attempts,
        attemptsOfSurvey: async (...args: Parameters<typeof attempts.attemptsOfSurvey>) =>
          (await attempts.attemptsOfSurvey(...args)).filter(hidden),
      },
      results: {
        ...results,
        attemptsByKey: async (...args: Parameters<typeof results.attemptsByKey>) =>
          (await results.attemptsByKey(...args)).filter(hidden),
      },
    }).run(today, today, ['7060']);
    expect(behind.outcomes[0]?.verdicts).toEqual({});
    const [summary] = await results.summariesOf('7060', [today]);
    expect(summary?.verdicts).toEqual({});
    expect(summary?.ledgerChangedAt).toBeDefined();
    expect(await results.discrepancies(today, '7060')).toEqual([]);
    // The next run reads it: matched, counted once.
    await engine({ marketplace: listing(() => rows) }).run(today, today, ['7060']);
    expect((await results.summariesOf('7060', [today]))[0]?.verdicts).toEqual({ matched: 1 });
  });

  it('fails the whole survey when the row has no readable token, pid or time, or its click time does not read', async () => {
    await survey(7009);
    const good = listedComplete('n1', 'n1');
    for (const bad of [
      { ...good, token: '', CPI: 'n/a' },
      { ...good, token: 'n2', PID: { id: 'n2' }, CPI: 'n/a' },
      { ...good, token: 'n2', CPI: 'n/a', clkDateTime: '13/45/2026, 9:00 pm' },
    ]) {
      const run = await engine({ marketplace: listing(() => [good, bad]) }).run(today, today, ['7009']);
      expect(run.outcomes[0]).toMatchObject({ status: 'failed' });
      expect(await results.summariesOf('7009', [today])).toEqual([]);
    }
    // The click is what files the row: clicked the day before (unreadably), completed today, it is not held on
    // today while the day before is judged without it.
    const previous = nextDay(today, -1);
    const late = {
      ...good,
      token: 'n3',
      PID: 'n3',
      CPI: 'n/a',
      clkDateTime: '2026-13-01',
      completeDateTime: formatPacificTime(new Date(REFERENCE_MS - 1_800_000)),
    };
    const earlier = {
      ...listedComplete('n4', 'n4'),
      clkDateTime: formatPacificTime(new Date(REFERENCE_MS - 25 * 3_600_000)),
    };
    const run = await engine({ marketplace: listing(() => [earlier, late]) }).run(previous, today, ['7009']);
    expect(run.outcomes[0]).toMatchObject({ status: 'failed' });
    expect(await results.summariesOf('7009', [previous, today])).toEqual([]);
  });
});

describe('rows a stricter reader would refuse', () => {
  it('reads a time given as a stand-in (N/A, a dash, a zero date) as none: the row is filed by its next time, the survey reconciled', async () => {
    await survey(7053);
    const rows = [
      listedComplete('z1', 'z1'),
      // A complete whose click is a stand-in: filed by its start.
      {
        ...listedComplete('z2', 'z2'),
        clkDateTime: 'N/A',
        st_date_time: listedComplete('z2', 'z2').clkDateTime,
      },
      // A termination with stand-ins for its click and start: placed on the day a listing of it alone shows it.
      {
        token: 'z3',
        PID: 'z3',
        status: 'Failed',
        CPI: 0,
        clkDateTime: '-',
        st_date_time: '00/00/0000, 12:00:00 am PST',
        completeDateTime: formatPacificTime(new Date(REFERENCE_MS - 1_800_000)),
      },
    ];
    // The marketplace files z3 under today: a listing of another day alone does not show it.
    const filing = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async (url) => {
        const query = new URL(String(url)).searchParams;
        const [from, to] = [query.get('startDate') ?? today, query.get('endDate') ?? today];
        const result = rows.filter((row) => row.token !== 'z3' || (from <= today && today <= to));
        return new Response(JSON.stringify({ apiStatus: 'success', result }), { status: 200 });
      },
    });
    const run = await engine({ marketplace: filing }).run(today, today, ['7053']);
    expect(run.outcomes[0]).toMatchObject({ status: 'reconciled', malformedRows: 0, transactions: 3 });
    const [summary] = await results.summariesOf('7053', [today]);
    expect(summary?.marketplace.owed).toBe('3.00');
    expect(summary?.verdicts).toEqual({ complete_not_received: 2, not_received: 1 });
  });

  it('a row that cannot be read with a blank PID holds back its day and token, not every attempt without a pid', async () => {
    await survey(7052);
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7052', outcome: 'success', pid: '', token: 'e1', source: 'query' },
      new Date(REFERENCE_MS - 3_000_000),
    );
    const unreadable = {
      ...listedComplete('e0', ''),
      CPI: 'n/a',
      clkDateTime: formatPacificTime(new Date(REFERENCE_MS - 30 * 3_600_000)),
    };
    const rows = [listedComplete('e1', ''), unreadable];
    const previous = nextDay(today, -1);
    const run = await engine({ marketplace: listing(() => rows) }).run(previous, today, ['7052']);
    expect(run.outcomes[0]).toMatchObject({ status: 'failed' });
    expect((await results.summariesOf('7052', [today]))[0]?.verdicts).toEqual({ matched: 1 });
    expect(await results.summariesOf('7052', [previous])).toEqual([]);
  });

  it('reads a row whose PID is blank (an entry link that carried none) by its token: counted, never paired by pid', async () => {
    await survey(7051);
    const blank = (token: string, PID: unknown) => ({ ...listedComplete(token, ''), PID });
    // Two completes without a pid, one of them received here (its postback named it by token, under a pid).
    await attempts.recordHit(
      { channel: 'postback', surveyId: '7051', outcome: 'success', pid: 'b-1', token: 'b1', source: 'query' },
      new Date(REFERENCE_MS - 3_000_000),
    );
    const rows = [blank('b1', ''), blank('b2', null), listedComplete('b3', 'b-3')];
    const run = await engine({ marketplace: listing(() => rows) }).run(today, today, ['7051']);
    expect(run.outcomes[0]).toMatchObject({ status: 'reconciled' });
    const [summary] = await results.summariesOf('7051', [today]);
    expect(summary?.marketplace.owed).toBe('4.50');
    expect(summary?.verdicts).toEqual({ matched: 1, complete_not_received: 2 });
  });

  it('reconciles ids too long for a key, statuses spelled otherwise and times in other forms, counting every complete', async () => {
    await survey(7007);
    const click = new Date(REFERENCE_MS - 3_600_000);
    const row = listedComplete('r1', 'r');
    // A respondent lengthened the panel id in the entry link; the marketplace took it, and a token of `#`.
    const longPid = `p${'#'.repeat(3_000)}`;
    const longToken = '%'.repeat(700);
    const rows = [
      { ...row, PID: longPid, token: longToken },
      { ...row, token: 'r2', status: 'completed ' },
      { ...row, token: 'r3', status: 'OverQuota', CPI: 0, st_date_time: 'soon' },
      { ...row, token: 'r4', clkDateTime: click.toISOString() },
      { ...row, token: 'r5', clkDateTime: formatPacificTime(click).replace(/ (am|pm)/, '.125 $1') },
    ];
    const run = await engine({ marketplace: listing(() => rows) }).run(today, today, ['7007']);
    expect(run.outcomes[0]).toMatchObject({ status: 'reconciled', transactions: 5 });
    const [summary] = await results.summariesOf('7007', [today]);
    expect(summary?.marketplace).toMatchObject({ transactions: 5, validCompletes: 4, owed: '6.00' });
    // The item the long ids' transaction got is found by them, and a second run changes nothing.
    const window = pacificDayRange(today);
    const found = (await attempts.attemptsByToken('7007', longToken, window.start, window.end))[0];
    expect(found?.pid).toBe(longPid);
    expect(found?.reconciliation?.verdict).toBe('complete_not_received');
    const again = await engine({ marketplace: listing(() => rows) }).run(today, today, ['7007']);
    expect(again.outcomes[0]).toMatchObject({ status: 'reconciled', transactions: 5 });
    expect((await results.summariesOf('7007', [today]))[0]?.marketplace.owed).toBe('6.00');
  });
});

describe('verdicts whatever the window', () => {
  const NOW = REFERENCE_MS;
  const ago = (days: number, minutes: number) => new Date(NOW - days * 86_400_000 - minutes * 60_000);
  const hit = (surveyId: number, pid: string, token: string, channel: string, outcome: string, at: Date) =>
    attempts.recordHit(
      {
        channel: channel as 'postback',
        surveyId: String(surveyId),
        outcome: outcome as 'success',
        pid,
        token,
        source: 'query',
      },
      at,
    );

  /** The same traffic for each survey: prompt and late finishers (1, 3 and 6 days), and genuine discrepancies. */
  async function traffic(surveyId: number) {
    await survey(surveyId);
    const sale = (label: string, status: string, clickedAt: Date, completedAt?: Date) => {
      const token = `${surveyId}-${label}`;
      marketplace.state.transactions.push({
        surveyId,
        token,
        pid: label,
        status,
        ip: '198.51.100.1',
        trackId: token,
        termReason: '',
        clickedAt,
        ...(completedAt ? { completedAt } : {}),
        verifyToken: 'Pending',
        notified: true,
      });
      return token;
    };
    for (let k = 0; k <= 6; k++) {
      const token = sale(`prompt-${k}`, 'Completed', ago(k, 60), ago(k, 40));
      await hit(surveyId, `prompt-${k}`, token, 'postback', 'success', ago(k, 40));
      await hit(surveyId, `prompt-${k}`, token, 'redirect', 'success', ago(k, 40));
      const over = sale(`over-${k}`, 'Over Quota', ago(k, 70));
      await hit(surveyId, `over-${k}`, over, 'postback', 'fail', ago(k, 65));
      await hit(surveyId, `over-${k}`, over, 'redirect', 'overquota', ago(k, 65));
    }
    // Late finishers: clicked in days ago, their postback (and redirect) arriving only now.
    for (const k of [1, 3, 6]) {
      const token = sale(`late-${k}`, 'Completed', ago(k, 60), ago(0, 20));
      await hit(surveyId, `late-${k}`, token, 'postback', 'success', ago(0, 15));
      await hit(surveyId, `late-${k}`, token, 'redirect', 'success', ago(0, 15));
    }
    const lateFail = sale('late-fail-3', 'Failed', ago(3, 60));
    await hit(surveyId, 'late-fail-3', lateFail, 'postback', 'fail', ago(0, 15));
    // Genuine discrepancies: a complete never reported here, a signed complete the marketplace does not list,
    // a success claim nothing backs, and a complete whose transaction lies beyond the look-back.
    sale('missing-2', 'Completed', ago(2, 60), ago(2, 50));
    await hit(surveyId, 'unpaid-4', `${surveyId}-unpaid-4`, 'postback', 'success', ago(4, 30));
    await hit(surveyId, 'claim-0', `${surveyId}-claim-0`, 'redirect', 'success', ago(0, 30));
    const ancient = sale('ancient-10', 'Completed', ago(10, 60), ago(0, 20));
    await hit(surveyId, 'ancient-10', ancient, 'postback', 'success', ago(0, 15));
  }

  const LABELS = [
    ...[0, 1, 2, 3, 4, 5, 6].flatMap((k) => [`prompt-${k}`, `over-${k}`]),
    'late-1',
    'late-3',
    'late-6',
    'late-fail-3',
    'missing-2',
    'unpaid-4',
    'claim-0',
    'ancient-10',
  ];

  async function verdicts(surveyId: number) {
    const out: Record<string, unknown> = {};
    for (const label of LABELS) {
      const [found] = await attempts.attemptsOf(String(surveyId), label);
      const r = found?.reconciliation;
      out[label] = r && {
        verdict: r.verdict,
        day: r.day,
        searchedFrom: r.detail.searchedFrom,
        changes: r.history.length,
      };
    }
    return out;
  }

  it('one-day, two-day and seven-day windows give the same verdicts, none of them false', async () => {
    const today = pacificDay(ago(0, 0));
    const days = pacificDays(pacificDay(ago(6, 70)), today);
    const day = (k: number, minutes = 60) => pacificDay(ago(k, minutes));
    const runs: Record<number, string[][]> = {
      // One day at a time, oldest first; then newest first; then pairs of days; then the whole week at once.
      7201: days.map((d) => [d, d]),
      7202: [...days].reverse().map((d) => [d, d]),
      7203: days.map((d, i) => (i % 2 === 0 ? [d, days[i + 1] ?? d] : [])).filter((w) => w.length > 0),
      7204: [[days[0] as string, today]],
    };
    const found: Record<string, unknown>[] = [];
    for (const [surveyId, windows] of Object.entries(runs)) {
      await traffic(Number(surveyId));
      for (const [from, to] of windows) {
        const report = await engine().run(from as string, to as string, [surveyId]);
        expect(report.outcomes[0]?.status).toBe('reconciled');
      }
      found.push(await verdicts(Number(surveyId)));
    }

    const expected: Record<string, unknown> = {};
    for (let k = 0; k <= 6; k++) {
      expected[`prompt-${k}`] = { verdict: 'matched', day: day(k), changes: 1 };
      expected[`over-${k}`] = { verdict: 'matched', day: day(k, 70), changes: 1 };
    }
    for (const k of [1, 3, 6]) expected[`late-${k}`] = { verdict: 'matched', day: day(k), changes: 1 };
    expected['late-fail-3'] = { verdict: 'matched', day: day(3), changes: 1 };
    expected['missing-2'] = { verdict: 'complete_not_received', day: day(2), changes: 1 };
    expected['unpaid-4'] = {
      verdict: 'complete_not_paid',
      day: day(4, 30),
      searchedFrom: nextDay(day(4, 30), -8),
      changes: 1,
    };
    expected['claim-0'] = {
      verdict: 'unverified_claim',
      day: day(0, 30),
      searchedFrom: nextDay(day(0, 30), -8),
      changes: 1,
    };
    // Clicked in ten days ago: beyond the look-back of today's attempt, and the verdict says how far it looked.
    expected['ancient-10'] = {
      verdict: 'complete_not_paid',
      day: day(0, 15),
      searchedFrom: nextDay(day(0, 15), -8),
      changes: 1,
    };
    for (const result of found) expect(result).toEqual(expected);

    // The day summaries agree too, whichever windows wrote them.
    const summaries = async (surveyId: string) =>
      Promise.all(
        days.map(async (d) => {
          const s = (await results.daySummaries(d)).find((x) => x.surveyId === surveyId);
          return s && { here: s.here, marketplace: s.marketplace, verdicts: s.verdicts };
        }),
      );
    const reference = await summaries('7201');
    for (const surveyId of ['7202', '7203', '7204']) expect(await summaries(surveyId)).toEqual(reference);

    // A narrow ad-hoc run after the wide one changes nothing: not today alone, not a late finisher's day alone.
    for (const d of [today, day(3), day(6)]) {
      const narrow = await engine().run(d, d, ['7204']);
      expect(narrow.outcomes[0]?.changes).toEqual({ new: 0, changed: 0, refreshed: 0 });
    }
    expect(await verdicts(7204)).toEqual(expected);

    // Finance sees how far back a missing transaction was looked for.
    const report = await finance({ attempts, results }).report({ from: days[0] as string, to: today }, [
      '7201',
    ]);
    const unpaid = report.discrepancies.find((d) => d.pid === 'unpaid-4');
    expect(unpaid).toMatchObject({
      kind: 'complete_not_paid',
      money: true,
      searchedFrom: nextDay(day(4, 30), -8),
      // What it was worth: the survey's price when it arrived here, for finance to add up.
      expectedCpi: '1.50',
    });
    expect(discrepanciesCsv(report.discrepancies).split('\r\n')[0]).toMatch(
      /,since,searched_from,expected_cpi$/,
    );
    expect(reportHtml(report)).toContain(`(none since ${nextDay(day(4, 30), -8)})`);
  });

  it('does not look back again, while its day is today, for an attempt an earlier run searched for in vain, until something new arrives', async () => {
    await survey(7206);
    const today = pacificDay(ago(0, 0));
    // The clock an hour past the reference time, on the same Pacific day as the attempt: the day is today.
    const clock = (ms: number) => vi.useFakeTimers({ toFake: ['Date'], now: NOW + ms });
    clock(3_600_000);
    try {
      // A success claim no transaction backs (a forged or much older one): the first run looks back for it.
      await hit(7206, 'claim', '7206-claim', 'redirect', 'success', ago(0, 30));
      const run = () => engine({ lookbackDays: 7 }).run(today, today, ['7206']);
      expect((await run()).outcomes[0]).toMatchObject({ lookbacks: 1, verdicts: { unverified_claim: 1 } });
      // Every later run of its day finds its verdict says how far it was searched: no call, the same verdict.
      clock(2 * 3_600_000);
      const again = await run();
      expect(again.outcomes[0]).toMatchObject({
        lookbacks: 0,
        verdicts: { unverified_claim: 1 },
        changes: { new: 0, changed: 0, refreshed: 0 },
      });
      // A hit with something new on it (its postback, after that verdict) is looked for again.
      clock(3 * 3_600_000);
      await hit(7206, 'claim', '7206-claim', 'postback', 'success', new Date());
      clock(3 * 3_600_000 + 60_000);
      expect((await run()).outcomes[0]).toMatchObject({ lookbacks: 1, verdicts: { complete_not_paid: 1 } });
      // A run that would search further back than the verdict says searches.
      expect((await engine({ lookbackDays: 9 }).run(today, today, ['7206'])).outcomes[0]).toMatchObject({
        lookbacks: 1,
      });
      // Its day past, every read of it (daily when due, or changed, or flagged) searches again, however often: a
      // row the marketplace lists late is found.
      clock(26 * 3_600_000);
      expect((await run()).outcomes[0]).toMatchObject({ lookbacks: 1 });
      expect((await run()).outcomes[0]).toMatchObject({ lookbacks: 1 });
    } finally {
      vi.useRealTimers();
    }
  });

  it('finds a late finisher by a point read, and looks back once per survey window before judging', async () => {
    await traffic(7205);
    const today = pacificDay(ago(0, 0));
    const lateDay = pacificDay(ago(3, 60));
    const first = await engine({ lookbackDays: 7 }).run(today, today, ['7205']);
    // late-3, late-6 and late-fail-3 were clicked in before the window: left to their days' runs.
    expect(first.outcomes[0]).toMatchObject({ lookbacks: 1, earlier: 3 });
    const own = await engine().run(lateDay, lateDay, ['7205']);
    expect(own.outcomes[0]).toMatchObject({ readByKey: 2, lookbacks: 0, verdicts: { matched: 4 } });
    // Once judged, an attempt belongs to its transaction's day: today's run no longer looks back for it.
    const again = await engine({ lookbackDays: 7 }).run(today, today, ['7205']);
    expect(again.outcomes[0]).toMatchObject({ lookbacks: 1, earlier: 1 });
    // Without a look-back, today's run cannot see the late finisher's transaction, and says how far it looked.
    const blind = await engine({ lookbackDays: 0 }).run(today, today, ['7205']);
    expect(blind.outcomes[0]).toMatchObject({ lookbacks: 0, earlier: 0 });
    const [late6] = await attempts.attemptsOf('7205', 'late-6');
    expect(late6?.reconciliation).toMatchObject({
      verdict: 'complete_not_paid',
      detail: { searchedFrom: nextDay(today, -1) },
    });
  });
});

describe('matched verdicts implied (the matchedVerdicts setting)', () => {
  /** The same traffic at two surveys, one reconciled with every verdict kept, the other with agreements implied. */
  async function twins(kept: number, implied: number) {
    const sides = [
      { surveyId: kept, engine: () => engine() },
      { surveyId: implied, engine: () => engine({ impliedMatches: true }) },
    ];
    const made = [];
    for (const { surveyId } of sides) {
      await survey(surveyId, '2.00');
      made.push({
        failed: await attempt(surveyId, 'Failed', { postback: 'fail', redirect: 'fail' }),
        overQuota: await attempt(surveyId, 'Over Quota', { redirect: 'overquota' }),
        complete: await attempt(surveyId, 'Completed', { postback: 'success', redirect: 'success' }),
        // Clicked the day before it was first seen here: the click day is on the verdict only.
        overnight: await attempt(surveyId, 'Failed', { postback: 'fail' }),
        unreceived: await attempt(surveyId, 'Completed', { redirect: 'success' }),
      });
    }
    for (const { overnight } of made)
      overnight.transaction.clickedAt = new Date(pacificDayRange(today).start.getTime() - 10 * 60_000);
    for (const { complete, unreceived } of made) {
      complete.transaction.cpi = '2.00';
      unreceived.transaction.cpi = '2.00';
    }
    const [keptSide, impliedSide] = made as [(typeof made)[0], (typeof made)[0]];
    const run = async (from: string, to: string) => {
      const outcomes = [];
      for (const side of sides)
        outcomes.push((await side.engine().run(from, to, [String(side.surveyId)])).outcomes[0]);
      return outcomes;
    };
    /** Both surveys' figures of the days, as finance shows them, and whether they are the same. */
    const figures = async (days: string[]) => {
      const of = async (surveyId: number) =>
        (await results.summariesOf(String(surveyId), days)).map(
          ({
            surveyId: _id,
            checkedAt: _c,
            ledgerChangedAt: _l,
            reconciledAt: _at,
            runId: _r,
            transactionsDigest: _d,
            ...rest
          }) => rest,
        );
      return { kept: await of(kept), implied: await of(implied) };
    };
    const verdictOf = async (surveyId: number, pid: string) =>
      (await attempts.attemptsOf(String(surveyId), pid))[0]?.reconciliation;
    return { keptSide, impliedSide, run, figures, verdictOf };
  }

  it('writes no verdict on a non-complete that tells its agreement by itself, and every other one; the figures the same', async () => {
    const { keptSide, impliedSide, run, figures, verdictOf } = await twins(7301, 7302);
    const days = [nextDay(today, -1), today];
    const [keptRun, impliedRun] = await run(days[0] as string, today);
    expect(keptRun).toMatchObject({
      verdicts: { matched: 4, complete_not_received: 1 },
      changes: { new: 5 },
    });
    // The failed and the over-quota attempt: agreements the attempt tells again by itself.
    expect(impliedRun).toMatchObject({
      verdicts: { matched: 4, complete_not_received: 1 },
      changes: { new: 3 },
    });
    expect(await verdictOf(7302, impliedSide.failed.pid)).toBeUndefined();
    expect(await verdictOf(7302, impliedSide.overQuota.pid)).toBeUndefined();
    // A complete (what it was listed at is what a reversal takes), a click on another day, a discrepancy: written.
    expect(await verdictOf(7302, impliedSide.complete.pid)).toMatchObject({ verdict: 'matched' });
    expect(await verdictOf(7302, impliedSide.overnight.pid)).toMatchObject({
      verdict: 'matched',
      day: days[0],
    });
    expect(await verdictOf(7302, impliedSide.unreceived.pid)).toMatchObject({
      verdict: 'complete_not_received',
    });
    const first = await figures(days);
    expect(first.implied).toEqual(first.kept);
    expect(first.implied).toHaveLength(2);
    // Nothing to write the run after.
    const [, steady] = await run(days[0] as string, today);
    expect(steady?.changes).toEqual({ new: 0, changed: 0, refreshed: 0 });
    // The marketplace re-files the failed row under the day before, and a run reads today alone: the day it went
    // to is flagged (it counted nothing of it), and the next run over it counts it there, as with the verdict kept.
    for (const { failed } of [keptSide, impliedSide])
      failed.transaction.clickedAt = new Date(pacificDayRange(today).start.getTime() - 20 * 60_000);
    await run(today, today);
    expect((await results.summariesOf('7302', [days[0] as string]))[0]?.ledgerChangedAt).toBeDefined();
    await run(days[0] as string, days[0] as string);
    const moved = await figures(days);
    expect(moved.implied).toEqual(moved.kept);
    expect(moved.implied.find((d) => d.day === days[0])?.here.attempts).toBe(2);
    // A success postback after all for the complete not received: the discrepancy it carried is replaced.
    await attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7302',
        outcome: 'success',
        pid: impliedSide.unreceived.pid,
        token: impliedSide.unreceived.token,
        source: 'query',
      },
      new Date(REFERENCE_MS - 10 * 60_000),
    );
    await run(days[0] as string, today);
    expect(await verdictOf(7302, impliedSide.unreceived.pid)).toMatchObject({ verdict: 'matched' });
    expect(await results.discrepancies(today, '7302')).toEqual([]);
  });
});

describe('forged success redirects', () => {
  it('leave every money figure and money discrepancy count unchanged, and show apart as unverified claims', async () => {
    await survey(7101, '1.75');
    await attempt(7101, 'Completed', { postback: 'success', redirect: 'success' });
    await attempt(7101, 'Completed', { redirect: 'success' });
    const reviewed = await attempt(7101, 'Completed', { postback: 'success' });
    reviewed.transaction.verifyToken = 'Valid';
    const invalid = await attempt(7101, 'Completed', { postback: 'success' });
    invalid.transaction.verifyToken = 'Invalid';
    // A respondent who typed the success URL after failing: the fail postback and the marketplace contradict it.
    const typed = await attempt(7101, 'Failed', { postback: 'fail', redirect: 'success' });
    const queries = finance({ attempts, results });
    // The forged hits below go through the real handler, so they land on the real day, after the fixtures' day.
    const realToday = pacificDay(new Date());
    const period = { from: today, to: realToday };
    const moneyOf = async () => {
      const report = await queries.report(period, ['7101']);
      const { claims: _claims, ...totals } = report.totals;
      return {
        report,
        money: {
          totals,
          moneyDiscrepancies: report.discrepancies.filter((d) => d.money),
          discrepanciesCsv: discrepanciesCsv(report.discrepancies),
          summaryMoney: summaryCsv(report.days)
            .split('\r\n')
            .map((line) => line.split(',').slice(0, 18).join(',')),
        },
      };
    };
    await engine().run(today, realToday, ['7101']);
    const before = await moneyOf();
    expect(before.money.totals).toMatchObject({ owed: '1.75', pending: '3.50', moneyDiscrepancies: 2 });
    expect(before.report.claims.map((c) => [c.token, c.kind, c.money])).toEqual([
      [typed.token, 'contradicted_claim', false],
    ]);

    // Twenty requests reusing the static success redirect URL (its signature covers neither pid nor token)
    // with made-up ids: each is a properly signed redirect hit, recorded as a redirect-only complete.
    for (let i = 1; i <= 20; i++) {
      const url = filledUrl(TEST_KEY_RING, 'redirect', '7101', 'success', {
        pid: `forger${i}`,
        token: 'static-token',
      });
      expect((await invoke(redirect, apiEvent('GET', url))).statusCode).toBeLessThan(400);
    }
    expect((await attempts.attemptsOf('7101', 'forger20'))[0]?.complete).toBe('redirect-only');
    const run = await engine().run(today, realToday, ['7101']);
    expect(run.outcomes[0]?.verdicts).toMatchObject({ unverified_claim: 20 });
    expect(
      Object.entries(run.outcomes[0]?.verdicts ?? {}).filter(([kind]) => MONEY_KINDS.has(kind as never)),
    ).toEqual(Object.entries({ complete_not_received: 1, invalidated: 1 }));

    const after = await moneyOf();
    expect(after.money).toEqual(before.money);
    expect(after.report.totals.claims).toEqual({ unverified_claim: 20, contradicted_claim: 1 });
    expect(after.report.claims.filter((c) => c.kind === 'unverified_claim')).toHaveLength(20);
    expect(after.report.claims.every((c) => !c.money)).toBe(true);
    expect(reportHtml(after.report)).toMatch(/id="claim-count">Unverified success claims<b>21<\/b>/);
    expect(reportHtml(after.report)).toMatch(/id="money-discrepancy-count">Money discrepancies<b>2<\/b>/);
    // The default discrepancy list is not flooded; the claims are there when asked for by kind.
    const page = await queries.discrepancyPage(period, { surveyId: '7101', limit: 100 });
    expect(page.items.map((d) => d.kind).sort()).toEqual(['complete_not_received', 'invalidated']);
    const claims = await queries.discrepancyPage(period, { kind: 'unverified_claim', limit: 100 });
    expect(claims.items.filter((d) => d.surveyId === '7101')).toHaveLength(20);
  });
});

describe('the scheduled run', () => {
  it('stops at its deadline, records its cursor, and the next invocation resumes it; a held run is left alone', async () => {
    const past = new Date(0);
    const cut = await engine().scheduled(2, { deadline: past });
    expect(cut?.complete).toBe(false);
    expect(cut?.outcomes.every((o) => o.status === 'deferred')).toBe(true);
    const state = await results.runState(SCHEDULED_RUN);
    const realToday = pacificDay(new Date());
    expect(state).toMatchObject({ cursor: 0, days: [nextDay(realToday, -1), realToday] });
    expect(state?.finishedAt).toBeUndefined();

    // Another invocation holds the run: this one does nothing.
    const runId = state?.runId as string;
    expect(await results.acquireRun(SCHEDULED_RUN, runId, new Date(), new Date(Date.now() + 60_000))).toBe(
      true,
    );
    expect(await engine().scheduled(2, { deadline: new Date(Date.now() + 60_000) })).toBeUndefined();
    await results.putRunState(SCHEDULED_RUN, {
      ...(state as NonNullable<typeof state>),
      leaseUntil: new Date(0).toISOString(),
    });

    const resumed = await engine().scheduled(2, { deadline: new Date(Date.now() + 60_000) });
    expect(resumed).toMatchObject({ runId, complete: true });
    expect(resumed?.outcomes.length).toBe(state?.surveys.length);
    expect((await results.runState(SCHEDULED_RUN))?.finishedAt).toBeDefined();
  });

  it('a run of an old period reconciles the surveys live then, however long ago they ended', async () => {
    const table = await freshTable();
    const ownRegistry = createSurveyRegistry(
      createDocumentClient({ endpoint: table.endpoint }),
      table.tableName,
    );
    const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
    const base = { verified: true, failures: 0, updatedAt: daysAgo(120) };
    await ownRegistry.put({ ...base, surveyId: '7207', state: 'active', closedAt: daysAgo(120) });
    await ownRegistry.put({ ...base, surveyId: '7208', state: 'active', closedAt: daysAgo(300) });
    // Another stack's survey whose redirects `remove` deleted here: kept from the sync, never reconciled here.
    await ownRegistry.put({
      ...base,
      surveyId: '7209',
      state: 'removed',
      removedAt: daysAgo(126),
      neverApplied: true,
    });
    marketplace.state.addSurvey({ surveyId: 7207 });
    const realToday = pacificDay(new Date());
    const report = await engine({ registry: ownRegistry }).run(
      nextDay(realToday, -130),
      nextDay(realToday, -125),
    );
    // Closed 120 days ago: live during the period, reconciled; closed 300 days ago: past its review horizon.
    expect(report.outcomes.map((o) => [o.surveyId, o.status])).toEqual([['7207', 'reconciled']]);
  });

  it('passes over a survey invocations died on twice, and the next run takes it last', async () => {
    for (const id of [7301, 7302, 7303]) await survey(id);
    const realToday = pacificDay(new Date());
    const days = [nextDay(realToday, -1), realToday];
    const minuteAgo = () => new Date(Date.now() - 60_000).toISOString();
    // An invocation that died (out of memory) holding the run at 7302: its lease ran out, never released.
    await results.putRunState(SCHEDULED_RUN, {
      runId: 'died',
      days,
      surveys: ['7301', '7302', '7303'],
      cursor: 1,
      startedAt: new Date().toISOString(),
      leaseUntil: minuteAgo(),
      failedSurveys: [],
    });
    // The next invocation counts the death before any work; this one stops cleanly at once (its deadline passed).
    await engine().scheduled(2, { deadline: new Date(0) });
    expect(await results.runState(SCHEDULED_RUN)).toMatchObject({
      cursor: 1,
      stall: { cursor: 1, times: 1 },
    });
    // A clean stop released the run: the invocation after it is no death.
    await engine().scheduled(2, { deadline: new Date(0) });
    expect(await results.runState(SCHEDULED_RUN)).toMatchObject({
      cursor: 1,
      stall: { cursor: 1, times: 1 },
    });

    // It dies again at the same survey: the next invocation passes over 7302 and finishes the run.
    const state = (await results.runState(SCHEDULED_RUN)) as NonNullable<
      Awaited<ReturnType<typeof results.runState>>
    >;
    // It had failed before, on a day now past the review horizon and on one within it.
    const beyondHorizon = nextDay(realToday, -(REVIEW_HORIZON_DAYS + 10));
    const withinHorizon = nextDay(realToday, -5);
    await results.putSurveyState({
      surveyId: '7302',
      failedDays: [beyondHorizon, withinHorizon],
      lastError: 'the marketplace refused',
      lastErrorAt: minuteAgo(),
      failingSince: minuteAgo(),
    });
    await results.putRunState(SCHEDULED_RUN, { ...state, leaseUntil: minuteAgo() });
    const finished = await engine().scheduled(2, { deadline: new Date(Date.now() + 60_000) });
    expect(finished?.complete).toBe(true);
    expect(finished?.outcomes.map((o) => [o.surveyId, o.status])).toEqual([
      ['7302', 'failed'],
      ['7303', 'reconciled'],
    ]);
    expect(finished?.outcomes[0]?.error).toMatch(/died 2 times with this survey next/);
    const last = await results.finishedRun(SCHEDULED_RUN);
    expect(last).toMatchObject({ failedSurveys: ['7302'], stoppedSurveys: ['7302'] });
    // Recorded as a failed survey is, so finance names it among the surveys whose figures are stale, and since when.
    const passedState = await results.surveyState('7302');
    // Its window's days added to those it had failed on, but for the one past the review horizon (never read again).
    expect(passedState).toMatchObject({
      failedDays: [withinHorizon, ...days],
      lastError: expect.stringMatching(/died 2 times/),
      failingSince: finished?.outcomes[0]?.failingSince,
    });

    // The next run reconciles it again, after every other survey.
    await engine().scheduled(2, { deadline: new Date(0) });
    const next = await results.runState(SCHEDULED_RUN);
    expect(next?.surveys.at(-1)).toBe('7302');
    expect(next?.surveys).toContain('7301');
    expect(next?.stall).toBeUndefined();
    // Should it die on 7302 again, one death is enough to pass over it this time.
    const atLast = { ...(next as NonNullable<typeof next>), cursor: (next?.surveys.length ?? 1) - 1 };
    await results.putRunState(SCHEDULED_RUN, { ...atLast, leaseUntil: minuteAgo() });
    const again = await engine().scheduled(2, { deadline: new Date(Date.now() + 60_000) });
    expect(again?.outcomes.map((o) => [o.surveyId, o.status])).toEqual([['7302', 'failed']]);
    expect(again?.outcomes[0]?.error).toMatch(/died once with this survey next/);
    // Failing since the first time, not since this one.
    expect(again?.outcomes[0]?.failingSince).toBe(passedState?.failingSince);
    expect((await results.surveyState('7302'))?.failingSince).toBe(passedState?.failingSince);
  });

  /** A scheduled run of yesterday and today over these surveys, from the first, held by no invocation. */
  const releasedRunOf = (runId: string, surveys: string[]) => {
    const realToday = pacificDay(new Date());
    return results.putRunState(SCHEDULED_RUN, {
      runId,
      days: [nextDay(realToday, -1), realToday],
      surveys,
      cursor: 0,
      startedAt: new Date().toISOString(),
      leaseUntil: new Date(0).toISOString(),
      failedSurveys: [],
    });
  };

  /** A Lambda context with `remainingMs` left, for the scheduled handler. */
  const lambdaContext = (remainingMs: number) => {
    const until = Date.now() + remainingMs;
    return {
      functionName: 'reconcile',
      invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:reconcile',
      awsRequestId: 'request-1',
      getRemainingTimeInMillis: () => until - Date.now(),
    } as unknown as Context;
  };

  /** An engine taking one survey at a time, its marketplace client retrying `retries` times through `fetch`. */
  const oneAtATime = (retries: number, fetch: typeof globalThis.fetch) =>
    engine({
      concurrency: 1,
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries,
        minBackoffMs: 1,
        maxBackoffMs: 2,
        fetch,
      }),
    });

  it('a marketplace that does not answer: the run stops taking up surveys after ten in a row fail, resumed by the next invocation', async () => {
    const ids = Array.from({ length: 15 }, (_, i) => String(7321 + i));
    for (const id of ids) await survey(Number(id));
    await releasedRunOf('marketplace-down', ids);
    let calls = 0;
    const counted = oneAtATime(1, (input, init) => {
      calls++;
      return fetch(input, init);
    });
    marketplace.apiFaults = { ...NO_API_FAULTS, serverError: 1 };
    try {
      const down = await counted.scheduled(2, { deadline: new Date(Date.now() + 60_000) });
      expect(down).toMatchObject({ complete: false, marketplaceUnavailable: true });
      expect(down?.outcomes.map((o) => o.status)).toEqual([
        ...Array(MARKETPLACE_DOWN_SURVEYS).fill('failed'),
        ...Array(15 - MARKETPLACE_DOWN_SURVEYS).fill('deferred'),
      ]);
      // Each failed survey's call and its one retry; none for the surveys left.
      expect(calls).toBe(2 * MARKETPLACE_DOWN_SURVEYS);
      expect(await results.runState(SCHEDULED_RUN)).toMatchObject({ cursor: MARKETPLACE_DOWN_SURVEYS });
      expect(summarizeReconcileRun(down as RunReport)).toMatchObject({ marketplaceUnavailable: true });
    } finally {
      marketplace.apiFaults = { ...NO_API_FAULTS };
    }
    // Back, the next invocation goes on from where the run stopped.
    const back = await counted.scheduled(2, { deadline: new Date(Date.now() + 60_000) });
    expect(back).toMatchObject({ complete: true });
    expect(back?.marketplaceUnavailable).toBeUndefined();
    expect(back?.outcomes.map((o) => [o.surveyId, o.status])).toEqual(
      ids.slice(MARKETPLACE_DOWN_SURVEYS).map((id) => [id, 'reconciled']),
    );
  });

  it('an access token the marketplace refuses (a 401 read afresh and refused again): the run stops taking up surveys after ten, as if it were down', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => String(7421 + i));
    for (const id of ids) await survey(Number(id));
    await releasedRunOf('token-revoked', ids);
    let calls = 0;
    const counted = oneAtATime(4, async () => {
      calls++;
      return new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Invalid access token' }), {
        status: 401,
      });
    });
    const refused = await counted.scheduled(2, { deadline: new Date(Date.now() + 60_000) });
    expect(refused).toMatchObject({ complete: false, marketplaceUnavailable: true });
    expect(refused?.outcomes.map((o) => o.status)).toEqual([
      ...Array(MARKETPLACE_DOWN_SURVEYS).fill('failed'),
      ...Array(12 - MARKETPLACE_DOWN_SURVEYS).fill('deferred'),
    ]);
    expect(refused?.outcomes[0]?.error).toMatch(/HTTP 401: Invalid access token/);
    // Each failed survey's call and its one try with the token read afresh; none for the surveys left.
    expect(calls).toBe(2 * MARKETPLACE_DOWN_SURVEYS);
  });

  it('a marketplace asking for no calls for an hour (429, Retry-After): one call, the run stops taking up surveys, none recorded failed', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => String(7381 + i));
    for (const id of ids) await survey(Number(id));
    await releasedRunOf('marketplace-quota', ids);
    let calls = 0;
    const counted = oneAtATime(4, async () => {
      calls++;
      return new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Rate limit exceeded' }), {
        status: 429,
        headers: { 'retry-after': '3600' },
      });
    });
    const before = Date.now();
    const refused = await counted.scheduled(2, { deadline: new Date(Date.now() + 60_000) });
    expect(refused).toMatchObject({ complete: false });
    expect(refused?.marketplaceUnavailable).toBeUndefined();
    // The rate limit is the marketplace's, not the surveys': each is left as one not taken up, none failed.
    expect(refused?.outcomes.map((o) => o.status)).toEqual(Array(12).fill('deferred'));
    const until = Date.parse(refused?.marketplaceRefusedUntil ?? '');
    expect(until).toBeGreaterThanOrEqual(before + 3_600_000);
    expect(until).toBeLessThanOrEqual(Date.now() + 3_600_000);
    expect(calls).toBe(1);
    expect(await results.surveyState('7381')).toBeUndefined();
    expect(await results.runState(SCHEDULED_RUN)).toMatchObject({ runId: 'marketplace-quota', cursor: 0 });
    expect(summarizeReconcileRun(refused as RunReport)).toMatchObject({
      failed: 0,
      deferred: 12,
      marketplaceRefusedUntil: refused?.marketplaceRefusedUntil,
    });
  });

  it('a Retry-After longer than the run waits but within the invocation: the handler waits it out and resumes the run', async () => {
    const ids = Array.from({ length: 6 }, (_, i) => String(7441 + i));
    for (const id of ids) await survey(Number(id));
    await releasedRunOf('marketplace-pause', ids);
    let calls = 0;
    let refusedOnce = false;
    const reconciler = engine({
      concurrency: 2,
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 2,
        minBackoffMs: 1,
        maxBackoffMs: 2,
        // As a scheduled run's client does, with a shorter wait: a pause past it stops the run.
        maxRetryAfterMs: 200,
        fetch: (input, init) => {
          calls++;
          // The third survey's listing is refused for two seconds; asked sooner, refused again.
          if (!refusedOnce && String(input).includes('7443')) {
            refusedOnce = true;
            return Promise.resolve(
              new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Too many requests' }), {
                status: 429,
                headers: { 'retry-after': '2' },
              }),
            );
          }
          return fetch(input, init);
        },
      }),
    });
    const slept: number[] = [];
    const handler = createReconcileHandler({
      engine: reconciler,
      windowDays: 2,
      sleep: async (ms) => {
        slept.push(ms);
        await new Promise((resolve) => setTimeout(resolve, ms));
      },
    });
    const summary = await handler({}, lambdaContext(300_000));
    expect(slept).toHaveLength(1);
    expect(slept[0]).toBeGreaterThan(1_000);
    expect(slept[0]).toBeLessThanOrEqual(2_000);
    // Resumed at the survey refused: every survey reconciled, none failed, the run finished.
    expect(summary).toMatchObject({ runId: 'marketplace-pause', complete: true, failed: 0 });
    const run = await results.runState(SCHEDULED_RUN);
    expect(run).toMatchObject({ runId: 'marketplace-pause', finishedAt: expect.any(String) });
    for (const id of ids) expect((await results.surveyState(id))?.lastError).toBeUndefined();
    expect(calls).toBeGreaterThan(6);
  });

  /**
   * The reconcile handler over three surveys released as run `runId`, each listing refused with this Retry-After
   * (seconds), its waits recorded and not waited: what it slept, resumed and answered, and the calls made.
   */
  const refusedRun = async (runId: string, firstId: number, retryAfter: string, remainingMs: number) => {
    const ids = Array.from({ length: 3 }, (_, i) => String(firstId + i));
    for (const id of ids) await survey(Number(id));
    await releasedRunOf(runId, ids);
    let calls = 0;
    const reconciler = oneAtATime(0, async () => {
      calls++;
      return new Response('{}', { status: 429, headers: { 'retry-after': retryAfter } });
    });
    const resumed: string[] = [];
    const slept: number[] = [];
    const summary = await createReconcileHandler({
      engine: reconciler,
      windowDays: 2,
      resume: async (_arn, resumedRun) => {
        resumed.push(resumedRun);
      },
      // Back at once: a client still holding its calls off refuses a resumed run again.
      sleep: async (ms) => {
        slept.push(ms);
      },
    })({}, lambdaContext(remainingMs));
    return { summary, slept, resumed, calls };
  };

  it('a pause the invocation cannot wait out: the handler leaves the run to the next scheduled invocation', async () => {
    const { summary, slept, resumed } = await refusedRun('marketplace-long-pause', 7451, '600', 300_000);
    // Ten minutes and a minute of work do not fit the five minutes left: not waited, not resumed at once.
    expect(slept).toEqual([]);
    expect(resumed).toEqual([]);
    expect(summary).toMatchObject({ complete: false, failed: 0, deferred: 3 });
    expect(await results.runState(SCHEDULED_RUN)).toMatchObject({
      cursor: 0,
      leaseUntil: new Date(0).toISOString(),
    });
  });

  it('a pause asked for again after every wait: the handler waits three at most, then leaves the run to the next invocation', async () => {
    const { summary, slept, resumed, calls } = await refusedRun(
      'marketplace-pauses-again',
      7454,
      '120',
      900_000,
    );
    expect(slept).toHaveLength(3);
    for (const ms of slept) expect(ms).toBeGreaterThan(100_000);
    expect(resumed).toEqual([]);
    // One call asked the pause; the resumed runs never called the marketplace while it lasted.
    expect(calls).toBe(1);
    expect(summary).toMatchObject({ complete: false, failed: 0, deferred: 3 });
    expect(await results.runState(SCHEDULED_RUN)).toMatchObject({ cursor: 0 });
  });

  it('surveys whose listing the marketplace answered and whose look-back it did not: the marketplace is up, the run goes on', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => String(7361 + i));
    for (const id of ids) {
      await survey(Number(id));
      // A claim with no transaction anywhere: its run looks back through the days before the window.
      await attempts.recordHit(
        {
          channel: 'redirect',
          surveyId: id,
          outcome: 'success',
          pid: `lookback-${id}`,
          token: `lookback-${id}`,
          source: 'query',
        },
        new Date(Date.now() - 3 * 3_600_000),
      );
    }
    await releasedRunOf('lookback-down', ids);
    const windowListedFrom = nextDay(pacificDay(new Date()), -2);
    const run = await engine({
      concurrency: 1,
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        fetch: (input, init) => {
          const from = new URL(String(input)).searchParams.get('startDate');
          // The look-back's days (before the window's listing) answer 503.
          if (from !== null && from < windowListedFrom)
            return Promise.resolve(new Response('unavailable', { status: 503 }));
          return fetch(input, init);
        },
      }),
    }).scheduled(2, { deadline: new Date(Date.now() + 60_000) });
    expect(run?.marketplaceUnavailable).toBeUndefined();
    expect(run?.outcomes.map((o) => o.status)).toEqual(Array(12).fill('failed'));
    expect(run?.outcomes.every((o) => o.marketplaceAnswered)).toBe(true);
  });

  it('surveys closed before the window, which ask the marketplace nothing, do not keep the run from stopping', async () => {
    const ids = Array.from({ length: 15 }, (_, i) => String(7341 + i));
    const closed = (i: number) => i % 5 === 4;
    for (const [i, id] of ids.entries()) {
      await survey(Number(id));
      if (closed(i)) {
        const registration = await registry.get(id);
        await registry.put({
          ...(registration as NonNullable<typeof registration>),
          closedAt: new Date(Date.now() - 30 * 86_400_000).toISOString(),
        });
      }
    }
    await releasedRunOf('marketplace-down-closed', ids);
    marketplace.apiFaults = { ...NO_API_FAULTS, serverError: 1 };
    try {
      const down = await engine({ concurrency: 1 }).scheduled(2, { deadline: new Date(Date.now() + 60_000) });
      expect(down).toMatchObject({ complete: false, marketplaceUnavailable: true });
      // Ten failed among the closed ones (reconciled with no call), then none taken up.
      expect(down?.outcomes.map((o) => o.status[0]).join('')).toBe('ffffrffffrffddd');
    } finally {
      marketplace.apiFaults = { ...NO_API_FAULTS };
    }
    await engine().scheduled(2, { deadline: new Date(Date.now() + 60_000) });
  });

  it('after a death runs the survey at the cursor alone and saves its end at once; a failure is no death', async () => {
    for (const id of [7311, 7312, 7313]) await survey(id);
    const realToday = pacificDay(new Date());
    const died = {
      runId: 'died-once',
      days: [nextDay(realToday, -1), realToday],
      surveys: ['7311', '7312', '7313'],
      cursor: 0,
      startedAt: new Date().toISOString(),
      leaseUntil: new Date(Date.now() - 60_000).toISOString(),
      failedSurveys: [],
    };
    await results.putRunState(SCHEDULED_RUN, died);
    const cursors: number[] = [];
    const recording = {
      ...results,
      putRunState: async (name: string, state: Parameters<typeof results.putRunState>[1]) => {
        cursors.push(state.cursor);
        return results.putRunState(name, state);
      },
    };
    // One survey at a time: side by side, the last may settle before the one before it on a loaded machine (then
    // the cursor stays at the one before until it settles: 1, 1, 3).
    const finished = await engine({ results: recording, concurrency: 1 }).scheduled(2, {
      deadline: new Date(Date.now() + 60_000),
    });
    expect(finished?.complete).toBe(true);
    // The death counted (cursor 0), 7311 alone and saved (1), the rest each saved as it settles (2, 3: had the
    // invocation died on the last, the cursor would say so, not a survey settled seconds before), the end (3).
    expect(cursors).toEqual([0, 1, 2, 3, 3]);

    // A survey's records that cannot be read (not the store down): that survey fails, the run goes on to its end.
    await results.putRunState(SCHEDULED_RUN, { ...died, runId: 'unreadable', leaseUntil: undefined });
    const unreadable = {
      ...results,
      surveyRecords: async (surveyId: string, days: readonly string[]) => {
        if (surveyId === '7312') throw new TypeError('injected: an item that cannot be read');
        return results.surveyRecords(surveyId, days);
      },
    };
    const past = await engine({ results: unreadable, concurrency: 1 }).scheduled(2, {
      deadline: new Date(Date.now() + 60_000),
    });
    expect(past?.complete).toBe(true);
    expect(past?.outcomes.find((o) => o.surveyId === '7312')).toMatchObject({
      status: 'failed',
      error: 'injected: an item that cannot be read',
      failingSince: expect.any(String),
    });
    // Recorded as any failed survey's is: its days to read again, the error, since when (kept by the next failure).
    const failedState = await results.surveyState('7312');
    expect(failedState).toMatchObject({
      lastError: 'injected: an item that cannot be read',
      failingSince: past?.outcomes.find((o) => o.surveyId === '7312')?.failingSince,
    });
    expect(failedState?.failedDays?.length).toBeGreaterThan(0);
    await results.putRunState(SCHEDULED_RUN, { ...died, runId: 'unreadable-again', leaseUntil: undefined });
    const again = await engine({ results: unreadable, concurrency: 1 }).scheduled(2, {
      deadline: new Date(Date.now() + 60_000),
    });
    expect(again?.outcomes.find((o) => o.surveyId === '7312')?.failingSince).toBe(failedState?.failingSince);

    // A store failure ends the invocation with an error, not a death: the run is released, nothing counted.
    await results.putRunState(SCHEDULED_RUN, { ...died, runId: 'fails', leaseUntil: undefined });
    const failing = {
      ...results,
      surveyRecords: async (surveyId: string, days: readonly string[]) => {
        if (surveyId === '7312') throw new StoreUnavailable('injected: the store is down');
        return results.surveyRecords(surveyId, days);
      },
    };
    await expect(
      engine({ results: failing, concurrency: 1 }).scheduled(2, { deadline: new Date(Date.now() + 60_000) }),
    ).rejects.toThrow(/the store is down/);
    const released = await results.runState(SCHEDULED_RUN);
    expect(released).toMatchObject({ runId: 'fails', cursor: 1, leaseUntil: new Date(0).toISOString() });
    await engine().scheduled(2, { deadline: new Date(0) });
    expect((await results.runState(SCHEDULED_RUN))?.stall).toBeUndefined();
  });
});
