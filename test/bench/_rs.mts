import { type ChildProcess, execFile, fork } from 'node:child_process';
import { promisify } from 'node:util';
import { BENCH_ENV as env, median } from './measure';

const run = promisify(execFile);
const n = Number(process.argv[2] ?? 8);
const rounds = Number(process.argv[3] ?? 5);
const fixture: ChildProcess = fork('test/bench/fixture.ts', [String(n), '1000'], {
  execArgv: ['--import', 'tsx'],
  env,
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
const details = await new Promise<Record<string, string>>((r) =>
  fixture.once('message', (m) => r(m as Record<string, string>)),
);
const measure = async (mode: string, extra: string[] = [], e: Record<string, string> = {}) => {
  const { stdout } = await run(
    process.execPath,
    ['--import', 'tsx', ...extra, 'test/bench/reconcile-runner.ts', mode, String(n)],
    { env: { ...env, ...e, BENCH_FIXTURE: JSON.stringify(details) }, maxBuffer: 1 << 24 },
  );
  return JSON.parse(stdout.trim().split('\n').pop() as string);
};
await measure('reconcile');
const f: number[] = [],
  r: number[] = [];
for (let i = 0; i < rounds; i++) {
  f.push((await measure('floor')).wallMs);
  const x = await measure('reconcile', [], process.env.TRACE ? { TRACE_REQ: '1' } : {});
  r.push(x.wallMs);
  if (i === 0) console.log('store', x.storeRequests, 'mk', x.marketplaceCalls);
}
console.log(
  'floor',
  f.map(Math.round),
  'rec',
  r.map(Math.round),
  'ratio',
  (median(r) / median(f)).toFixed(3),
);
if (process.env.PROF) await measure('reconcile', ['--cpu-prof', '--cpu-prof-dir=/tmp/rs']);
fixture.disconnect();
