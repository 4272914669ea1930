/**
 * The survey health check against the engine, on ledger items the real receivers wrote: which surveys turn
 * failing and why, one notice per transition, the state item written only on change (counted at a recording
 * proxy), and the CLI's JSON.
 *
 * The hits are sent with the clock set back, so the runs (given their own `now`) see traffic of the right age.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { healthCheck } from '../../functions/health/health-check';
import { createHealthHandler, type HealthRunSummary } from '../../functions/health/health-handler';
import { DEFAULT_HEALTH_SETTINGS } from '../../functions/health/health-rules';
import type { HealthNotice, Notifier } from '../../functions/health/notifier';
import {
  createDocumentClient,
  createHealthStore,
  createLedgerStore,
  createSurveyRegistry,
  type HealthStore,
  type SurveyRegistration,
} from '../../functions/ledger/ledger-store';
import type { Outcome } from '../../functions/receiving/outcome';
import { lambdaContext } from '../../infra/local/api-gateway';
import { apiEvent, filledUrl, type Handler, invoke } from '../support/api-events';
import { type EngineProxy, startEngineProxy } from '../support/engine-proxy';
import { receivers } from '../support/handlers';
import { freshTable, TEST_KEY_RING } from '../support/ledger';

const MINUTE = 60_000;
/** The real time the test began; every run and hit is placed relative to it. */
const R = Math.floor(Date.now() / MINUTE) * MINUTE;
const at = (minutes: number) => new Date(R + minutes * MINUTE);
const run = promisify(execFile);

let proxy: EngineProxy;
let table: { endpoint: string; tableName: string };
let redirect: Handler;
let postback: Handler;
let retiredKeyPostback: Handler;
let health: HealthStore;
const notices: HealthNotice[] = [];
let failNotices = false;
const notifier: Notifier = {
  async notify(notice) {
    if (failNotices) throw new Error('topic unreachable (injected)');
    notices.push(notice);
  },
};

const SURVEYS = { stopped: '3001', healthy: '3002', quiet: '3003', staleKey: '3004', fewStale: '3005' };

/** A survey registered here an hour ago, verified: the health check watches it. */
const watched = (surveyId: string): SurveyRegistration => ({
  surveyId,
  state: 'active',
  verified: true,
  failures: 0,
  updatedAt: at(-60).toISOString(),
});

beforeAll(async () => {
  table = await freshTable();
  proxy = await startEngineProxy(table.endpoint);
  ({ redirect, postback } = await receivers({ endpoint: proxy.endpoint, tableName: table.tableName }));
  ({ postback: retiredKeyPostback } = await receivers({
    endpoint: proxy.endpoint,
    tableName: table.tableName,
    keyRing: JSON.stringify({ ...JSON.parse(TEST_KEY_RING), retire: { k1: '2020-01-01T00:00:00Z' } }),
  }));
  const client = createDocumentClient({ endpoint: proxy.endpoint });
  health = createHealthStore(client, table.tableName);
  const registry = createSurveyRegistry(client, table.tableName);
  for (const surveyId of Object.values(SURVEYS)) await registry.put(watched(surveyId));
});
afterAll(() => proxy.stop());
afterEach(() => {
  vi.useRealTimers();
});

/** Sends hits as if it were `minutes` from R. */
async function hitsAt(minutes: number, send: () => Promise<void>) {
  vi.useFakeTimers({ toFake: ['Date'], now: at(minutes) });
  try {
    await send();
  } finally {
    vi.useRealTimers();
  }
}

const ids = (surveyId: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({
    pid: `pid-${surveyId}-${i}`,
    token: `t-${surveyId}-${i}-${randomUUID()}`,
  }));
const attempts = Object.fromEntries(Object.values(SURVEYS).map((s) => [s, ids(s, 6)]));
let respondents = 0;
const hit = async (
  handler: Handler,
  channel: 'redirect' | 'postback',
  surveyId: string,
  outcome: Outcome,
  who: { pid: string; token: string },
  kid?: string,
) => {
  // Each respondent's browser from its own address: the rules count redirects per sender.
  const result = await invoke(
    handler,
    apiEvent('GET', filledUrl(TEST_KEY_RING, channel, surveyId, outcome, who, kid), {
      sourceIp: `198.51.100.${(respondents++ % 250) + 1}`,
    }),
  );
  if (channel === 'redirect') expect(result.statusCode).toBeLessThan(400);
  else expect(result.statusCode).toBe(kid ? 403 : 200);
};

const handlerAt = (minutes: number) =>
  createHealthHandler({
    check: healthCheck({
      attempts: createLedgerStore(createDocumentClient({ endpoint: proxy.endpoint }), table.tableName),
      registry: createSurveyRegistry(createDocumentClient({ endpoint: proxy.endpoint }), table.tableName),
      health,
      settings: DEFAULT_HEALTH_SETTINGS,
      concurrency: 2,
    }),
    store: health,
    notifier,
    now: () => at(minutes),
  });
