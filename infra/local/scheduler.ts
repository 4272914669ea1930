/**
 * A local stand-in for EventBridge Scheduler: runs a scheduled function every interval (and on demand), one run
 * at a time, with a Lambda-like context and deadline.
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';
import { SCHEDULED_FUNCTIONS, type ScheduledFunctionName } from '../routes';
import { lambdaContext } from './api-gateway';
import { invokeHandler } from './invocation';

type ScheduledHandler = (event: unknown, context: Context) => Promise<unknown>;

export interface LocalSchedule {
  /** Runs the function once now (waiting for a run in progress first) and returns its result. */
  runNow(): Promise<unknown>;
  stop(): Promise<void>;
}

export async function startLocalSchedule(
  name: ScheduledFunctionName,
  intervalMs: number,
  onResult: (result: unknown, error?: unknown) => void,
  timeoutMs = 300_000,
): Promise<LocalSchedule> {
  const { handler } = (await import(/* @vite-ignore */ `../../${SCHEDULED_FUNCTIONS[name].entry}`)) as {
    handler: ScheduledHandler;
  };
  let running: Promise<unknown> = Promise.resolve();
  const run = () => {
    running = running.then(async () => {
      const event = {
        source: 'local.scheduler',
        'detail-type': 'Scheduled Event',
        id: randomUUID(),
        time: new Date().toISOString(),
      };
      try {
        const result = await invokeHandler(handler, event, lambdaContext(name, randomUUID(), timeoutMs));
        onResult(result);
        return result;
      } catch (error) {
        onResult(undefined, error);
        return undefined;
      }
    });
    return running;
  };
  const timer = intervalMs > 0 ? setInterval(run, intervalMs) : undefined;
  return {
    runNow: run,
    stop: async () => {
      if (timer) clearInterval(timer);
      await running;
    },
  };
}
