/**
 * Finance queries over a month of 1,000 surveys: the period summary and a page of discrepancies, against a floor
 * that reads the same index keys and items with bare document-client calls and does nothing with them.
 */
import { BatchWriteCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { finance } from '../../functions/finance/finance-queries';
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
      const started = performance.now();
      await work();
      return { ms: performance.now() - started, requests: requests - before };
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
      summaryFloor: [] as number[],
      page: [] as number[],
      pageFloor: [] as number[],
    };
    let summaryRequests = 0;
    let pageRequests = 0;
    let rows = 0;
    const summaryOnce = async () => {
      const summary = await time(async () => {
        rows = (await queries.summaryRows({ from, to })).length;
      });
      runs.summary.push(summary.ms);
      summaryRequests = summary.requests;
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
    await floorPage();
    await queries.discrepancyPage({ from, to }, { limit: 100 });
    for (let i = 0; i < options.repeat; i++) {
      const floorFirst = i % 2 === 0;
      if (floorFirst) runs.summaryFloor.push((await time(floorSummary)).ms);
      await summaryOnce();
      if (!floorFirst) runs.summaryFloor.push((await time(floorSummary)).ms);
      if (floorFirst) runs.pageFloor.push((await time(floorPage)).ms);
      await pageOnce();
      if (!floorFirst) runs.pageFloor.push((await time(floorPage)).ms);
    }
    return {
      seedSeconds,
      rows: [
        {
          query: `summary, ${options.days} days x ${options.surveys} surveys`,
          itemsRead: rows,
          floorMs: median(runs.summaryFloor).toFixed(0),
          ms: median(runs.summary).toFixed(0),
          ratio: (median(runs.summary) / median(runs.summaryFloor)).toFixed(2),
          storeRequests: summaryRequests,
        },
        {
          query: 'discrepancies, first page of 100',
          itemsRead: 100,
          floorMs: median(runs.pageFloor).toFixed(0),
          ms: median(runs.page).toFixed(0),
          ratio: (median(runs.page) / median(runs.pageFloor)).toFixed(2),
          storeRequests: pageRequests,
        },
      ],
    };
  } finally {
    engineProcess.disconnect();
  }
}
