/**
 * `npm run bench`: every benchmark, each figure a median over several runs with its floor measured in the same
 * run and the ratio between them. Sizes and repeats can be set with BENCH_SURVEYS (e.g. "8,16,32"),
 * BENCH_PER_SURVEY and BENCH_REPEAT. Results print as a table and as JSON (BENCH_JSON=path to save them).
 */
import { type ChildProcess, execFile, fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { financeQueries } from './finance-queries';

const run = promisify(execFile);
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
const sizes = (process.env.BENCH_SURVEYS ?? '8,16,32').split(',').map(Number);
const perSurvey = Number(process.env.BENCH_PER_SURVEY ?? 1000);
const repeat = Number(process.env.BENCH_REPEAT ?? 3);
const env = {
  ...process.env,
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  POWERTOOLS_LOG_LEVEL: 'ERROR',
};

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};
const fmt = (n: number, digits = 0) => n.toFixed(digits);

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

async function reconciliationScale() {
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

const started = Date.now();
const results: Record<string, unknown> = {};
console.log(`Reconciliation scale (${perSurvey} transactions and attempts per survey; medians of ${repeat})`);
const reconciliation = await reconciliationScale();
results.reconciliation = reconciliation;
console.table(reconciliation.rows);
console.log('first run (writes every verdict):');
console.table([reconciliation.first]);
const financeOptions = {
  surveys: Number(process.env.BENCH_FINANCE_SURVEYS ?? 1000),
  days: Number(process.env.BENCH_FINANCE_DAYS ?? 30),
  discrepanciesPerSurveyDay: 2,
  repeat,
};
console.log(
  `\nFinance queries (${financeOptions.days} days x ${financeOptions.surveys} surveys; medians of ${repeat})`,
);
const financeResults = await financeQueries(financeOptions);
results.finance = financeResults;
console.error(`finance fixture seeded in ${fmt(financeResults.seedSeconds, 1)} s`);
console.table(financeResults.rows);
console.log(`benchmarks took ${fmt((Date.now() - started) / 1000)} s`);
if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, `${JSON.stringify(results, null, 2)}\n`);