const runAt = async (minutes: number) => {
  const start = proxy.operations.length;
  const summary = (await handlerAt(minutes)(
    undefined,
    lambdaContext('health', randomUUID()),
  )) as HealthRunSummary;
  return {
    summary,
    writes: proxy.operations.slice(start).filter((op) => /Put|Update|Delete|Write/.test(op)),
  };
};

describe('the survey health check on real ledger items', () => {
  beforeAll(async () => {
    await hitsAt(-25, async () => {
      for (const who of attempts[SURVEYS.stopped] ?? [])
        await hit(redirect, 'redirect', SURVEYS.stopped, 'fail', who);
      for (const who of attempts[SURVEYS.healthy] ?? []) {
        await hit(redirect, 'redirect', SURVEYS.healthy, 'success', who);
        await hit(postback, 'postback', SURVEYS.healthy, 'success', who);
      }
    });
    await hitsAt(-20, async () => {
      for (const who of attempts[SURVEYS.staleKey] ?? [])
        await hit(retiredKeyPostback, 'postback', SURVEYS.staleKey, 'success', who, 'k1');
      for (const who of (attempts[SURVEYS.fewStale] ?? []).slice(0, 2))
        await hit(retiredKeyPostback, 'postback', SURVEYS.fewStale, 'success', who, 'k1');
    });
  });

  it('turns the survey whose postbacks stopped failing, with its evidence, and notifies each failing survey once', async () => {
    const { summary, writes } = await runAt(-12);
    const states = Object.fromEntries(
      Object.values(SURVEYS).map((s) => [s, summary.transitions.find((t) => t.surveyId === s)?.to ?? 'ok']),
    );
    expect(states).toEqual({
      [SURVEYS.stopped]: 'failing',
      [SURVEYS.healthy]: 'ok',
      [SURVEYS.quiet]: 'ok',
      [SURVEYS.staleKey]: 'failing',
      [SURVEYS.fewStale]: 'warning',
    });
    expect(summary).toMatchObject({ ok: 2, warning: 1, failing: 2, turnedFailing: 2, recovered: 0 });
    // Three surveys changed: three writes, and a claim on each of the two notices (sent once, whatever runs beside).
    // The ok ones (never stored) cost nothing.
    expect(writes).toEqual(['PutItem', 'PutItem', 'PutItem', 'PutItem', 'PutItem']);
    expect(notices.map((n) => [n.surveyId, n.kind]).sort()).toEqual([
      [SURVEYS.stopped, 'failing'],
      [SURVEYS.staleKey, 'failing'],
    ]);
    const stopped = notices.find((n) => n.surveyId === SURVEYS.stopped);
    expect(stopped?.reasons.map((r) => r.code)).toEqual(['postbacks_stopped']);
    expect(stopped?.reasons[0]?.detail).toContain('6 redirects first seen');
    expect(stopped?.reasons[0]?.detail.match(/"pid-3001-\d"/g)).toHaveLength(3);
    expect(stopped?.reasons[0]?.detail).toContain(`redirects show --survey ${SURVEYS.stopped}`);
    const stale = notices.find((n) => n.surveyId === SURVEYS.staleKey);
    expect(stale?.reasons).toEqual([
      expect.objectContaining({ code: 'refused_postbacks', severity: 'failing' }),
    ]);
    // Refused postbacks are counted per survey: the other survey's two are its own.
    expect(stale?.reasons[0]?.detail).toContain('6 postbacks for this survey refused');
    expect(stale?.reasons[0]?.detail).toContain('6 signature_retired_key');
    const stored = await health.getMany([SURVEYS.stopped, SURVEYS.fewStale, SURVEYS.quiet]);
    expect(stored.get(SURVEYS.stopped)).toMatchObject({
      state: 'failing',
      since: at(-12).toISOString(),
      history: [{ at: at(-12).toISOString(), from: 'ok', to: 'failing', reasons: ['postbacks_stopped'] }],
    });
    expect(stored.get(SURVEYS.fewStale)?.reasons[0]?.detail).toContain('2 signature_retired_key');
    expect(stored.has(SURVEYS.quiet)).toBe(false);
  });

  it('the next run, nothing having changed, writes nothing and notifies no one', async () => {
    const before = notices.length;
    const { summary, writes } = await runAt(-11);
    expect(summary).toMatchObject({ failing: 2, turnedFailing: 0, recovered: 0, transitions: [] });
    expect(writes).toEqual([]);
    expect(notices).toHaveLength(before);
  });

  it('the CLI prints each survey with --json: its state, since when and why, storing nothing', async () => {
    const start = proxy.operations.length;
    const { stdout } = await run(
      'node_modules/.bin/tsx',
      [
        'functions/cli/main.ts',
        'health',
        '--survey',
        SURVEYS.stopped,
        '--survey',
        SURVEYS.staleKey,
        '--json',
      ],
      {
        env: {
          ...process.env,
          DYNAMODB_ENDPOINT: proxy.endpoint,
          TABLE_NAME: table.tableName,
          SIGNING_KEYS: TEST_KEY_RING,
          PUBLIC_BASE_URL: 'https://hits.test',
          HEALTH_WINDOW_MINUTES: '15',
          HEALTH_GRACE_MINUTES: '10',
          HEALTH_STOPPED_MINUTES: '30',
        },
      },
    );
    const view = JSON.parse(stdout) as Record<string, unknown> & { surveys: Record<string, unknown>[] };
    expect(Object.keys(view).sort()).toEqual(['generatedAt', 'surveys']);
    expect(view.surveys.map((s) => Object.keys(s).sort())).toEqual([
      ['reasons', 'since', 'state', 'surveyId'],
      ['reasons', 'since', 'state', 'surveyId'],
    ]);
    const [stopped, stale] = view.surveys;
    // Still failing now: since is the stored transition's time.
    expect(stopped).toMatchObject({
      surveyId: SURVEYS.stopped,
      state: 'failing',
      since: at(-12).toISOString(),
    });
    expect(stopped?.reasons).toEqual([
      { code: 'postbacks_stopped', detail: expect.stringContaining('6 redirects') },
    ]);
    // Its refusals have left the window by now: ok now, which nothing stored yet, so since is now.
    expect(stale).toMatchObject({
      surveyId: SURVEYS.staleKey,
      state: 'ok',
      reasons: [],
      since: view.generatedAt,
    });
    expect(proxy.operations.slice(start).filter((op) => /Put|Update|Delete|Write/.test(op))).toEqual([]);
  }, 30_000);

  it('a notice that cannot be sent fails the run and stores nothing; the next run sends and stores it', async () => {
    await hitsAt(-9, async () => {
      for (const who of attempts[SURVEYS.stopped] ?? [])
        await hit(postback, 'postback', SURVEYS.stopped, 'fail', who);
    });
    failNotices = true;
    const before = notices.length;
    await expect(runAt(-8)).rejects.toThrow(/incomplete for 1 surveys: 3001/);
    expect((await health.getMany([SURVEYS.stopped])).get(SURVEYS.stopped)?.state).toBe('failing');
    failNotices = false;
    const { summary, writes } = await runAt(-7);
    expect(summary).toMatchObject({ recovered: 1, turnedFailing: 0 });
    expect(summary.transitions).toEqual([
      { surveyId: SURVEYS.stopped, from: 'failing', to: 'ok', reasons: [], notified: true },
    ]);
    // The claim the failed run gave back, taken again, and the record.
    expect(writes).toEqual(['PutItem', 'PutItem']);
    expect(notices.slice(before)).toEqual([
      expect.objectContaining({ surveyId: SURVEYS.stopped, kind: 'recovered', from: 'failing', to: 'ok' }),
    ]);
    const record = (await health.getMany([SURVEYS.stopped])).get(SURVEYS.stopped);
    expect(record).toMatchObject({ state: 'ok', since: at(-7).toISOString(), revision: 2 });
    expect(record?.history.map((h) => [h.from, h.to])).toEqual([
      ['ok', 'failing'],
      ['failing', 'ok'],
    ]);
  });

  it('once recovered, another run sends nothing more', async () => {
    const before = notices.length;
    const { writes } = await runAt(-6);
    expect(writes).toEqual([]);
    expect(notices).toHaveLength(before);
  });

  it('a failing survey whose redirects are removed is closed by the next run, one notice, and then left alone', async () => {
    const registry = createSurveyRegistry(
      createDocumentClient({ endpoint: proxy.endpoint }),
      table.tableName,
    );
    expect((await health.getMany([SURVEYS.staleKey])).get(SURVEYS.staleKey)?.state).toBe('failing');
    const removed = { state: 'removed', verified: false, failures: 0 } as const;
    await registry.put({
      surveyId: SURVEYS.staleKey,
      ...removed,
      removedAt: at(-6).toISOString(),
      updatedAt: at(-6).toISOString(),
    });
    // Removed long ago and never closed: past the look-back, not read again.
    await registry.put({
      surveyId: SURVEYS.fewStale,
      ...removed,
      removedAt: at(-8 * 24 * 60).toISOString(),
      updatedAt: at(-6).toISOString(),
    });
    const fewStaleBefore = (await health.getMany([SURVEYS.fewStale])).get(SURVEYS.fewStale);
    const before = notices.length;
    // The scheduler's tick delivered twice, both runs side by side: the change stored once, its notice sent once.
    const runs = await Promise.all([runAt(-5), runAt(-5)]);
    const summary = (runs[0] as (typeof runs)[number]).summary;
    expect(runs.flatMap((r) => r.summary.transitions)).toEqual([
      expect.objectContaining({ surveyId: SURVEYS.staleKey, from: 'failing', to: 'ok' }),
    ]);
    expect(notices.slice(before)).toEqual([
      expect.objectContaining({ surveyId: SURVEYS.staleKey, kind: 'recovered', to: 'ok' }),
    ]);
    // Counted in no state: it is not watched any more.
    expect(summary.ok + summary.warning + summary.failing).toBe(Object.keys(SURVEYS).length - 2);
    expect((await health.getMany([SURVEYS.fewStale])).get(SURVEYS.fewStale)).toEqual(fewStaleBefore);
    const { writes } = await runAt(-4);
    expect(writes).toEqual([]);
    expect(notices).toHaveLength(before + 1);
  });
});

