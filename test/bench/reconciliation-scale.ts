/**
 * Reconciliation scale: reconciling n surveys of 1,000 transactions against the local marketplace and engine,
 * each measurement a fresh process, against a floor that pages both sides without comparing or writing.
 */
import { type ChildProcess, execFile, fork } from 'node:child_process';
import { promisify } from 'node:util';
import { BENCH_ENV as env, fmt, median } from './measure';

const run = promisify(execFile);

interface RunnerResult {
  mode: string;
  surveys: number;
  wallMs: number;
  peakRssMb: number;
  peakHeapMb: number;
  items: number;
  marketplaceCalls: number;
  storeRequests: number;
}

export async function reconciliationScale(sizes: number[], perSurvey: number, repeat: number) {
  const largest = Math.max(...sizes);
  const fixture: ChildProcess = fork('test/bench/fixture.ts', [String(largest), String(perSurvey)], {
    execArgv: ['--import', 'tsx'],
    env,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const seeded = Date.now();
  const details = await new Promise<Record<string, string>>((resolve, reject) => {
    fixture.once('message', (message) => resolve(message as Record<string, string>));
    fixture.once('exit', (code) => reject(new Error(`fixture exited with ${code}`)));
  });
  console.error(
    `fixture: ${largest} surveys x ${perSurvey} attempts seeded in ${fmt((Date.now() - seeded) / 1000, 1)} s`,
  );
  const measure = async (
    mode: 'floor' | 'reconcile',
    surveys: number,
    retained = false,
  ): Promise<RunnerResult> => {
    const flags = ['--import', 'tsx', ...(retained ? ['--expose-gc'] : [])];
    const { stdout } = await run(
      process.execPath,
      [...flags, 'test/bench/reconcile-runner.ts', mode, String(surveys)],
      {
        env: { ...env, BENCH_FIXTURE: JSON.stringify(details) },
        maxBuffer: 1 << 20,
      },
    );
    return JSON.parse(stdout.trim().split('\n').pop() as string) as RunnerResult;
  };
  try {
    const rows: Record<string, unknown>[] = [];
    // The first run writes a verdict on every attempt; later runs of the same window write only what changed.
    const first = await measure('reconcile', largest);
    for (const size of sizes) {
      const floors: RunnerResult[] = [];
      const steady: RunnerResult[] = [];
      for (let i = 0; i < repeat; i++) {
        floors.push(await measure('floor', size));
        steady.push(await measure('reconcile', size));
      }
      // A separate run that collects garbage before each memory sample: what the run holds, not what it churns.
      const retained = await measure('reconcile', size, true);
      const floorMs = median(floors.map((r) => r.wallMs));
      const steadyMs = median(steady.map((r) => r.wallMs));
      rows.push({
        surveys: size,
        items: steady[0]?.items,
        floorMs: fmt(floorMs),
        reconcileMs: fmt(steadyMs),
        ratio: fmt(steadyMs / floorMs, 2),
        floorPeakHeapMb: fmt(median(floors.map((r) => r.peakHeapMb)), 1),
        reconcilePeakHeapMb: fmt(median(steady.map((r) => r.peakHeapMb)), 1),
        reconcilePeakRssMb: fmt(median(steady.map((r) => r.peakRssMb)), 1),
        retainedHeapMb: fmt(retained.peakHeapMb, 1),
        marketplaceCalls: steady[0]?.marketplaceCalls,
        storeRequests: steady[0]?.storeRequests,
      });
    }
    const perSurveyMs = first.wallMs / largest;
    return {
      first: {
        surveys: largest,
        wallMs: fmt(first.wallMs),
        perSurveyMs: fmt(perSurveyMs),
        peakHeapMb: fmt(first.peakHeapMb, 1),
        storeRequests: first.storeRequests,
        marketplaceCalls: first.marketplaceCalls,
        extrapolated1000SurveysMin: fmt((perSurveyMs * 1000) / 60_000, 1),
      },
      rows,
    };
  } finally {
    fixture.disconnect();
  }
}
