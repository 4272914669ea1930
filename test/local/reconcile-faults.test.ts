/**
 * The whole local stack with the marketplace's faults on: respondents flow through the real receivers, the
 * buyer reviews, and reconciliation for today finds exactly the discrepancies the marketplace injected; a re-run
 * changes nothing.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
  type LedgerStore,
  type ReconciliationStore,
} from '../../functions/ledger/ledger-store';
import { createMarketplaceClient } from '../../functions/marketplace/marketplace-client';
import { pacificDay, pacificDayRange } from '../../functions/marketplace/pacific-time';
import { type Reconciler, reconciler } from '../../functions/reconciliation/reconciler';
import type { VerdictKind } from '../../functions/reconciliation/verdict-kinds';
import { sumAmounts } from '../../functions/shared/money';
import type { LocalMarketplace } from '../../infra/local/marketplace/server';
import type { Injection, SimTransaction } from '../../infra/local/marketplace/state';
import type { LocalStack } from '../../infra/local/stack';
import { printToPdf, renderedDom } from '../support/chromium';
import { servedSince } from '../support/ledger';
import { startTestStack, syncRedirectsOnce } from '../support/local-stack';
import { scratchDirectory } from '../support/scratch';

const run = promisify(execFile);
const TSX = 'node_modules/.bin/tsx';

let stack: LocalStack;
let marketplace: LocalMarketplace;
let engine: Reconciler;
let attempts: LedgerStore;
let results: ReconciliationStore;
const SURVEYS = [1001, 1002, 1003];

beforeAll(async () => {
  const started = await startTestStack({ MARKETPLACE_SEED: '424242' });
  const { endpoint, tableName } = started;
  stack = started.stack;
  marketplace = stack.marketplace as LocalMarketplace;
  // The scheduled sync points the marketplace's live surveys at the receivers and records their CPIs.
  expect((await syncRedirectsOnce()).counts.applied).toBe(3);

  const client = createDocumentClient({ endpoint });
  attempts = createLedgerStore(client, tableName);
  results = createReconciliationStore(client, tableName);
  engine = reconciler({
    marketplace: createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => process.env.MARKETPLACE_ACCESS_TOKEN as string,
    }),
    attempts,
    registry: createSurveyRegistry(client, tableName),
    results,
  });

  // Its respondents below are dated a survey's length back, before the sync that just pointed the surveys here.
  await servedSince(
    createSurveyRegistry(client, tableName),
    SURVEYS.map(String),
    new Date(Date.now() - 86_400_000),
  );
  marketplace.respondents.faults = {
    ...marketplace.respondents.faults,
    dropPostback: 0.08,
    repeatPostback: 0.08,
    phantom: 0.05,
    falseComplete: 0.05,
    cpiDrift: 0.05,
  };
  // Clicked in today (Pacific) even in the first minutes after its midnight, when a click the survey's length before
  // now would fall on yesterday, which the runs and figures below (all today's) do not read.
  const todayBegan = pacificDayRange(pacificDay(new Date())).start.getTime();
  for (let i = 0; i < 240; i++)
    await marketplace.respondents.respondent({
      surveyId: SURVEYS[i % 3] as number,
      clickedAt: new Date(Math.max(Date.now() - 30 * 60_000, todayBegan + 1_000)),
    });
  marketplace.state.review({ invalidShare: 0.1, statusChangeShare: 0.05 });
}, 120_000);

afterAll(() => stack.stop());

/** What reconciliation must conclude for a transaction, from what the marketplace injected into it. */
function expectedVerdict(t: SimTransaction, injected: readonly Injection[]): VerdictKind {
  const has = (i: Injection) => injected.includes(i);
  const complete = t.status === 'Completed';
  if (has('phantom'))
    return complete
      ? t.verifyToken === 'Invalid'
        ? 'invalidated'
        : 'complete_not_received'
      : 'not_received';
  if (complete && t.verifyToken === 'Invalid') return 'invalidated';
  // Reviewed and re-filed as a termination: a reversal of the complete received here.
  if (has('status-changed') && t.verifyToken === 'Invalid') return 'invalidated';
  if (has('status-changed') || has('false-complete')) return 'complete_not_paid';
  if (complete && has('dropped-postback')) return 'complete_not_received';
  if (complete && has('cpi-drift')) return 'cpi_mismatch';
  return 'matched';
}

