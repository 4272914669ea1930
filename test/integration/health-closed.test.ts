/**
 * A survey the marketplace closed (`closedAt`, recorded by the redirect sync) is watched no more: the health check
 * ends it `ok` like a removed survey, for a week after its closure, and then leaves it out.
 */
import { describe, expect, it } from 'vitest';
import { healthView } from '../../functions/cli/health-command';
import { healthCheck } from '../../functions/health/health-check';
import { DEFAULT_HEALTH_SETTINGS } from '../../functions/health/health-rules';
import {
  createDocumentClient,
  createHealthStore,
  createLedgerStore,
  createSurveyRegistry,
} from '../../functions/ledger/ledger-store';
import { freshTable } from '../support/ledger';

describe('survey health of closed surveys', () => {
  it('a survey closed at the marketplace ends ok and is left out a week after its closure; an open one is judged', async () => {
    const { endpoint, tableName } = await freshTable();
    const client = createDocumentClient({ endpoint });
    const registry = createSurveyRegistry(client, tableName);
    const now = new Date('2026-11-23T12:00:00.000Z');
    const ago = (days: number) => new Date(now.getTime() - days * 86_400_000).toISOString();
    const base = { state: 'active', verified: false, failures: 3, updatedAt: ago(1) } as const;
    // Unverified with a read-back that differs: failing drift while it is watched.
    const drift = { ...base, lastError: 'read-back differs in pstbck', lastErrorAt: ago(1) };
    await registry.put({ surveyId: '3101', ...drift, closedAt: ago(1) });
    await registry.put({ surveyId: '3102', ...drift, closedAt: ago(8) });
    await registry.put({ surveyId: '3103', ...drift });
    const report = await healthCheck({
      attempts: createLedgerStore(client, tableName),
      registry,
      health: createHealthStore(client, tableName),
      settings: DEFAULT_HEALTH_SETTINGS,
      concurrency: 2,
    }).evaluate(now);
    const bySurvey = new Map(report.surveys.map((s) => [s.surveyId, s]));
    expect(bySurvey.get('3101')).toMatchObject({
      removed: true,
      closed: true,
      evaluation: { state: 'ok', reasons: [] },
    });
    // Shown as closed, not as removed here (`redirects remove` was never run).
    const shown = healthView(report).surveys.find((s) => s.surveyId === '3101');
    expect(shown).toMatchObject({ closed: true });
    expect(shown).not.toHaveProperty('removed');
    expect(bySurvey.has('3102')).toBe(false);
    expect(bySurvey.get('3103')?.evaluation.state).toBe('failing');
    // Named (the CLI's health --survey), one closed longer ago is still said to be closed, not judged as live.
    const named = await healthCheck({
      attempts: createLedgerStore(client, tableName),
      registry,
      health: createHealthStore(client, tableName),
      settings: DEFAULT_HEALTH_SETTINGS,
      concurrency: 2,
    }).evaluate(now, { surveys: ['3102'] });
    expect(named.surveys).toEqual([expect.objectContaining({ surveyId: '3102', removed: true })]);
  });
});
