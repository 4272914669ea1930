/**
 * Reconciliation scale: reconciling n surveys of 1,000 transactions against the local marketplace and engine,
 * each measurement a fresh process, against a floor that pages both sides without comparing or writing; and a
 * simulated week of the hourly schedule (reconcile-week.ts), in capacity units per attempt, for the cost model.
 * Both sides run from one bundle of the runner built as the functions are (house-build.ts): the code as deployed,
 * not as tsx transforms it on the fly (tsx keeps function names through a wrapper the bundles do not have).
 */
import { type ChildProcess, execFile, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { houseBuild } from './house-build';
import { BENCH_ENV as env, fmt, median, runInProcess } from './measure';

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
  readUnits: number;
  writeUnits: number;
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
  const dir = mkdtempSync(join(tmpdir(), 'reconcile-runner-'));
  const runner = join(dir, 'runner.mjs');
  await houseBuild('test/bench/reconcile-runner.ts', { outfile: runner });
  const measure = async (
    mode: 'floor' | 'reconcile',
    surveys: number,
    retained = false,
  ): Promise<RunnerResult> => {
    const flags = retained ? ['--expose-gc'] : [];
    const { stdout } = await run(process.execPath, [...flags, runner, mode, String(surveys)], {
      env: { ...env, BENCH_FIXTURE: JSON.stringify(details) },
      maxBuffer: 1 << 20,
    });
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
        // Per attempt of the run (about half the items are attempts): what one steady-state run consumes.
        readUnitsPerAttempt: fmt((steady[0]?.readUnits ?? 0) / ((steady[0]?.items ?? 1) / 2), 3),
        writeUnits: steady[0]?.writeUnits,
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
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What the hourly schedule consumes over a week, per attempt that arrived in it (reconcile-week.ts). */
export interface ReconcileWeek {
  /**
   * `full`: every day of the window re-checked every run (RECONCILE_FRESH_DAYS=7); `default`: the defaults
   * (today fresh, older days when something changed); `two`: today and yesterday fresh (RECONCILE_FRESH_DAYS=2,
   * the default before late hits flagged their day).
   */
  readonly policy: WeekPolicy;
  readonly readUnitsPerAttemptWeek: number;
  readonly writeUnitsPerAttemptWeek: number;
  /** Of the reads: the attempts themselves (day index and batch reads), which grow with the traffic. */
  readonly attemptReadUnitsPerAttemptWeek: number;
  /** Of the reads: per survey and run whatever its traffic (its state and day summaries). */
  readonly otherReadUnitsPerSurveyRun: number;
  /** Of the writes: the attempts' own (verdicts), which grow with the traffic. */
  readonly attemptWriteUnitsPerAttemptWeek: number;
  /** Of the writes: per survey and run (its day summaries and state, when they change). */
  readonly otherWriteUnitsPerSurveyRun: number;
  /** Per run whatever the number of surveys (run state, lease, finished run, registry listing). */
  readonly runReadUnitsPerRun: number;
  readonly runWriteUnitsPerRun: number;
  readonly runs: number;
  readonly surveys: number;
  readonly attempts: number;
  readonly msPerRun: number;
}

/** `lean`: the feed and matched verdicts implied (`matchedVerdicts`). */
type WeekPolicy = 'full' | 'default' | 'two' | 'feed' | 'lean';

interface WeekReport {
  policy: WeekPolicy;
  runs: number;
  surveys: number;
  attempts: number;
  readUnits: number;
  attemptReadUnits: number;
  writeUnits: number;
  attemptWriteUnits: number;
  runReadUnits: number;
  runWriteUnits: number;
  msPerRun: number;
}

/** The simulated week under each policy, each in its own process. */
export async function reconciliationWeek(
  options: { surveys: number; perHour: number; hours: number } = { surveys: 2, perHour: 2, hours: 168 },
): Promise<ReconcileWeek[]> {
  const rows: ReconcileWeek[] = [];
  for (const policy of ['full', 'default', 'two', 'feed', 'lean'] as const) {
    const r = await runInProcess<WeekReport>('test/bench/reconcile-week.ts', [
      policy,
      String(options.surveys),
      String(options.perHour),
      String(options.hours),
    ]);
    // The window is full from the first measured run, so units per hour over attempts per hour is what one
    // attempt costs over the week (and the day around it) it spends in the window.
    const round = (n: number) => Math.round(n * 100) / 100;
    rows.push({
      policy,
      readUnitsPerAttemptWeek: round(r.readUnits / r.attempts),
      writeUnitsPerAttemptWeek: round(r.writeUnits / r.attempts),
      attemptReadUnitsPerAttemptWeek: round(r.attemptReadUnits / r.attempts),
      otherReadUnitsPerSurveyRun: round(
        (r.readUnits - r.attemptReadUnits - r.runReadUnits) / (r.runs * r.surveys),
      ),
      attemptWriteUnitsPerAttemptWeek: round(r.attemptWriteUnits / r.attempts),
      otherWriteUnitsPerSurveyRun: round(
        (r.writeUnits - r.attemptWriteUnits - r.runWriteUnits) / (r.runs * r.surveys),
      ),
      runReadUnitsPerRun: round(r.runReadUnits / r.runs),
      runWriteUnitsPerRun: round(r.runWriteUnits / r.runs),
      runs: r.runs,
      surveys: r.surveys,
      attempts: r.attempts,
      msPerRun: Math.round(r.msPerRun),
    });
  }
  return rows;
}
