/**
 * One measured reconciliation (or its floor) in a fresh process: wall time, peak memory, calls made.
 * Usage: reconcile-runner <floor|reconcile> <surveys> (fixture details in BENCH_FIXTURE as JSON).
 */
import '../../infra/local/environment';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
} from '../../functions/ledger/ledger-store';
import { createMarketplaceClient } from '../../functions/marketplace/marketplace-client';
import { pacificDayRange } from '../../functions/marketplace/pacific-time';
import { reconciler } from '../../functions/reconciliation/reconciler';
import { attemptRange, fetchRange } from '../../functions/reconciliation/verdict-rules';

const [mode = 'reconcile', count = '8'] = process.argv.slice(2);
const fixture = JSON.parse(process.env.BENCH_FIXTURE ?? '{}') as {
  endpoint: string;
  marketplaceUrl: string;
  tableName: string;
  token: string;
  day: string;
};
const surveyIds = Array.from({ length: Number(count) }, (_, s) => String(90_000 + s));

let marketplaceCalls = 0;
const counting: typeof fetch = (input, init) => {
  marketplaceCalls++;
  return fetch(input, init);
};
let storeRequests = 0;
/** Capacity units the engine reports the run consumed (ReturnConsumedCapacity on every request). */
const units = { read: 0, write: 0 };
const WRITES = new Set(['PutItemCommand', 'UpdateItemCommand', 'DeleteItemCommand', 'BatchWriteItemCommand']);
const client = createDocumentClient({ endpoint: fixture.endpoint });
client.middlewareStack.add(
  (next, context) => async (args) => {
    storeRequests++;
    const input = args.input as Record<string, unknown>;
    if ('TableName' in input || 'RequestItems' in input) input.ReturnConsumedCapacity = 'TOTAL';
    const result = await next(args);
    const consumed = (result.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
    const list = (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) as {
      CapacityUnits?: number;
    }[];
    const total = list.reduce((sum, c) => sum + (c.CapacityUnits ?? 0), 0);
    units[WRITES.has(String(context.commandName)) ? 'write' : 'read'] += total;
    return result;
  },
  { step: 'initialize', name: 'countRequests' },
);
const marketplace = createMarketplaceClient({
  baseUrl: fixture.marketplaceUrl,
  accessToken: () => fixture.token,
  fetch: counting,
});
const attempts = createLedgerStore(client, fixture.tableName);

let peakRss = 0;
let peakHeap = 0;
// With --expose-gc (the memory runs), each sample first collects garbage: the figure is what is retained.
const collect = (globalThis as { gc?: () => void }).gc;
const sample = () => {
  collect?.();
  const m = process.memoryUsage();
  peakRss = Math.max(peakRss, m.rss);
  peakHeap = Math.max(peakHeap, m.heapUsed);
};
const sampler = setInterval(sample, collect ? 100 : 20);
const started = performance.now();
let items = 0;

if (mode === 'floor') {
  // Just paging both sides, four surveys at a time and both sides of a survey at once, as the reconciler does; no
  // comparing, no writing.
  const range = fetchRange([fixture.day]);
  const seen = attemptRange([fixture.day]);
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < surveyIds.length) {
        const surveyId = surveyIds[next++] as string;
        const [listed, here] = await Promise.all([
          marketplace.getSurveyTransactions(surveyId, {
            startDate: range.startDate,
            endDate: range.endDate,
          }),
          attempts.attemptsOfSurvey(surveyId, seen.from, seen.to),
        ]);
        items += listed.rows.length + here.length;
      }
    }),
  );
} else {
  // The hourly path: the scheduled run over a one-day window (the fixture's day), of the first `count` surveys.
  const registry = createSurveyRegistry(client, fixture.tableName);
  const wanted = new Set(surveyIds);
  const lastInstant = pacificDayRange(fixture.day).end.getTime() - 1;
  const engine = reconciler({
    marketplace,
    attempts,
    registry: {
      ...registry,
      list: async () => (await registry.list()).filter((r) => wanted.has(r.surveyId)),
    },
    results: createReconciliationStore(client, fixture.tableName),
    now: () => new Date(Math.min(Date.now(), lastInstant)),
  });
  const report = await engine.scheduled(1, { deadline: new Date(Date.now() + 3_600_000) });
  if (!report) throw new Error('the run is held by another invocation');
  const failed = report.outcomes.filter((o) => o.status !== 'reconciled');
  if (failed.length > 0) throw new Error(`not reconciled: ${JSON.stringify(failed[0])}`);
  items = report.outcomes.reduce((sum, o) => sum + o.transactions + o.attempts, 0);
}
const wallMs = performance.now() - started;
clearInterval(sampler);
sample();
console.log(
  JSON.stringify({
    mode,
    surveys: surveyIds.length,
    wallMs,
    peakRssMb: peakRss / 2 ** 20,
    peakHeapMb: peakHeap / 2 ** 20,
    items,
    marketplaceCalls,
    storeRequests,
    readUnits: units.read,
    writeUnits: units.write,
  }),
);
