/**
 * The one way this product runs a list of tasks side by side: at most `concurrency` at once, started in list
 * order, and none started once the deadline is reached (a Lambda must answer before its time runs out, and a
 * task left for the next run is cheaper than one cut off half-way). A task that throws is reported as failed
 * with its error and does not stop the others; the caller decides what a failure means.
 */
import pLimit from 'p-limit';

export type TaskResult<T> =
  | { readonly status: 'done'; readonly value: T }
  | { readonly status: 'failed'; readonly error: unknown }
  /** Not started: the deadline was reached first (or `stopWhen` said so). */
  | { readonly status: 'left' };

export interface BoundedWorkOptions<T> {
  /** Tasks running at once (at least 1). */
  readonly concurrency: number;
  /** No task starts at or after this instant (less `reserveMs`). */
  readonly deadline?: Date;
  /** How long before the deadline to stop starting tasks (default 0). */
  readonly reserveMs?: number;
  readonly now?: () => Date;
  /** No task starts once this says so (the work found pointless for now: a dependency down); those are left. */
  readonly stopWhen?: () => boolean;
  /**
   * Called as each task ends or is left, in the order that happens. Awaited before the slot takes up another
   * task, so progress can be saved without more tasks running than the limit.
   */
  readonly onSettled?: (result: TaskResult<T>, index: number) => void | Promise<void>;
}

export interface BoundedWorkReport<T> {
  /** One per task, in task order. */
  readonly results: readonly TaskResult<T>[];
  /** Indexes of the tasks that finished, failed, or were left; done and failed in the order they ended. */
  readonly done: readonly number[];
  readonly failed: readonly number[];
  readonly left: readonly number[];
}

/** Runs the tasks with at most `concurrency` at once, starting none once the deadline is near. */
export async function runBounded<T>(
  tasks: readonly (() => Promise<T>)[],
  options: BoundedWorkOptions<T>,
): Promise<BoundedWorkReport<T>> {
  if (!Number.isInteger(options.concurrency) || options.concurrency < 1)
    throw new RangeError(`concurrency must be a positive integer, not ${options.concurrency}`);
  const now = options.now ?? (() => new Date());
  const stopAt =
    options.deadline === undefined ? undefined : options.deadline.getTime() - (options.reserveMs ?? 0);
  const limit = pLimit(options.concurrency);
  const results: TaskResult<T>[] = new Array(tasks.length);
  const done: number[] = [];
  const failed: number[] = [];
  const left: number[] = [];

  const runOne = async (task: () => Promise<T>, index: number) => {
    let result: TaskResult<T>;
    if ((stopAt !== undefined && now().getTime() >= stopAt) || options.stopWhen?.()) {
      result = { status: 'left' };
      left.push(index);
    } else {
      try {
        result = { status: 'done', value: await task() };
        done.push(index);
      } catch (error) {
        result = { status: 'failed', error };
        failed.push(index);
      }
    }
    results[index] = result;
    await options.onSettled?.(result, index);
  };

  await Promise.all(tasks.map((task, index) => limit(runOne, task, index)));
  return { results, done, failed, left: left.sort((a, b) => a - b) };
}

/** Throws the first failure (in the order they happened), if any task failed. */
export function throwIfFailed(report: BoundedWorkReport<unknown>): void {
  const first = report.failed[0];
  if (first === undefined) return;
  const result = report.results[first];
  if (result?.status === 'failed') throw result.error;
}

/** The values in task order, `leftAs(index)` for a task left at the deadline; throws the first failure. */
export function valuesOrThrow<T>(report: BoundedWorkReport<T>, leftAs: (index: number) => T): T[] {
  throwIfFailed(report);
  return report.results.map((result, index) => (result.status === 'done' ? result.value : leftAs(index)));
}
