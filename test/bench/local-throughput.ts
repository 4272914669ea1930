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
import { LOCAL_RESPONDENT_ADDRESS } from '../../infra/local/api-gateway';
import { ensureLedgerTable } from '../../infra/local/engine';
import { filledUrl } from '../support/api-events';
import {
  BENCH_ENV,
  BENCH_KEY_RING,
  firstMessage,
  median,
  respondentAddress,
  startEngineProcess,
} from './measure';

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

export async function localThroughput(options: { senders: number[]; hits: number; rounds?: number }) {
  const rounds = options.rounds ?? 3;
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
      const samples = {
        floor: [] as number[],
        stack: [] as number[],
        ratio: [] as number[],
        p50: [] as number[],
      };
      const cpu = { stack: 0, engine: 0, floorEngine: 0, hits: 0, floorWrites: 0 };
      // Several rounds, the floor and the stack alternating which goes first, fresh attempts each round: one run
      // per side swung the ratio from 0.47 to 1.28 on this machine.
      for (let round = 0; round < rounds; round++) {
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
        const urls = hits.map((hit) =>
          filledUrl(BENCH_KEY_RING, hit.channel, hit.surveyId, hit.outcome, hit).replace(
            'https://hits.test',
            apiUrl,
          ),
        );
        const runFloor = async () => {
          const engineBefore = cpuMs(engine.pid as number);
          const floor = await sendConcurrently(floorIds.length, senders, async (i) => {
            await store.recordHit(floorIds[i] as Hit, new Date(), randomUUID());
          });
          cpu.floorEngine += cpuMs(engine.pid as number) - engineBefore;
          cpu.floorWrites += floorIds.length;
          return floorIds.length / floor.seconds;
        };
        const runStack = async () => {
          const before = { stack: cpuMs(stack.pid as number), engine: cpuMs(engine.pid as number) };
          let failures = 0;
          const run = await sendConcurrently(urls.length, senders, async (i) => {
            // A respondent's address each (the local gateway's header), as in life.
            const response = await fetch(urls[i] as string, {
              redirect: 'manual',
              headers: { [LOCAL_RESPONDENT_ADDRESS]: respondentAddress(i) },
            });
            await response.arrayBuffer();
            if (response.status !== 200 && response.status !== 302) failures++;
          });
          if (failures > 0)
            throw new Error(`${failures} of ${urls.length} hits were not answered 200 or 302`);
          cpu.stack += cpuMs(stack.pid as number) - before.stack;
          cpu.engine += cpuMs(engine.pid as number) - before.engine;
          cpu.hits += urls.length;
          samples.p50.push(run.p50Ms);
          return urls.length / run.seconds;
        };
        let floorPerSecond: number;
        let hitsPerSecond: number;
        if (round % 2 === 0) {
          floorPerSecond = await runFloor();
          hitsPerSecond = await runStack();
        } else {
          hitsPerSecond = await runStack();
          floorPerSecond = await runFloor();
        }
        samples.floor.push(floorPerSecond);
        samples.stack.push(hitsPerSecond);
        samples.ratio.push(hitsPerSecond / floorPerSecond);
      }
      rows.push({
        senders,
        hits: `${cpu.hits / rounds} x ${rounds}`,
        floorWritesPerS: median(samples.floor).toFixed(0),
        hitsPerS: median(samples.stack).toFixed(0),
        ratio: median(samples.ratio).toFixed(2),
        ratioRange: `${Math.min(...samples.ratio).toFixed(2)}-${Math.max(...samples.ratio).toFixed(2)}`,
        p50Ms: median(samples.p50).toFixed(1),
        stackCpuMsPerHit: (cpu.stack / cpu.hits).toFixed(2),
        engineCpuMsPerHit: (cpu.engine / cpu.hits).toFixed(2),
        floorEngineCpuMsPerWrite: (cpu.floorEngine / cpu.floorWrites).toFixed(2),
        handlerShare: `${((100 * cpu.stack) / (cpu.stack + cpu.engine)).toFixed(0)}%`,
      });
    }
    return { rows };
  } finally {
    stack.disconnect();
    engine.disconnect();
  }
}
