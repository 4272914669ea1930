/**
 * The scheduled health check at the size of a large supplier: a run that cannot judge every survey before its
 * deadline leaves the rest without failing, and the next run starts with them, so no survey goes unwatched.
 */
import { describe, expect, it } from 'vitest';
import { healthCheck } from '../../functions/health/health-check';
import { createHealthHandler, HEALTH_NOTICE_MARGIN_MS } from '../../functions/health/health-handler';
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

  it('sends the notices it has time for, stores only those, and leaves the rest for the next run, which sends each once', async () => {
    const { endpoint, tableName } = await freshTable();
    const store = createHealthStore(createDocumentClient({ endpoint }), tableName);
    // Twenty surveys turning failing at once (a supplier-wide outage), each notice taking 100 ms to publish.
    const surveys = Array.from({ length: 20 }, (_, i) => String(3301 + i));
    const evaluatedAt = new Date().toISOString();
    const check = {
      evaluate: async () => {
        const stored = await store.getMany(surveys);
        return {
          evaluatedAt,
          surveys: surveys.map((surveyId) => ({
            surveyId,
            evaluation: {
              state: 'failing' as const,
              reasons: [
                { code: 'postbacks_stopped' as const, severity: 'failing' as const, detail: 'stopped' },
              ],
            },
            ...(stored.has(surveyId) ? { stored: stored.get(surveyId) } : {}),
          })),
          failed: [],
          left: [],
        };
      },
    };
    const sent: string[] = [];
    const handler = createHealthHandler({
      check: check as unknown as Parameters<typeof createHealthHandler>[0]['check'],
      store,
      notifier: {
        notify: async (notice) => {
          await new Promise((resolve) => setTimeout(resolve, 100));
          sent.push(notice.surveyId);
        },
      },
    });
    // A second and a half for notices before the margin: some of them, and the run does not fail.
    const first = await handler({}, lambdaContext('health', 'notices', HEALTH_NOTICE_MARGIN_MS + 1_500));
    expect(first.transitions.length).toBe(sent.length);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.length).toBeLessThan(surveys.length);
    expect(first.deferred).toBe(surveys.length - sent.length);
    expect((await store.getMany(surveys)).size).toBe(sent.length);
    // The next run starts at the first change not notified (before the surveys this run had no time to judge).
    expect(await store.resumePoint()).toBe(surveys[sent.length]);
    // The next run, with time enough: the rest, each once.
    const second = await handler({}, lambdaContext('health', 'notices', 60_000));
    expect(second.deferred).toBeUndefined();
    expect([...sent].sort()).toEqual(surveys);
    expect((await store.getMany(surveys)).size).toBe(surveys.length);
  }, 30_000);
});
