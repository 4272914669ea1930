/**
 * The scheduled handlers tell their marketplace client when the run's calls must stop: a little before the
 * Lambda's own limit, so a hanging call gives up instead of the function dying in it.
 */
import type { Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { createRedirectSyncHandler } from '../../functions/marketplace/redirect-sync-handler';
import { createReconcileHandler } from '../../functions/reconciliation/reconcile-handler';
import { CALLS_STOP_BEFORE_LIMIT_MS, runDeadline } from '../../functions/runtime/run-deadline';

const REMAINING_MS = 300_000;
const context = {
  functionName: 'scheduled',
  functionVersion: '1',
  invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:scheduled',
  memoryLimitInMB: '512',
  awsRequestId: 'request-1',
  getRemainingTimeInMillis: () => REMAINING_MS,
} as unknown as Context;

describe('a scheduled run', () => {
  it("sets its calls' end just before the Lambda's limit, before any call is made (reconcile, redirect sync)", async () => {
    const expected = () => Date.now() + REMAINING_MS - CALLS_STOP_BEFORE_LIMIT_MS;
    const reconcileCalls = runDeadline();
    let seenByReconcile: number | undefined;
    await createReconcileHandler({
      windowDays: 7,
      calls: reconcileCalls,
      engine: {
        scheduled: async () => {
          seenByReconcile = reconcileCalls.stopAt();
          return undefined;
        },
      },
    })({}, context);
    expect(Math.abs((seenByReconcile ?? 0) - expected())).toBeLessThan(1_000);

    const syncCalls = runDeadline();
    let seenBySync: number | undefined;
    await createRedirectSyncHandler({
      calls: syncCalls,
      configuration: {
        sync: async () => {
          seenBySync = syncCalls.stopAt();
          return { since: '', discovered: 0, retried: 0, reverified: 0, malformed: [], results: [] };
        },
      },
    })({}, context);
    expect(Math.abs((seenBySync ?? 0) - expected())).toBeLessThan(1_000);
  });
});

describe('an unfinished reconciliation run', () => {
  it('resumes itself at once when its time ran out, not when the marketplace stopped answering', async () => {
    const resumed: string[] = [];
    const handlerFor = (marketplaceUnavailable: boolean) =>
      createReconcileHandler({
        windowDays: 7,
        resume: async (_arn, runId) => {
          resumed.push(runId);
        },
        engine: {
          scheduled: async () => ({
            runId: marketplaceUnavailable ? 'down' : 'out-of-time',
            days: [],
            outcomes: [],
            complete: false,
            ...(marketplaceUnavailable ? { marketplaceUnavailable } : {}),
          }),
        },
      });
    await handlerFor(true)({}, context);
    await handlerFor(false)({}, context);
    expect(resumed).toEqual(['out-of-time']);
  });
});
