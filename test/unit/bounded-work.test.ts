/**
 * The bounded-work helper: never more tasks at once than the limit, started in order, none started once the
 * deadline is reached, and each task's error reported with that task while the others still run.
 */
import { describe, expect, it } from 'vitest';
import { runBounded, throwIfFailed, valuesOrThrow } from '../../functions/shared/bounded-work';

const tick = (ms = 1) => new Promise((resolve) => setTimeout(resolve, ms));

describe('runBounded', () => {
  it('never runs more tasks at once than the limit, and starts them in list order', async () => {
    let inFlight = 0;
    let peak = 0;
    const started: number[] = [];
    const tasks = Array.from({ length: 20 }, (_, i) => async () => {
      started.push(i);
      inFlight++;
      peak = Math.max(peak, inFlight);
      await tick((i * 7) % 5);
      inFlight--;
      return i * 2;
    });
    const report = await runBounded(tasks, { concurrency: 3 });
    expect(peak).toBe(3);
    expect(started).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(report.results).toEqual(Array.from({ length: 20 }, (_, i) => ({ status: 'done', value: i * 2 })));
    expect([...report.done].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(report.failed).toEqual([]);
    expect(report.left).toEqual([]);
  });

  it('starts no task once the deadline is reached, and reports those left', async () => {
    let clock = 0;
    const now = () => new Date(clock);
    const ran: number[] = [];
    const tasks = Array.from({ length: 6 }, (_, i) => async () => {
      ran.push(i);
      clock += 10;
      return i;
    });
    const report = await runBounded(tasks, { concurrency: 1, deadline: new Date(30), now });
    expect(ran).toEqual([0, 1, 2]);
    expect(report.done).toEqual([0, 1, 2]);
    expect(report.left).toEqual([3, 4, 5]);
    expect(report.results.slice(3)).toEqual([{ status: 'left' }, { status: 'left' }, { status: 'left' }]);
    expect(valuesOrThrow(report, (i) => -i)).toEqual([0, 1, 2, -3, -4, -5]);
  });

  it('keeps a reserve before the deadline', async () => {
    let clock = 0;
    const tasks = Array.from({ length: 6 }, (_, i) => async () => {
      clock += 10;
      return i;
    });
    const report = await runBounded(tasks, {
      concurrency: 1,
      deadline: new Date(50),
      reserveMs: 25,
      now: () => new Date(clock),
    });
    expect(report.done).toEqual([0, 1, 2]);
    expect(report.left).toEqual([3, 4, 5]);
  });

  it('starts nothing when the deadline has already passed', async () => {
    let ran = 0;
    const report = await runBounded(
      [1, 2, 3].map(() => async () => ran++),
      { concurrency: 2, deadline: new Date(Date.now() - 1) },
    );
    expect(ran).toBe(0);
    expect(report.left).toEqual([0, 1, 2]);
  });

  it('reports an error with its task, and the other tasks still run', async () => {
    const report = await runBounded(
      [0, 1, 2, 3, 4].map((i) => async () => {
        await tick();
        if (i === 1 || i === 3) throw new Error(`task ${i} broke`);
        return i;
      }),
      { concurrency: 2 },
    );
    expect(report.results[1]).toEqual({ status: 'failed', error: new Error('task 1 broke') });
    expect(report.results[3]).toEqual({ status: 'failed', error: new Error('task 3 broke') });
    expect([...report.done].sort()).toEqual([0, 2, 4]);
    expect([...report.failed].sort()).toEqual([1, 3]);
    expect(() => throwIfFailed(report)).toThrow(/task [13] broke/);
    expect(() => valuesOrThrow(report, () => -1)).toThrow(/task [13] broke/);
  });

  it('throws the failure that happened first', async () => {
    const report = await runBounded(
      [30, 1].map((ms, i) => async () => {
        await tick(ms);
        throw new Error(`task ${i}`);
      }),
      { concurrency: 2 },
    );
    expect(report.failed).toEqual([1, 0]);
    expect(() => throwIfFailed(report)).toThrow('task 1');
  });

  it('awaits each settle callback before that slot takes up another task', async () => {
    const events: string[] = [];
    await runBounded(
      [0, 1, 2].map((i) => async () => {
        events.push(`start ${i}`);
        return i;
      }),
      {
        concurrency: 1,
        onSettled: async (result, index) => {
          await tick();
          events.push(`settled ${index} ${result.status}`);
        },
      },
    );
    expect(events).toEqual([
      'start 0',
      'settled 0 done',
      'start 1',
      'settled 1 done',
      'start 2',
      'settled 2 done',
    ]);
  });

  it('refuses a limit below one', async () => {
    await expect(runBounded([], { concurrency: 0 })).rejects.toThrow(RangeError);
  });
});
