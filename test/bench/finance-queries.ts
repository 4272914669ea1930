/**
 * Finance queries over a month of 1,000 surveys: the period summary and a page of discrepancies, against a floor
 * that reads the same index keys and items with bare document-client calls and does nothing with them.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { BatchWriteCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { DAY_ROWS_AT_MOST, finance } from '../../functions/finance/finance-queries';
import { periodSummary } from '../../functions/finance/finance-report';
import { discrepancyIndexKey, summaryIndexKey, summaryKey } from '../../functions/ledger/ledger-schema';
import {
  batchGet,
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  firstHitItem,
  queryAll,
} from '../../functions/ledger/ledger-store';
import { nextDay, pacificDays } from '../../functions/reconciliation/verdict-rules';
import { ensureLedgerTable } from '../../infra/local/engine';
import { median, startEngineProcess } from './measure';

export interface FinanceBenchOptions {
  readonly surveys: number;
  readonly days: number;
  readonly discrepanciesPerSurveyDay: number;
  readonly repeat: number;
}

/** The garbage collector, exposed: the benchmark weighs what a query holds, not what it has let go of. */
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;
const held: unknown[] = [];

export async function financeQueries(options: FinanceBenchOptions) {
  const { process: engineProcess, endpoint } = await startEngineProcess();
  try {
    const tableName = 'bench-finance';
    await ensureLedgerTable(endpoint, tableName);
    let requests = 0;
    const client = createDocumentClient({ endpoint, requestTimeoutMs: 30_000 });
    client.middlewareStack.add(
      (next) => async (args) => {
        requests++;
        return next(args);
      },
      { step: 'initialize', name: 'countRequests' },
    );
    const from = '2026-10-01';
    const to = nextDay(from, options.days - 1);
    const days = pacificDays(from, to);

    // Seed: a summary per survey and day, and a few discrepant attempts each.
    const seeded = Date.now();
    const items: Record<string, unknown>[] = [];
    for (const day of days) {
      for (let s = 0; s < options.surveys; s++) {
        const surveyId = String(50_000 + s);
        items.push({
          ...summaryKey(surveyId, day),
          ...summaryIndexKey(surveyId, day),
          kind: 'summary',
          surveyId,
          day,
          here: { attempts: 1000, postbackCompletes: 600, redirectOnlyCompletes: 5, nonCompletes: 395 },
          marketplace: {
            transactions: 1000,
            byStatus: { Completed: 600 },
            completes: 600,
            validCompletes: 400,
            pendingCompletes: 190,
            invalidCompletes: 10,
            owed: '700.00',
            pending: '332.50',
          },
          verdicts: { matched: 990, invalidated: options.discrepanciesPerSurveyDay },
          reconciledAt: `${day}T23:00:00.000Z`,
          runId: 'bench',
        });
        for (let d = 0; d < options.discrepanciesPerSurveyDay; d++) {
          const token = `${surveyId}-${day}-${d}`;
          const hit = firstHitItem(
            { channel: 'postback', surveyId, outcome: 'success', pid: `p-${token}`, token, source: 'query' },
            new Date(`${day}T20:00:00Z`),
          );
          items.push({
            ...hit,
            verdict: 'invalidated',
            verdictDay: day,
            verdictDetail: {},
            verdictAt: `${day}T23:00:00.000Z`,
            marketplace: { status: 'Completed', verifyToken: 'Invalid', cpi: '1.75' },
            verdictHistory: [{ verdict: 'invalidated', day, at: `${day}T23:00:00.000Z` }],
            ...discrepancyIndexKey(day, surveyId, 'invalidated', token),
          });
        }
      }
    }
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < items.length) {
          const start = next;
          next += 25;
          let pending = items.slice(start, start + 25).map((Item) => ({ PutRequest: { Item } }));
          while (pending.length > 0) {
            const result = await client.send(
              new BatchWriteCommand({ RequestItems: { [tableName]: pending } }),
            );
            pending = (result.UnprocessedItems?.[tableName] ?? []) as typeof pending;
          }
        }
      }),
    );
    const seedSeconds = (Date.now() - seeded) / 1000;

    const queries = finance({
      attempts: createLedgerStore(client, tableName),
      results: createReconciliationStore(client, tableName),
    });
    const time = async (work: () => Promise<unknown>) => {
      const before = requests;
      collectGarbage();
      const heapBefore = process.memoryUsage().heapUsed;
      const started = performance.now();
      const result = await work();
      const ms = performance.now() - started;
      // What the query holds when it is done, its answer alive and the garbage collected: the rows, or their sums.
      collectGarbage();
      const heapMb = (process.memoryUsage().heapUsed - heapBefore) / 1e6;
      held.push(result);
      held.length = 0;
      return { ms, requests: requests - before, heapMb };
    };
    const floorSummary = async () => {
      // The same day-by-day reads, all days at once, as the finance queries make them.
      await Promise.all(
        days.map(async (day) => {
          const keys = await queryAll(client, {
            TableName: tableName,
            IndexName: 'gsi1',
            KeyConditionExpression: 'gsi1pk = :pk',
            ExpressionAttributeValues: { ':pk': summaryIndexKey('', day).gsi1pk },
          });
          await batchGet(
            client,
            tableName,
            keys.map((k) => ({ pk: k.pk, sk: k.sk })),
          );
        }),
      );
    };
    const floorPage = async () => {
      const page = await client.send(
        new QueryCommand({
          TableName: tableName,
          IndexName: 'gsi2',
          KeyConditionExpression: 'gsi2pk = :pk',
          ExpressionAttributeValues: { ':pk': discrepancyIndexKey(from, '', '', '').gsi2pk },
          // As the page reads: one key past the hundred, which says the last survey's rows are all in.
          Limit: 101,
        }),
      );
      await batchGet(
        client,
        tableName,
        (page.Items ?? []).slice(0, 100).map((k) => ({ pk: k.pk, sk: k.sk })),
      );
    };
    const runs = {
      summary: [] as number[],
      summaryHeap: [] as number[],
      totals: [] as number[],
      totalsHeap: [] as number[],
      summaryFloor: [] as number[],
      page: [] as number[],
      pageFloor: [] as number[],
    };
    let summaryRequests = 0;
    let pageRequests = 0;
    let rows = 0;
    let totalsRequests = 0;
    const summaryOnce = async () => {
      // By day, as the API's detail=days answers it: the rows, then the summary of them.
      const summary = await time(async () => {
        const all = await queries.summaryRows({ from, to });
        rows = all.length;
        return periodSummary(all);
      });
      runs.summary.push(summary.ms);
      runs.summaryHeap.push(summary.heapMb);
      summaryRequests = summary.requests;
    };
    const totalsOnce = async () => {
      // By survey or in all (detail=surveys, detail=totals): added up as the days are read.
      const totals = await time(() => queries.periodTotals({ from, to }));
      runs.totals.push(totals.ms);
      runs.totalsHeap.push(totals.heapMb);
      totalsRequests = totals.requests;
    };
    const pageOnce = async () => {
      const page = await time(() => queries.discrepancyPage({ from, to }, { limit: 100 }));
      runs.page.push(page.ms);
      pageRequests = page.requests;
    };
    // Both sides warmed once, untimed (engine caches, connections, JIT), then alternated: the floor first in even
    // rounds, the product first in odd ones, so neither always runs on the other's warm-up.
    await floorSummary();
    await queries.summaryRows({ from, to });
    await queries.periodTotals({ from, to });
    await floorPage();
    await queries.discrepancyPage({ from, to }, { limit: 100 });
    for (let i = 0; i < options.repeat; i++) {
      const floorFirst = i % 2 === 0;
      if (floorFirst) runs.summaryFloor.push((await time(floorSummary)).ms);
      await summaryOnce();
      await totalsOnce();
      if (!floorFirst) runs.summaryFloor.push((await time(floorSummary)).ms);
      if (floorFirst) runs.pageFloor.push((await time(floorPage)).ms);
      await pageOnce();
      if (!floorFirst) runs.pageFloor.push((await time(floorPage)).ms);
    }
    // Ten times the surveys, the store's answers served from memory (the embedded engine cannot hold a month of them):
    // the finance function's own work and what it holds, on the days the engine answered above.
    const [sample] = await createReconciliationStore(client, tableName).daySummaries(from);
    if (!sample) throw new Error('no summary seeded');
    const tenTimes = options.surveys * 10;
    let daysServed = 0;
    const inMemory = finance({
      attempts: createLedgerStore(client, tableName),
      results: {
        ...createReconciliationStore(client, tableName),
        daySummaries: async (day: string) => {
          daysServed++;
          return Array.from({ length: tenTimes }, (_, i) => ({
            ...sample,
            surveyId: String(50_000 + i),
            day,
          }));
        },
      },
    });
    const atTenTimes = { totals: [] as number[], totalsHeap: [] as number[], refused: [] as number[] };
    for (let i = 0; i < options.repeat; i++) {
      const totals = await time(() => inMemory.periodTotals({ from, to }));
      atTenTimes.totals.push(totals.ms);
      atTenTimes.totalsHeap.push(totals.heapMb);
      daysServed = 0;
      const refused = await time(() =>
        inMemory.summaryRows({ from, to }, undefined, { atMost: DAY_ROWS_AT_MOST }).catch(() => undefined),
      );
      atTenTimes.refused.push(refused.ms);
    }
    return {
      seedSeconds,
      tenTimes: {
        surveys: tenTimes,
        rows: tenTimes * options.days,
        totalsMs: median(atTenTimes.totals),
        totalsHeapMb: median(atTenTimes.totalsHeap),
        byDayRefusedMs: median(atTenTimes.refused),
        byDayDaysRead: daysServed,
      },
      rows: [
        tableRow(`summary, ${options.days} days x ${options.surveys} surveys`, rows, runs.summaryFloor, {
          runs: runs.summary,
          heap: runs.summaryHeap,
          requests: summaryRequests,
        }),
        tableRow(
          `summary by survey or in all (added up as read), ${options.days} days x ${options.surveys} surveys`,
          rows,
          runs.summaryFloor,
          { runs: runs.totals, heap: runs.totalsHeap, requests: totalsRequests },
        ),
        tableRow('discrepancies, first page of 100', 100, runs.pageFloor, {
          runs: runs.page,
          requests: pageRequests,
        }),
      ],
    };
  } finally {
    engineProcess.disconnect();
  }
}

/** A row of the benchmark's table: the query's medians against its floor's. */
function tableRow(
  query: string,
  itemsRead: number,
  floor: number[],
  measured: { runs: number[]; heap?: number[]; requests: number },
) {
  return {
    query,
    itemsRead,
    floorMs: median(floor).toFixed(0),
    ms: median(measured.runs).toFixed(0),
    ratio: (median(measured.runs) / median(floor)).toFixed(2),
    storeRequests: measured.requests,
    ...(measured.heap ? { heapMb: median(measured.heap).toFixed(1) } : {}),
  };
}
