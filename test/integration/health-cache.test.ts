/**
 * The health check in a warm container: attempts both channels have reported are read once and then taken from
 * the container's cache; attempts still waiting for a channel are read every run; what the rules judge is the
 * same as without the cache. On the embedded engine, hits written by the ledger store.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { healthCheck } from '../../functions/health/health-check';
import { DEFAULT_HEALTH_SETTINGS } from '../../functions/health/health-rules';
import { type SightingsCache, sightingsCache } from '../../functions/health/health-window';
import {
  createDocumentClient,
  createHealthStore,
  createLedgerStore,
  createSurveyRegistry,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import type { Outcome } from '../../functions/receiving/outcome';
import { freshTable } from '../support/ledger';

const MINUTE = 60_000;
const NOW = Date.parse('2026-11-20T18:00:00.000Z');
const SURVEY = '4101';

let ledger: LedgerStore;
let check: (cache?: SightingsCache) => ReturnType<typeof healthCheck>;
/** The tokens of the attempts each run read from the table. */
let read: string[];

beforeEach(async () => {
  const { endpoint, tableName } = await freshTable();
  const client = createDocumentClient({ endpoint });
  ledger = createLedgerStore(client, tableName);
  const registry = createSurveyRegistry(client, tableName);
  await registry.put({
    surveyId: SURVEY,
    state: 'active',
    verified: true,
    failures: 0,
    updatedAt: new Date(NOW - 60 * MINUTE).toISOString(),
  });
  read = [];
  const attempts = {
    ...ledger,
    attemptsAt: async (keys: Parameters<LedgerStore['attemptsAt']>[0]) => {
      const found = await ledger.attemptsAt(keys);
      read.push(...found.map((a) => a.token));
      return found;
    },
  };
  check = (cache) =>
    healthCheck({
      attempts,
      registry,
      health: createHealthStore(client, tableName),
      settings: DEFAULT_HEALTH_SETTINGS,
      concurrency: 1,
      cache,
    });
});

const hit = (channel: 'redirect' | 'postback', token: string, outcome: Outcome, minutesAgo: number) =>
  ledger.recordHit(
    { channel, surveyId: SURVEY, outcome, pid: `p-${token}`, token, source: 'query' },
    new Date(NOW - minutesAgo * MINUTE),
  );

const runAt = async (cache: SightingsCache | undefined, minutesLater: number) => {
  read = [];
  const report = await check(cache).evaluate(new Date(NOW + minutesLater * MINUTE));
  return { evaluation: report.surveys[0]?.evaluation, read: [...read].sort() };
};

describe('the health check in a warm container', () => {
  it('reads an attempt until both channels have reported, then no more; judges as without the cache', async () => {
    // Success redirects with their postbacks, and success redirects still waiting for theirs (over the grace).
    for (const [i, token] of ['a', 'b', 'c'].entries()) {
      await hit('redirect', token, 'success', 20 - i);
      await hit('postback', token, 'success', 19 - i);
    }
    for (const [i, token] of ['w', 'x', 'y', 'z'].entries()) await hit('redirect', token, 'success', 20 - i);
    const cache = sightingsCache();

    const first = await runAt(cache, 0);
    expect(first.read).toEqual(['a', 'b', 'c', 'w', 'x', 'y', 'z']);
    expect(first.evaluation?.reasons.map((r) => r.code)).toEqual(['success_without_postback']);
    expect(cache.size).toBe(3);

    const second = await runAt(cache, 1);
    expect(second.read).toEqual(['w', 'x', 'y', 'z']);
    expect(second.evaluation).toEqual((await runAt(undefined, 1)).evaluation);

    // The waiting ones get their postbacks: read once more, then settled too.
    for (const token of ['w', 'x', 'y', 'z']) await hit('postback', token, 'success', -2);
    const third = await runAt(cache, 3);
    expect(third.read).toEqual(['w', 'x', 'y', 'z']);
    expect(third.evaluation?.state).toBe('ok');
    expect((await runAt(cache, 4)).read).toEqual([]);
    expect((await runAt(cache, 4)).evaluation).toEqual((await runAt(undefined, 4)).evaluation);
  });

  it('forgets attempts once they are older than the span the rules read', async () => {
    await hit('redirect', 'old', 'fail', 25);
    await hit('postback', 'old', 'fail', 24);
    const cache = sightingsCache();
    await runAt(cache, 0);
    expect(cache.size).toBe(1);
    // Thirty minutes on, the attempt is out of the span: not read, and dropped from the cache.
    await hit('redirect', 'new', 'fail', -30);
    await hit('postback', 'new', 'fail', -30);
    const later = await runAt(cache, 31);
    expect(later.read).toEqual(['new']);
    expect(cache.size).toBe(1);
  });
});