/** The health check over the engine, as the scheduled one reads it. */
const checkOf = (registry: ReturnType<typeof createSurveyRegistry>) =>
  healthCheck({
    attempts: createLedgerStore(createDocumentClient({ endpoint: proxy.endpoint }), table.tableName),
    registry,
    health,
    settings: DEFAULT_HEALTH_SETTINGS,
    concurrency: 2,
  });

describe('a survey whose postbacks stopped, in a lull', () => {
  it('stays failing while redirects keep coming without postbacks, though fewer than five in the half hour', async () => {
    const registry = createSurveyRegistry(
      createDocumentClient({ endpoint: proxy.endpoint }),
      table.tableName,
    );
    const [held, fresh] = ['3011', '3012'];
    for (const surveyId of [held, fresh] as string[]) {
      await registry.put(watched(surveyId));
      await hitsAt(-20, async () => {
        for (const who of ids(surveyId, 2)) await hit(redirect, 'redirect', surveyId, 'fail', who);
      });
    }
    // The last run found its postbacks stopped.
    await health.put({
      surveyId: held as string,
      state: 'failing',
      since: at(-40).toISOString(),
      reasons: [{ code: 'postbacks_stopped', severity: 'failing', detail: '6 redirects ...' }],
      history: [{ at: at(-40).toISOString(), from: 'ok', to: 'failing', reasons: ['postbacks_stopped'] }],
      updatedAt: at(-40).toISOString(),
      revision: 1,
    });
    const report = await checkOf(registry).evaluate(at(0), { surveys: [held as string, fresh as string] });
    const state = (surveyId: string) => report.surveys.find((s) => s.surveyId === surveyId)?.evaluation;
    expect(state(held as string)).toMatchObject({
      state: 'failing',
      reasons: [{ code: 'postbacks_stopped' }],
    });
    // Two redirects alone start nothing.
    expect(state(fresh as string)?.state).toBe('ok');
    const judgedAt = (minutes: number) =>
      checkOf(registry).evaluate(at(minutes), { surveys: [held as string] });
    // Forty minutes on, no redirect in the half hour: those of the hours before hold it (a lull, not silence).
    expect((await judgedAt(40)).surveys[0]?.evaluation).toMatchObject({
      state: 'failing',
      reasons: [{ code: 'postbacks_stopped' }],
    });
    // Two and a half hours on, nothing since: silence, no longer failing.
    expect((await judgedAt(150)).surveys[0]?.evaluation.state).toBe('ok');
  });

  it('is not failing when postbacks still arrive, late, for redirects first seen before the half hour', async () => {
    const registry = createSurveyRegistry(
      createDocumentClient({ endpoint: proxy.endpoint }),
      table.tableName,
    );
    const surveyId = '3013';
    await registry.put(watched(surveyId));
    const [early, recent] = [ids(surveyId, 3), ids(`${surveyId}0`, 6)];
    await hitsAt(-50, async () => {
      for (const who of early ?? []) await hit(redirect, 'redirect', surveyId, 'fail', who);
    });
    await hitsAt(-20, async () => {
      for (const who of recent ?? []) await hit(redirect, 'redirect', surveyId, 'fail', who);
    });
    // The marketplace works off a queue: the postbacks of the early ones come 45 minutes after their redirects.
    await hitsAt(-5, async () => {
      for (const who of early ?? []) await hit(postback, 'postback', surveyId, 'fail', who);
    });
    const report = await checkOf(registry).evaluate(at(0), { surveys: [surveyId] });
    expect(report.surveys[0]?.evaluation.reasons.map((r) => r.code)).not.toContain('postbacks_stopped');
  });
});