describe('reconciliation with faults on', () => {
  it('finds exactly the discrepancies the marketplace injected, and nothing else', async () => {
    const today = pacificDay(new Date());
    const report = await engine.run(today, today);
    expect(report.outcomes.map((o) => o.status)).toEqual(['reconciled', 'reconciled', 'reconciled']);

    const injectedKinds = new Set([...marketplace.state.injections.values()].flat());
    for (const kind of [
      'phantom',
      'false-complete',
      'dropped-postback',
      'repeated-postback',
      'cpi-drift',
      'invalidated',
      'status-changed',
    ]) {
      expect(injectedKinds, `the run should exercise ${kind}`).toContain(kind);
    }

    let checked = 0;
    for (const surveyId of SURVEYS) {
      for (const t of marketplace.state.transactionsOf(surveyId)) {
        const injected = marketplace.state.injections.get(t.token) ?? [];
        const [attempt] = (await attempts.attemptsOf(String(surveyId), t.pid)).filter(
          (a) => a.token === t.token,
        );
        expect(attempt?.reconciliation?.verdict, `${t.token} ${t.status} ${injected.join(',')}`).toBe(
          expectedVerdict(t, injected),
        );
        if (injected.includes('repeated-postback') && !injected.includes('phantom'))
          expect(attempt?.postback?.hits).toBe(2);
        checked++;
      }
    }
    expect(checked).toBe(240);

    // The discrepancy list is exactly the injected ones.
    const listed = await results.discrepancies(today);
    const expectedTokens = SURVEYS.flatMap((surveyId) =>
      marketplace.state
        .transactionsOf(surveyId)
        .filter((t) => expectedVerdict(t, marketplace.state.injections.get(t.token) ?? []) !== 'matched')
        .map((t) => t.token),
    );
    expect(listed.map((a) => a.token).sort()).toEqual(expectedTokens.sort());
  });

  it('summaries agree with the marketplace: owed is the sum of CPI of valid completes, exactly', async () => {
    const today = pacificDay(new Date());
    const summaries = (await results.daySummaries(today)).filter((s) => SURVEYS.includes(Number(s.surveyId)));
    for (const summary of summaries) {
      const survey = marketplace.state.surveys.get(Number(summary.surveyId));
      const valid = marketplace.state
        .transactionsOf(Number(summary.surveyId))
        .filter((t) => t.status === 'Completed' && t.verifyToken === 'Valid');
      // Worked out independently, in integer cents.
      const cents = valid.reduce(
        (sum, t) => sum + BigInt((t.cpi ?? survey?.cpi ?? '0.00').replace('.', '')),
        0n,
      );
      expect(summary.marketplace.validCompletes).toBe(valid.length);
      expect(summary.marketplace.owed).toBe(`${cents / 100n}.${String(cents % 100n).padStart(2, '0')}`);
    }
  });

  it('finance gets the same numbers from the API, the CLI (JSON, CSV, HTML) and the marketplace', async () => {
    const today = pacificDay(new Date());
    const auth = { authorization: `Bearer ${process.env.FINANCE_API_TOKEN}` };
    const api = async (path: string, headers: Record<string, string> = {}) => {
      const response = await fetch(`${stack.apiUrl}${path}`, { headers: { ...auth, ...headers } });
      expect(response.status).toBe(200);
      return response;
    };
    // What the marketplace itself says is owed, in integer cents.
    const cents = SURVEYS.flatMap((id) => marketplace.state.transactionsOf(id))
      .filter((t) => t.status === 'Completed' && t.verifyToken === 'Valid')
      .reduce(
        (sum, t) =>
          sum + BigInt((t.cpi ?? marketplace.state.surveys.get(t.surveyId)?.cpi ?? '0.00').replace('.', '')),
        0n,
      );
    const owed = `${cents / 100n}.${String(cents % 100n).padStart(2, '0')}`;
    const expectedTokens = SURVEYS.flatMap((surveyId) =>
      marketplace.state
        .transactionsOf(surveyId)
        .filter((t) => expectedVerdict(t, marketplace.state.injections.get(t.token) ?? []) !== 'matched')
        .map((t) => t.token),
    ).sort();

    const summary = (await (await api(`/finance/summary?from=${today}&to=${today}`)).json()) as {
      totals: { owed: string };
    };
    expect(summary.totals.owed).toBe(owed);
    const listed: string[] = [];
    let cursor = '';
    do {
      const page = (await (
        await api(`/finance/discrepancies?from=${today}&to=${today}&limit=7${cursor}`)
      ).json()) as {
        items: { token: string }[];
        nextCursor?: string;
      };
      listed.push(...page.items.map((d) => d.token));
      cursor = page.nextCursor ? `&cursor=${page.nextCursor}` : '';
    } while (cursor);
    expect(listed.sort()).toEqual(expectedTokens);
    const csv = await (
      await api(`/finance/summary?from=${today}&to=${today}`, { accept: 'text/csv' })
    ).text();
    const csvOwed = (parse(csv, { columns: true }) as { owed: string }[]).map((r) => r.owed);

    const dir = scratchDirectory('report-');
    const cli = (...args: string[]) =>
      run(TSX, ['functions/cli/main.ts', 'report', '--from', today, '--to', today, ...args], {
        env: process.env,
      });
    const json = JSON.parse((await cli()).stdout) as {
      timeZone: string;
      totals: { owed: string };
      surveys: unknown[];
      discrepancies: { token: string }[];
    };
    expect(json.timeZone).toBe('America/Los_Angeles');
    expect(json.totals.owed).toBe(owed);
    expect(json.surveys).toHaveLength(3);
    expect(json.discrepancies.map((d) => d.token).sort()).toEqual(expectedTokens);
    const cliCsv = (await cli('--format', 'csv')).stdout;
    expect((parse(cliCsv, { columns: true }) as { owed: string }[]).map((r) => r.owed)).toEqual(csvOwed);
    expect(sumAmounts(csvOwed)).toBe(owed);
    // The failing surveys' table: its header whatever the period holds.
    const failing = (await cli('--format', 'csv', '--table', 'failing')).stdout;
    expect(failing.split('\r\n')[0]).toBe('survey_id,failing_from,failing_to,reasons');

    const file = join(dir, 'report.html');
    await cli('--format', 'html', '--out', file);
    const dom = await renderedDom(pathToFileURL(file).href);
    expect(dom).toMatch(new RegExp(`id="owed">Owed \\(valid completes\\)<b>${owed.replace('.', '\\.')}</b>`));
    expect(dom).toContain(`id="discrepancy-count">Discrepancies<b>${expectedTokens.length}</b>`);
    expect(dom.match(/<tr( class="money")?><td>\d{4}-\d{2}-\d{2}<\/td>/g)?.length).toBe(
      expectedTokens.length,
    );
    expect(dom.match(/<rect class="(here|marketplace)"/g)?.length).toBe(2);
    await printToPdf(pathToFileURL(file).href, join(dir, 'report.pdf'));
    expect(readFileSync(join(dir, 'report.pdf')).subarray(0, 5).toString()).toBe('%PDF-');
  }, 120_000);

  it('a re-run changes nothing', async () => {
    const today = pacificDay(new Date());
    const again = await engine.run(today, today);
    for (const outcome of again.outcomes)
      expect(outcome.changes).toEqual({ new: 0, changed: 0, refreshed: 0 });
  });
});
