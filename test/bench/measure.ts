/** What the benchmarks share: medians, number formatting, a signing key ring, and runners in processes of their own. */
import { type ChildProcess, fork } from 'node:child_process';

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

export const fmt = (n: number, digits = 0): string => n.toFixed(digits);

export const BENCH_KEY_RING = JSON.stringify({
  current: 'b1',
  b1: 'benchmark-signing-key-0123456789abcdefghij',
});

/** The environment every benchmark process gets: no SDK version warning, quiet logs unless a bench says otherwise. */
export const BENCH_ENV = {
  ...process.env,
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  POWERTOOLS_LOG_LEVEL: 'ERROR',
};

/**
 * Runs a TypeScript module in a fresh Node process (its output discarded, as a Lambda's would be) and resolves
 * with the first message it sends; rejects if it exits first.
 */
export function runInProcess<T>(module: string, args: string[] = [], env = BENCH_ENV): Promise<T> {
  const child = fork(module, args, {
    execArgv: ['--import', 'tsx'],
    env,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  return new Promise<T>((resolve, reject) => {
    child.once('message', (message) => {
      resolve(message as T);
      child.disconnect();
    });
    child.once('exit', (code) => reject(new Error(`${module} exited with ${code} before reporting`)));
  });
}

/** The first message a child process sends; rejects if it exits first. */
export function firstMessage<T>(child: ChildProcess): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    child.once('message', (message) => resolve(message as T));
    child.once('exit', (code) => reject(new Error(`exited with ${code} before reporting`)));
  });
}

/** The embedded engine in a process of its own, so a benchmark's CPU figures are its client's, not the engine's. */
export async function startEngineProcess(): Promise<{ process: ChildProcess; endpoint: string }> {
  const child = fork('test/bench/engine-process.ts', [], {
    execArgv: ['--import', 'tsx'],
    env: BENCH_ENV,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const { endpoint } = await firstMessage<{ endpoint: string }>(child);
  return { process: child, endpoint };
}

/** A distinct (private) address for the i-th simulated respondent, up to 2^24 of them. */
export const respondentAddress = (i: number): string => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
