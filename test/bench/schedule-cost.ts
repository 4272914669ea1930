/**
 * What the scheduled functions other than reconciliation cost per run: the redirect sync in its steady state
 * (every survey applied and verified, nothing new at the marketplace) over `surveys` live surveys, with every
 * DynamoDB command's consumed capacity read from the engine and the marketplace calls counted. Each figure is
 * per run and per survey, so the cost model can scale it to a supplier's size. Run as its own process by
 * `npm run bench`; reports over IPC.
 */
import { randomUUID } from 'node:crypto';
import { createDayIndexBackfill, createDocumentClient } from '../../functions/ledger/ledger-store';
import { lambdaContext } from '../../infra/local/api-gateway';
import { ensureLedgerTable, startEngine } from '../../infra/local/engine';
import { startLocalMarketplace } from '../../infra/local/marketplace/server';
import { BENCH_KEY_RING, median } from './measure';
import { recordCommands } from './sdk-hooks';

const surveys = Number(process.argv[2] ?? 200);
const runs = Number(process.argv[3] ?? 5);
const TOKEN = 'bench-token';
const tableName = 'bench-schedules';

const engine = await startEngine();
await ensureLedgerTable(engine.endpoint, tableName);
// A table past its first hour: the scheduled day-index backfill has found nothing to move and says so.
await createDayIndexBackfill(createDocumentClient({ endpoint: engine.endpoint }), tableName).settle({
  quietMs: 0,
});
const marketplace = await startLocalMarketplace({ accessToken: TOKEN, seedSurveys: false });
// Created a day ago: the steady state is surveys the sync has long configured, not ones inside its skew margin.
const created = new Date(Date.now() - 86_400_000);
for (let s = 0; s < surveys; s++) marketplace.state.addSurvey({ surveyId: 70_000 + s, cpi: '1.50' }, created);

Object.assign(process.env, {
  TABLE_NAME: tableName,
  DYNAMODB_ENDPOINT: engine.endpoint,
  AWS_REGION: 'us-east-1',
  SIGNING_KEYS: BENCH_KEY_RING,
  MARKETPLACE_BASE_URL: marketplace.url,
  MARKETPLACE_ACCESS_TOKEN: TOKEN,
  PUBLIC_BASE_URL: 'https://receiver.example.com',
});

let marketplaceCalls = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = (input, init) => {
  if (String(input instanceof Request ? input.url : input).startsWith(marketplace.url)) marketplaceCalls++;
  return realFetch(input, init);
};

let recording = false;
const records = recordCommands(() => recording);
type Scheduled = (event: unknown, context: ReturnType<typeof lambdaContext>) => Promise<unknown>;
const { handler: sync } = (await import('../../functions/redirect-sync')) as { handler: Scheduled };

/** One scheduled invocation, with the units and calls it made. */
async function measuredRun(name: string, handler: Scheduled) {
  records.length = 0;
  marketplaceCalls = 0;
  recording = true;
  const started = performance.now();
  await handler({ source: 'bench' }, lambdaContext(name, randomUUID(), 900_000));
  const ms = performance.now() - started;
  recording = false;
  const errors = records.filter((r) => r.error);
  if (errors.length > 0) throw new Error(`${name}: ${errors.length} store errors (${errors[0]?.error})`);
  const units = records.reduce((sum, r) => sum + (r.capacity?.total ?? 0), 0);
  const writes = records.filter((r) => /^(Put|Update|Delete|BatchWrite)/.test(r.command));
  const writeUnits = writes.reduce((sum, r) => sum + (r.capacity?.total ?? 0), 0);
  return {
    ms,
    requests: records.length,
    readUnits: units - writeUnits,
    writeUnits,
    marketplaceCalls,
  };
}

// The first run applies every survey; the steady state is what follows.
await measuredRun('redirect-sync', sync);
const steady: Awaited<ReturnType<typeof measuredRun>>[] = [];
for (let i = 0; i < runs; i++) steady.push(await measuredRun('redirect-sync', sync));
const per = (key: 'readUnits' | 'writeUnits' | 'requests' | 'marketplaceCalls') =>
  median(steady.map((r) => r[key])) / surveys;

process.send?.({
  surveys,
  runs,
  sync: {
    msPerRun: median(steady.map((r) => r.ms)),
    readUnitsPerSurveyRun: per('readUnits'),
    writeUnitsPerSurveyRun: per('writeUnits'),
    requestsPerSurveyRun: per('requests'),
    marketplaceCallsPerRun: median(steady.map((r) => r.marketplaceCalls)),
  },
});
process.once('disconnect', async () => {
  await marketplace.stop();
  await engine.stop();
  process.exit(0);
});
