/**
 * The scheduled health check at the size of a large supplier: a run that cannot judge every survey before its
 * deadline leaves the rest without failing, and the next run starts with them, so no survey goes unwatched.
 */
import { describe, expect, it } from 'vitest';
import { healthCheck } from '../../functions/health/health-check';
import { createHealthHandler } from '../../functions/health/health-handler';
import { DEFAULT_HEALTH_SETTINGS } from '../../functions/health/health-rules';
import {
  createDocumentClient,
  createHealthStore,
  createLedgerStore,
  createSurveyRegistry,
} from '../../functions/ledger/ledger-store';
import { lambdaContext } from '../../infra/local/api-gateway';
import { freshTable } from '../support/ledger';

describe('the health check against its deadline', () => {
  it('leaves the surveys it has no time for, and the next run starts with them', async () => {
    const { endpoint, tableName } = await freshTable();
    const client = createDocumentClient({ endpoint });
    const registry = createSurveyRegistry(client, tableName);
    const updatedAt = new Date().toISOString();
    for (const surveyId of ['3201', '3202', '3203'])
      await registry.put({ surveyId, state: 'active', verified: true, failures: 0, updatedAt });
    const ledger = createLedgerStore(client, tableName);
    // Each survey's traffic takes two seconds to read: one survey fits before the deadline.
    const slow = {
      ...ledger,
      attemptKeysOfSurvey: async (...args: Parameters<typeof ledger.attemptKeysOfSurvey>) => {
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        return ledger.attemptKeysOfSurvey(...args);
      },
    };
    const check = healthCheck({
      attempts: slow,
      registry,
      health: createHealthStore(client, tableName),
      settings: DEFAULT_HEALTH_SETTINGS,
      concurrency: 1,
    });
    const soon = () => ({ deadline: new Date(Date.now() + 700) });
    const first = await check.evaluate(new Date(), soon());
    expect(first.surveys.map((s) => s.surveyId)).toEqual(['3201']);
    expect(first.left).toEqual(['3202', '3203']);
    expect(first.failed).toEqual([]);
    const second = await check.evaluate(new Date(), soon());
    expect(second.surveys.map((s) => s.surveyId)).toEqual(['3202']);
    expect(second.left).toEqual(['3203', '3201']);
    // Without a deadline (the CLI) every survey is judged, in survey order.
    const all = await check.evaluate(new Date());
    expect(all.surveys.map((s) => s.surveyId)).toEqual(['3201', '3202', '3203']);

    // The scheduled handler keeps its margin from the Lambda's limit and does not fail for the surveys left.
    const handler = createHealthHandler({
      check,
      store: createHealthStore(client, tableName),
      notifier: { notify: async () => undefined },
    });
    // 2.6 s left: a quarter kept back, 1.95 s to judge in: one survey (the next would start after 2 s), the one the
    // last run left first (3203); the 0.6 s beyond its read is the margin a loaded machine needs before the limit.
    const summary = await handler({}, lambdaContext('health', 'deadline', 2_600));
    expect(summary.ok).toBe(1);
    // And again (3201): the handler stores where the next run starts, so a new container starts there too (3202).
    await handler({}, lambdaContext('health', 'deadline', 2_600));
    const coldStart = healthCheck({
      attempts: slow,
      registry,
      health: createHealthStore(client, tableName),
      settings: DEFAULT_HEALTH_SETTINGS,
      concurrency: 1,
    });
    const resumed = await coldStart.evaluate(new Date(), soon());
    expect(resumed.resumedFrom).toBe('3202');
    expect(resumed.surveys.map((s) => s.surveyId)).toEqual(['3202']);
  }, 30_000);
});
