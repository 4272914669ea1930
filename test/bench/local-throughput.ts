/**
 * Local throughput: hits per second through the local stack (API adapter, real handlers) with N concurrent
 * senders, the engine in a process of its own, and the CPU each process spent per hit: the stack's share is the
 * handlers' (with the adapter and the SDK), the engine's is the store's. The floor is the engine alone: the same
 * number of hit writes sent straight through the store by N concurrent writers.
 */
import { execFileSync, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createDocumentClient, createLedgerStore } from '../../functions/ledger/ledger-store';
import type { Hit } from '../../functions/receiving/hit-request';
import { ensureLedgerTable } from '../../infra/local/engine';
import { filledUrl } from '../support/api-events';
import { BENCH_ENV, BENCH_KEY_RING, firstMessage, median, startEngineProcess } from './measure';

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

/** CPU milliseconds a process has used so far (user and system), from /proc. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

async function sendConcurrently(count: number, senders: number, send: (index: number) => Promise<void>) {
  let next = 0;
  const latencies: number[] = [];
  const begun = performance.now();
  await Promise.all(
    Array.from({ length: senders }, async () => {
      while (next < count) {
        const index = next++;
        const t = performance.now();
        await send(index);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { seconds: (performance.now() - begun) / 1000, p50Ms: median(latencies) };
}

export async function localThroughput(options: { senders: number[]; hits: number }) {
  const { process: engine, endpoint } = await startEngineProcess();
  const tableName = 'bench-throughput';
  await ensureLedgerTable(endpoint, tableName);
  const stack = fork('test/bench/stack-process.ts', [endpoint, tableName], {
    execArgv: ['--import', 'tsx'],
    env: BENCH_ENV,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  try {
    const { apiUrl } = await firstMessage<{ apiUrl: string }>(stack);
    const store = createLedgerStore(createDocumentClient({ endpoint }), tableName);
    const rows = [];
    for (const senders of options.senders) {
      // Each attempt gets its postback and its redirect, as in life.
      const attempts = Array.from({ length: Math.ceil(options.hits / 2) }, () => ({
        pid: `tp-${randomUUID().slice(0, 12)}`,
        token: randomUUID(),
      }));
      const hits: Hit[] = attempts.flatMap((ids) => [
        { surveyId: '40003', ...ids, channel: 'postback', outcome: 'success', source: 'query' } as const,
        { surveyId: '40003', ...ids, channel: 'redirect', outcome: 'success', source: 'query' } as const,
      ]);
      const floorIds = hits.map((hit) => ({ ...hit, pid: `${hit.pid}-f` }));
      const engineBefore = cpuMs(engine.pid as number);
      const floor = await sendConcurrently(floorIds.length, senders, async (i) => {
        await store.recordHit(floorIds[i] as Hit, new Date(), randomUUID());
      });
      const floorEngineMs = cpuMs(engine.pid as number) - engineBefore;

      const urls = hits.map((hit) =>
        filledUrl(BENCH_KEY_RING, hit.channel, hit.surveyId, hit.outcome, hit).replace(
          'https://hits.test',
          apiUrl,
        ),
      );
      const before = { stack: cpuMs(stack.pid as number), engine: cpuMs(engine.pid as number) };
      let failures = 0;
      const run = await sendConcurrently(urls.length, senders, async (i) => {
        const response = await fetch(urls[i] as string, { redirect: 'manual' });
        await response.arrayBuffer();
        if (response.status !== 200 && response.status !== 302) failures++;
      });
      if (failures > 0) throw new Error(`${failures} of ${urls.length} hits were not answered 200 or 302`);
      const stackMs = cpuMs(stack.pid as number) - before.stack;
      const engineMs = cpuMs(engine.pid as number) - before.engine;
      const hitsPerSecond = urls.length / run.seconds;
      const floorPerSecond = floorIds.length / floor.seconds;
      rows.push({
        senders,
        hits: urls.length,
        floorWritesPerS: floorPerSecond.toFixed(0),
        hitsPerS: hitsPerSecond.toFixed(0),
        ratio: (hitsPerSecond / floorPerSecond).toFixed(2),
        p50Ms: run.p50Ms.toFixed(1),
        stackCpuMsPerHit: (stackMs / urls.length).toFixed(2),
        engineCpuMsPerHit: (engineMs / urls.length).toFixed(2),
        floorEngineCpuMsPerWrite: (floorEngineMs / floorIds.length).toFixed(2),
        handlerShare: `${((100 * stackMs) / (stackMs + engineMs)).toFixed(0)}%`,
      });
    }
    return { rows };
  } finally {
    stack.disconnect();
    engine.disconnect();
  }
}
