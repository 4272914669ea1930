/**
 * Redirect configuration against the local marketplace and the embedded engine: apply and verify, merge
 * semantics, idempotence, remove, sync checkpoints and failures, dry runs, and key rotation end to end.
 */

import { randomBytes } from 'node:crypto';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { unregistered } from '../../functions/cli/context';
import {
  createDocumentClient,
  createLedgerStore,
  createSurveyRegistry,
  type SurveyRegistration,
  type SurveyRegistry,
} from '../../functions/ledger/ledger-store';
import {
  createMarketplaceClient,
  MARKETPLACE_DOWN_SURVEYS,
  type MarketplaceClient,
  MarketplaceError,
} from '../../functions/marketplace/marketplace-client';
import {
  FULL_LISTING_CHECKPOINT,
  RELOCATED_CHECKPOINT,
  type RedirectConfigurationDeps,
  ROTATION_SETTLE_MS,
  readBacksPerRunFor,
  redirectConfiguration,
  retryDelayMs,
  SYNC_CHECKPOINT,
  SYNC_OVERLAP_MS,
  UNANSWERED_READ_BACK_RETRY_MS,
} from '../../functions/marketplace/redirect-configuration';
import { settingsDifferences } from '../../functions/marketplace/redirect-settings';
import { summarizeSyncRun } from '../../functions/marketplace/redirect-sync-handler';
import {
  type KeyRing,
  parseKeyRing,
  rotateKeyRing,
  serializeKeyRing,
  verify,
} from '../../functions/receiving/signing';
import { KEY_RING_FETCH_TIMEOUT_MS, UNKNOWN_KEY_REFRESH_MS } from '../../functions/runtime/key-ring-source';
import {
  type LocalMarketplace,
  NO_API_FAULTS,
  startLocalMarketplace,
} from '../../infra/local/marketplace/server';
import { apiEvent, invoke } from '../support/api-events';
import { receivers } from '../support/handlers';
import { freshTable } from '../support/ledger';

const TOKEN = 'redirect-config-token';
const BASE = 'https://hits.test';
let marketplace: LocalMarketplace;
let registry: SurveyRegistry;
let endpoint: string;
let tableName: string;
let ring: KeyRing;
let calls: string[];

const countingClient = (): MarketplaceClient => {
  const counting: typeof fetch = async (input, init) => {
    const url = new URL(String(input));
    calls.push(`${init?.method ?? 'GET'} ${url.pathname.replace(/^\/api\/v1/, '')}`);
    return fetch(input, init);
  };
  return createMarketplaceClient({
    baseUrl: marketplace.url,
    accessToken: () => TOKEN,
    fetch: counting,
    retries: 1,
    minBackoffMs: 1,
    maxBackoffMs: 2,
    timeoutMs: 1000,
  });
};

/**
 * The local marketplace through a client that notes each survey looked up (`getAllocatedSurveysBySurveyId`) in
 * `lookups` and answers a lookup with `answer`'s response when it gives one.
 */
const lookingUp = (lookups: string[], answer: (surveyId: string) => Response | undefined) =>
  createMarketplaceClient({
    baseUrl: marketplace.url,
    accessToken: () => TOKEN,
    retries: 0,
    fetch: async (input, init) => {
      const id = new URL(String(input)).pathname.match(/getAllocatedSurveysBySurveyId\/(\d+)/)?.[1];
      if (!id) return fetch(input, init);
      lookups.push(id);
      return answer(id) ?? fetch(input, init);
    },
  });

/** A registry over a table of its own. */
/** A registered survey whose apply failed an hour before `start`: its retry is due. */
const failedAnHourAgo = (surveyId: string, start: number): SurveyRegistration => ({
  surveyId,
  state: 'active',
  verified: false,
  failures: 1,
  lastError: 'boom',
  lastErrorAt: new Date(start - 3_600_000).toISOString(),
  updatedAt: new Date(start - 3_600_000).toISOString(),
});

async function freshRegistry(): Promise<SurveyRegistry> {
  const table = await freshTable();
  return createSurveyRegistry(createDocumentClient({ endpoint: table.endpoint }), table.tableName);
}

/** A marketplace that refuses every survey's settings (400), answering everything else as it does. */
const refusingSettings = () =>
  createMarketplaceClient({
    baseUrl: marketplace.url,
    accessToken: () => TOKEN,
    retries: 0,
    fetch: async (input, init) =>
      init?.method === 'PUT'
        ? new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Invalid value for pstbck' }), {
            status: 400,
          })
        : fetch(input, init),
  });

const configure = (overrides: Partial<RedirectConfigurationDeps> = {}) =>
  redirectConfiguration({
    marketplace: countingClient(),
    registry,
    keyRing: async () => ring,
    saveKeyRing: async (next) => {
      ring = next;
    },
    publicBaseUrl: BASE,
    methods: { success: 'GET', fail: 'POST' },
    // A rotation's wait for its ring to settle, not waited here (its own test counts it).
    sleep: async () => undefined,
    ...overrides,
  });

beforeAll(async () => {
  ({ endpoint, tableName } = await freshTable());
  registry = createSurveyRegistry(createDocumentClient({ endpoint }), tableName);
  marketplace = await startLocalMarketplace({ accessToken: TOKEN, seed: 3, seedSurveys: false });
});
afterAll(() => marketplace.stop());
beforeEach(() => {
  calls = [];
  ring = parseKeyRing(JSON.stringify({ current: 'k1', k1: 'first-signing-key-for-redirect-tests-000' }));
  marketplace.apiFaults = { ...NO_API_FAULTS };
});

describe('apply', () => {
  it('sends all nine fields, reads them back, and records a verified registration, its price looked up first', async () => {
    marketplace.state.addSurvey({ surveyId: 5001, cpi: '0.95' });
    const changed = marketplace.state.surveys.get(5001)?.modifiedAt as Date;
    const [result] = await configure().apply(['5001']);
    expect(result).toEqual({ surveyId: '5001', status: 'applied', kid: 'k1' });
    // Registered by hand, it has no price here: looked up first, dated by its last change there (no later listing
    // need show it before its completes' prices are checked).
    expect(calls).toEqual([
      'GET /supply/getAllocatedSurveysBySurveyId/5001',
      'PUT /supply/setRedirectionForSurvey/5001',
      'GET /supply/surveySpecificRedirects/5001',
    ]);
    expect(await registry.get('5001')).toMatchObject({
      expectedCpi: '0.95',
      cpiHistory: [{ cpi: '0.95', since: expect.stringMatching(/^\d{4}-/) }],
    });
    expect((await registry.get('5001'))?.cpiHistory?.[0]?.since).toBe(
      new Date(Math.floor(changed.getTime() / 1000) * 1000).toISOString(),
    );
    const settings = marketplace.state.effectiveRedirects(5001);
    expect(settings.pstbck).toMatch(
      /^https:\/\/hits\.test\/postback\/5001\/success\?pid=\[%%pid%%\]&token=\[%%token%%\]&kid=k1&sig=/,
    );
    expect(settings).toMatchObject({ pstBckSuccessMethod: 'GET', pstBckFailMethod: 'POST' });
    expect(await registry.get('5001')).toMatchObject({
      state: 'active',
      verified: true,
      kid: 'k1',
      failures: 0,
    });
  });

  it('overwrites a stale field an earlier configuration left behind (the marketplace merges)', async () => {
    marketplace.state.addSurvey({ surveyId: 5002 });
    marketplace.state.setRedirects(5002, {
      qTUrl: 'https://old-receiver.example/q',
      pstBckFailMethod: 'GET',
    });
    await configure().apply(['5002']);
    expect(marketplace.state.effectiveRedirects(5002).qTUrl).toMatch(
      /^https:\/\/hits\.test\/redirect\/5002\/quality/,
    );
    expect(marketplace.state.effectiveRedirects(5002).pstBckFailMethod).toBe('POST');
  });

  it('makes no call to re-apply an unchanged, verified survey; --force does', async () => {
    marketplace.state.addSurvey({ surveyId: 5003 });
    await configure().apply(['5003']);
    calls = [];
    expect(await configure().apply(['5003'])).toEqual([{ surveyId: '5003', status: 'unchanged' }]);
    expect(calls).toEqual([]);
    expect((await configure().apply(['5003'], { force: true }))[0]?.status).toBe('applied');
  });

  it('a read-back that differs is a failure, recorded without the URLs', async () => {
    marketplace.state.addSurvey({ surveyId: 5004 });
    const original = marketplace.state.setRedirects.bind(marketplace.state);
    marketplace.state.setRedirects = (id, request) =>
      original(id, { ...request, sUrl: 'https://tampered.example/s' });
    try {
      const [result] = await configure().apply(['5004']);
      expect(result).toEqual({ surveyId: '5004', status: 'failed', error: 'read-back differs in sUrl' });
      const registration = await registry.get('5004');
      expect(registration).toMatchObject({
        verified: false,
        failures: 1,
        lastError: 'read-back differs in sUrl',
      });
    } finally {
      marketplace.state.setRedirects = original;
    }
  });

  it('reports a marketplace error per survey and carries on with the others', async () => {
    marketplace.state.addSurvey({ surveyId: 5005 });
    const results = await configure().apply(['5005', '5999']);
    expect(results[0]?.status).toBe('applied');
    expect(results[1]).toMatchObject({
      surveyId: '5999',
      status: 'failed',
      error: expect.stringMatching(/HTTP 404: Survey 5999 not found/),
    });
    // Unknown there and never registered here: not registered (a mistyped id).
    expect(await registry.get('5999')).toBeUndefined();
  });

  it('a marketplace that does not answer: the run stops taking up surveys after ten in a row fail, the rest left for the next', async () => {
    const ids = Array.from({ length: 20 }, (_, i) => 5401 + i);
    for (const id of ids) marketplace.state.addSurvey({ surveyId: id });
    // Registered here already (an id never registered is not registered by an apply the marketplace did not answer:
    // its own test below), so each failure is counted on its registration.
    const now = new Date().toISOString();
    for (const id of ids)
      await registry.put({
        surveyId: String(id),
        state: 'active',
        verified: false,
        failures: 0,
        updatedAt: now,
      });
    let puts = 0;
    const down = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 1,
      minBackoffMs: 1,
      maxBackoffMs: 2,
      fetch: async (input, init) => {
        if (init?.method !== 'PUT') return fetch(input, init);
        puts++;
        return new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Service unavailable' }), {
          status: 503,
        });
      },
    });
    const results = await configure({ marketplace: down, concurrency: 1 }).apply(ids.map(String));
    expect(results.map((r) => r.status)).toEqual([
      ...Array(MARKETPLACE_DOWN_SURVEYS).fill('failed'),
      ...Array(20 - MARKETPLACE_DOWN_SURVEYS).fill('deferred'),
    ]);
    expect(results.at(-1)).toMatchObject({ reason: 'the marketplace is not answering; next run' });
    // Each failed survey's call and its one retry; none for the surveys left.
    expect(puts).toBe(2 * MARKETPLACE_DOWN_SURVEYS);
    // The access token refused for every call (rotated or revoked, read afresh and refused again): the same stop,
    // not a failure of each survey's own.
    const revoked = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => 'revoked-token',
      retries: 0,
    });
    const stopped = await configure({ marketplace: revoked, concurrency: 1 }).apply(ids.map(String));
    expect(stopped.map((r) => r.status)).toEqual([
      ...Array(MARKETPLACE_DOWN_SURVEYS).fill('failed'),
      ...Array(20 - MARKETPLACE_DOWN_SURVEYS).fill('deferred'),
    ]);
    expect(await registry.get(String(ids[0]))).toMatchObject({ failures: expect.any(Number) });
    const first = await registry.get(String(ids[0]));
    expect(first?.unavailableFailures).toBe(first?.failures);
    // A refusal of the survey itself (a 400) is an answer: the count starts over.
    let answered = 0;
    const refusing = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async (input, init) => {
        if (init?.method !== 'PUT') return fetch(input, init);
        answered++;
        return answered % 5 === 0
          ? new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Invalid URL' }), { status: 400 })
          : new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Service unavailable' }), {
              status: 503,
            });
      },
    });
    const mixed = await configure({ marketplace: refusing, concurrency: 1 }).apply(ids.map(String));
    expect(mixed.every((r) => r.status === 'failed')).toBe(true);
  });

  it('a dry run prints the call and changes nothing', async () => {
    marketplace.state.addSurvey({ surveyId: 5006 });
    const [result] = await configure().apply(['5006'], { dryRun: true });
    expect(result).toMatchObject({
      status: 'would-apply',
      call: { method: 'PUT', path: '/supply/setRedirectionForSurvey/5006' },
    });
    expect(result?.status === 'would-apply' && Object.keys(result.call.body ?? {})).toHaveLength(9);
    expect(calls).toEqual([]);
    expect(await registry.get('5006')).toBeUndefined();
  });
});

describe('show and remove', () => {
  it('show compares field by field; remove brings the global redirects back and is recorded', async () => {
    marketplace.state.addSurvey({ surveyId: 5101 });
    const configuration = configure();
    await configuration.apply(['5101']);
    expect((await configuration.show('5101')).differences).toEqual([]);
    expect(await configuration.remove(['5101'])).toEqual([{ surveyId: '5101', status: 'removed' }]);
    expect(marketplace.state.effectiveRedirects(5101).sUrl).toBe('');
    expect(await registry.get('5101')).toMatchObject({ state: 'removed', verified: false });
    const after = await configuration.show('5101');
    expect(after.differences.map((d) => d.field)).toContain('pstbck');
    expect(after.live).toBe(true);
  });

  it('remove of a survey that has no redirects of its own at the marketplace (deleted in its console) is recorded removed, and the sync leaves it alone', async () => {
    const syncRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5732 });
    await configure({ registry: syncRegistry }).apply(['5732']);
    // As the marketplace answers a survey with none of its own: to the delete as to a read.
    const none = () =>
      new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'No survey specific redirects found' }), {
        status: 404,
      });
    const client = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async (input, init) =>
        init?.method === 'DELETE' && String(input).includes('/surveySpecificRedirects/5732')
          ? none()
          : fetch(input, init),
    });
    expect(await configure({ registry: syncRegistry, marketplace: client }).remove(['5732'])).toEqual([
      { surveyId: '5732', status: 'removed' },
    ]);
    expect(await syncRegistry.get('5732')).toMatchObject({ state: 'removed' });
    // A day on, nothing of the sync's touches it (another stack may now configure it).
    calls = [];
    const later = await configure({
      registry: syncRegistry,
      now: () => new Date(Date.now() + 26 * 3_600_000),
    }).sync();
    expect(later.results.filter((r) => r.surveyId === '5732' && r.status !== 'skipped')).toEqual([]);
    expect(calls.filter((c) => c.includes('setRedirectionForSurvey/5732'))).toEqual([]);
    // A failure of another kind still fails, and keeps the survey as it was.
    const refusing = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async (input, init) =>
        init?.method === 'DELETE'
          ? new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Not authorised for this survey' }), {
              status: 403,
            })
          : fetch(input, init),
    });
    marketplace.state.addSurvey({ surveyId: 5733 });
    await configure({ registry: syncRegistry }).apply(['5733']);
    const [failed] = await configure({ registry: syncRegistry, marketplace: refusing }).remove(['5733']);
    expect(failed).toMatchObject({ surveyId: '5733', status: 'failed' });
    expect(await syncRegistry.get('5733')).toMatchObject({ state: 'active' });
    for (const id of [5732, 5733]) marketplace.state.setLive(id, false);
  });

  it("records when the survey became this stack's: kept by later applies, new after a removal, none guessed for an older registration", async () => {
    const syncRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5744 });
    const base = Date.now();
    const at = (minutes: number) => () => new Date(base + minutes * 60_000);
    await configure({ registry: syncRegistry, now: at(0) }).apply(['5744']);
    const first = (await syncRegistry.get('5744'))?.servingSince;
    expect(first).toBe(at(0)().toISOString());
    await configure({ registry: syncRegistry, now: at(10) }).apply(['5744'], { force: true });
    expect((await syncRegistry.get('5744'))?.servingSince).toBe(first);
    await configure({ registry: syncRegistry, now: at(20) }).remove(['5744']);
    expect((await syncRegistry.get('5744'))?.servingSince).toBe(first);
    // Removed once more: still since the first removal (the rows since are another system's).
    await configure({ registry: syncRegistry, now: at(25) }).remove(['5744']);
    expect((await syncRegistry.get('5744'))?.removedAt).toBe(at(20)().toISOString());
    // Applied again after the removal: still the first time (rows of then that no run judged yet stay this
    // stack's).
    await configure({ registry: syncRegistry, now: at(30) }).apply(['5744']);
    expect((await syncRegistry.get('5744'))?.servingSince).toBe(first);
    // The time between is kept as not this stack's.
    expect((await syncRegistry.get('5744'))?.notServing).toEqual([
      { from: at(20)().toISOString(), to: at(30)().toISOString() },
    ]);
    // A registration written before the field, even one its release never verified (a read-back that failed): no
    // time guessed for it (rows of any time stay judged).
    const {
      servingSince: _,
      verifiedAt: _v,
      ...older
    } = (await syncRegistry.get('5744')) as SurveyRegistration;
    await syncRegistry.put({ ...older, verified: false });
    await configure({ registry: syncRegistry, now: at(40) }).apply(['5744'], { force: true });
    expect((await syncRegistry.get('5744'))?.servingSince).toBeUndefined();
    marketplace.state.setLive(5744, false);
    // An apply the marketplace refused sent nothing here: the time is the first apply it took.
    marketplace.state.addSurvey({ surveyId: 5746 });
    const refusing = refusingSettings();
    await configure({ registry: syncRegistry, marketplace: refusing, now: at(0) }).apply(['5746']);
    expect(await syncRegistry.get('5746')).toMatchObject({ verified: false, neverTaken: true });
    expect((await syncRegistry.get('5746'))?.servingSince).toBeUndefined();
    await configure({ registry: syncRegistry, now: at(360) }).apply(['5746']);
    expect((await syncRegistry.get('5746'))?.servingSince).toBe(at(360)().toISOString());
    marketplace.state.setLive(5746, false);
  });

  it("a removal then an apply the marketplace refused keeps the time since the removal open until one is taken; an older release's removal is recorded too", async () => {
    const syncRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5748 });
    const base = Date.now();
    const at = (minutes: number) => () => new Date(base + minutes * 60_000);
    const iso = (minutes: number) => at(minutes)().toISOString();
    await configure({ registry: syncRegistry, now: at(0) }).apply(['5748']);
    await configure({ registry: syncRegistry, now: at(60) }).remove(['5748']);
    const refusing = refusingSettings();
    await configure({ registry: syncRegistry, marketplace: refusing, now: at(120) }).apply(['5748']);
    expect(await syncRegistry.get('5748')).toMatchObject({ servingSince: iso(0), notServingSince: iso(60) });
    expect((await syncRegistry.get('5748'))?.notServing).toBeUndefined();
    await configure({ registry: syncRegistry, now: at(300) }).apply(['5748']);
    const reopened = await syncRegistry.get('5748');
    expect(reopened?.notServing).toEqual([{ from: iso(60), to: iso(300) }]);
    expect(reopened?.notServingSince).toBeUndefined();
    // An older release's removed registration (no start of its own): the time between is known all the same.
    const { servingSince: _s, notServing: _n, ...older } = reopened as SurveyRegistration;
    await syncRegistry.put({ ...older, state: 'removed', removedAt: iso(400), verified: false });
    await configure({ registry: syncRegistry, now: at(500) }).apply(['5748']);
    expect(await syncRegistry.get('5748')).toMatchObject({ notServing: [{ from: iso(400), to: iso(500) }] });
    expect((await syncRegistry.get('5748'))?.servingSince).toBeUndefined();
    marketplace.state.setLive(5748, false);
  });

  it.each([
    'Survey 5747 not found. Check the survey id and try again.',
    'Survey 5747 does not exist or has expired',
    'No such survey: check the id and your access token',
  ])(
    'an id the marketplace answers 404 "%s" is not registered: the words of a retry or a token do not hide it',
    async (msg) => {
      const syncRegistry = await freshRegistry();
      const notFound = createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        fetch: async () => new Response(JSON.stringify({ apiStatus: 'Failure', msg }), { status: 404 }),
      });
      const [applied] = await configure({ registry: syncRegistry, marketplace: notFound }).apply(['5747']);
      expect(applied).toMatchObject({ surveyId: '5747', status: 'failed' });
      expect(await syncRegistry.get('5747')).toBeUndefined();
    },
  );

  it('an id applied by name while the marketplace does not answer fails and is not registered (it may be mistyped)', async () => {
    const syncRegistry = await freshRegistry();
    const down = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async () =>
        new Response('{"apiStatus":"Failure","msg":"upstream unavailable"}', { status: 503 }),
    });
    const [applied] = await configure({ registry: syncRegistry, marketplace: down }).apply(['5745']);
    expect(applied).toMatchObject({ surveyId: '5745', status: 'failed' });
    expect((applied as { error: string }).error).toMatch(/did not answer.*not registered/);
    expect(await syncRegistry.get('5745')).toBeUndefined();
  });

  it('an id the marketplace does not know (mistyped in apply) fails to apply, is not registered, and one registered can be removed', async () => {
    const configuration = configure();
    const [applied] = await configuration.apply(['5199']);
    expect(applied).toMatchObject({ surveyId: '5199', status: 'failed' });
    expect((applied as { error: string }).error).toMatch(
      /the marketplace does not know survey 5199 .*not registered/,
    );
    // Not reconciled nor reported from then on as a row of zeros.
    expect(await registry.get('5199')).toBeUndefined();
    // One registered before (deleted at the marketplace since) is removed, not failed for good.
    await registry.put({
      surveyId: '5199',
      state: 'active',
      verified: false,
      failures: 1,
      updatedAt: new Date().toISOString(),
    });
    // Settings the marketplace took, then a read-back it answers 404 (a paused survey's): recorded, not "unknown".
    marketplace.state.addSurvey({ surveyId: 5197 });
    const notReadBack = {
      ...countingClient(),
      getSurveyRedirects: () =>
        Promise.reject(
          new MarketplaceError({
            endpoint: 'x',
            kind: 'http',
            httpStatus: 404,
            detail: 'HTTP 404: not found',
          }),
        ),
    } as MarketplaceClient;
    const [taken] = await configure({ marketplace: notReadBack }).apply(['5197']);
    expect(taken).toMatchObject({ surveyId: '5197', status: 'failed' });
    expect((taken as { error: string }).error).not.toMatch(/does not know/);
    expect(await registry.get('5197')).toMatchObject({ state: 'active', verified: false });
    // Applied again by name: the marketplace does not know it, so it is recorded closed (no failure for good).
    const [again] = await configuration.apply(['5199']);
    expect(again).toEqual({
      surveyId: '5199',
      status: 'closed',
      reason: 'the marketplace no longer knows survey 5199',
    });
    expect(await registry.get('5199')).toMatchObject({
      state: 'active',
      closedAt: expect.any(String),
      verified: false,
      lastError: expect.stringMatching(/^lookup: /),
    });
    expect(await configuration.remove(['5199'])).toEqual([{ surveyId: '5199', status: 'removed' }]);
    expect(await registry.get('5199')).toMatchObject({ state: 'removed' });
    // A 404 to the removal of a survey whose redirects still read back, or a 404 page (a wrong URL), is a failure:
    // the survey stays as it was.
    marketplace.state.addSurvey({ surveyId: 5198 });
    await configuration.apply(['5198']);
    for (const answer of [
      () =>
        new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Survey 5198 not found' }), { status: 404 }),
      () => new Response('<html>Not Found</html>', { status: 404 }),
    ]) {
      const refusing = configure({
        marketplace: createMarketplaceClient({
          baseUrl: marketplace.url,
          accessToken: () => TOKEN,
          retries: 0,
          fetch: async (input, init) => (init?.method === 'DELETE' ? answer() : fetch(input, init)),
        }),
      });
      const [result] = await refusing.remove(['5198']);
      expect(result).toMatchObject({ surveyId: '5198', status: 'failed' });
      expect(await registry.get('5198')).toMatchObject({ state: 'active', verified: true });
    }
  });
});

describe('remove of an id never registered here', () => {
  it('mistyped (the marketplace does not know it) fails and registers nothing, nor does a removal that fails; a known one is recorded as never applied here', async () => {
    const configuration = configure();
    const [mistyped] = await configuration.remove(['5739']);
    expect(mistyped).toMatchObject({ surveyId: '5739', status: 'failed' });
    expect((mistyped as { error: string }).error).toMatch(
      /the marketplace does not know survey 5739 .*not registered/,
    );
    expect(await registry.get('5739')).toBeUndefined();
    // The marketplace down: failed, and not registered as an active survey (the sync and a rotation would apply
    // this stack's URLs to it).
    marketplace.state.addSurvey({ surveyId: 5740 });
    const down = configure({
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        fetch: async () => new Response('unavailable', { status: 503 }),
      }),
    });
    const [failed] = await down.remove(['5740']);
    expect(failed).toMatchObject({ surveyId: '5740', status: 'failed' });
    expect(await registry.get('5740')).toBeUndefined();
    // One the marketplace knows (another stack's): its own redirects go, and it is recorded removed, never applied
    // here, so that the sync leaves it alone when it changes and no run reconciles another stack's transactions.
    expect(await configuration.remove(['5740'])).toEqual([{ surveyId: '5740', status: 'removed' }]);
    expect(await registry.get('5740')).toMatchObject({ state: 'removed', neverApplied: true });
    // Not registered as far as the CLI's commands are concerned (reconcile --survey refuses it without --force).
    expect(await unregistered(registry, ['5740'])).toEqual(['5740']);
    marketplace.state.setLive(5740, true);
    calls = [];
    await configure({ now: () => new Date(Date.now() + 60_000) }).sync();
    expect(calls.filter((c) => c.includes('setRedirectionForSurvey/5740'))).toEqual([]);
    expect(await registry.get('5740')).toMatchObject({ state: 'removed' });
    marketplace.state.setLive(5740, false);
  });
});

/**
 * A survey the sync configured and verified, on a clock the test moves on (`at.advance`); created at the
 * marketplace at `stampedAt` of the clock (default 100 s before it). The first run's report is `first`.
 */
async function syncedSurvey(surveyId: number, stampedAt = (now: number) => new Date(now - 100_000)) {
  const syncRegistry = await freshRegistry();
  let clock = Date.now();
  const at = {
    advance: (ms: number) => {
      clock += ms;
    },
  };
  const deps = {
    registry: syncRegistry,
    initialSince: new Date(clock - 120_000),
    now: () => new Date(clock),
  };
  marketplace.state.addSurvey({ surveyId }, stampedAt(clock));
  const first = await configure(deps).sync();
  return { syncRegistry, deps, at, first };
}

describe('sync', () => {
  it('configures new live surveys, resumes after a failure without skipping any, and leaves others alone', async () => {
    const syncRegistry = await freshRegistry();
    const sync = (overrides: Partial<RedirectConfigurationDeps> = {}) =>
      configure({ registry: syncRegistry, ...overrides }).sync();

    const first = await sync();
    const known = first.results.map((r) => r.surveyId);
    expect(first.checkpoint).toBeDefined();
    expect(await syncRegistry.checkpoint(SYNC_CHECKPOINT)).toBe(first.checkpoint);

    // Nothing new: no survey is touched again.
    calls = [];
    const quiet = await sync();
    expect(quiet.results.filter((r) => r.status === 'applied')).toEqual([]);
    expect(calls.filter((c) => c.startsWith('PUT'))).toEqual([]);

    // The marketplace fails the listing: the run says so, and the checkpoint stays where it was.
    marketplace.state.addSurvey({ surveyId: 5201 });
    marketplace.state.addSurvey({ surveyId: 5202, live: false });
    const before = await syncRegistry.checkpoint(SYNC_CHECKPOINT);
    marketplace.apiFaults = { ...NO_API_FAULTS, serverError: 1 };
    const refused = await sync();
    expect(refused.listingError).toMatch(/HTTP 503/);
    expect(summarizeSyncRun(refused).listingError).toMatch(/HTTP 503/);
    expect(refused.checkpoint).toBeUndefined();
    expect(await syncRegistry.checkpoint(SYNC_CHECKPOINT)).toBe(before);

    // Back up: the new live survey is configured, the paused one left alone.
    marketplace.apiFaults = { ...NO_API_FAULTS };
    const resumed = await sync();
    expect(resumed.results).toContainEqual({ surveyId: '5201', status: 'applied', kid: 'k1' });
    expect(resumed.results.map((r) => r.surveyId)).not.toContain('5202');
    expect(known).not.toContain('5201');
  });

  it('retries a survey whose apply failed on the next run, and skips it once the marketplace pauses it', async () => {
    const syncRegistry = await freshRegistry();
    // Far enough back that the checkpoint (run start minus the overlap) moves past it.
    const deps = { registry: syncRegistry, initialSince: new Date(Date.now() - SYNC_OVERLAP_MS - 120_000) };
    // Created before the checkpoint the first run will set, so the second run finds 5301 only through the registry.
    marketplace.state.addSurvey({ surveyId: 5301 }, new Date(Date.now() - SYNC_OVERLAP_MS - 100_000));
    marketplace.state.addSurvey({ surveyId: 5302 }, new Date(Date.now() - SYNC_OVERLAP_MS - 100_000));
    const original = marketplace.state.setRedirects.bind(marketplace.state);
    marketplace.state.setRedirects = (id, request) => {
      if (id === 5301) throw new Error('boom');
      original(id, request);
    };
    const failing = await configure(deps).sync();
    marketplace.state.setRedirects = original;
    expect(failing.results).toContainEqual(expect.objectContaining({ surveyId: '5301', status: 'failed' }));
    expect(failing.results).toContainEqual(expect.objectContaining({ surveyId: '5302', status: 'applied' }));
    expect(failing.checkpoint).toBeDefined();

    const retried = await configure(deps).sync();
    expect(retried.retried).toBe(1);
    expect(retried.results).toContainEqual({ surveyId: '5301', status: 'applied', kid: 'k1' });

    // Fails twice more, then the survey is paused: the next retry finds it so and records it closed, and the runs
    // after leave it alone (no lookup every run of a survey that ended unverified).
    marketplace.state.setRedirects = (id, request) => {
      if (id === 5301) throw new Error('boom');
      original(id, request);
    };
    await configure(deps).apply(['5301'], { force: true });
    await configure(deps).apply(['5301'], { force: true });
    expect((await syncRegistry.get('5301'))?.failures).toBe(2);
    marketplace.state.setRedirects = original;
    marketplace.state.setLive(5301, false);
    // Failed twice: not retried by the run right after, but a quarter of an hour later.
    expect((await configure(deps).sync()).retried).toBe(0);
    const later = new Date(Date.now() + 16 * 60_000);
    const paused = await configure({ ...deps, now: () => later }).sync();
    expect(paused.results).toContainEqual({
      surveyId: '5301',
      status: 'closed',
      reason: 'Survey 5301 is Paused/Closed',
    });
    expect((await syncRegistry.get('5301'))?.closedAt).toBeDefined();
    // Within the day, left alone; a day after its closure, looked up once (in case it was resumed and the
    // listings leave it out) and, still closed, left alone again until the next day.
    calls = [];
    await configure({ ...deps, now: () => new Date(Date.now() + 3 * 3_600_000) }).sync();
    expect(calls.filter((c) => c.includes('5301'))).toEqual([]);
    const dayAfter = new Date(Date.now() + 30 * 3_600_000);
    await configure({ ...deps, now: () => dayAfter }).sync();
    expect(calls.filter((c) => c.includes('5301'))).toEqual([
      'GET /supply/getAllocatedSurveysBySurveyId/5301',
    ]);
    calls = [];
    await configure({ ...deps, now: () => new Date(dayAfter.getTime() + 15 * 60_000) }).sync();
    expect(calls.filter((c) => c.includes('5301'))).toEqual([]);
    expect((await syncRegistry.get('5301'))?.closedAt).toBeDefined();
  });

  it('reads back at once a verified survey the marketplace lists as created again since, and applies it', async () => {
    const syncRegistry = await freshRegistry();
    // Applied two hours ago (no survey of the shared marketplace is dated after now).
    const start = Date.now();
    let clock = start - 2 * 3_600_000;
    const deps = {
      registry: syncRegistry,
      initialSince: new Date(clock - 120_000),
      now: () => new Date(clock),
    };
    marketplace.state.addSurvey({ surveyId: 5320 }, new Date(clock - 100_000));
    expect((await configure(deps).sync()).results).toContainEqual({
      surveyId: '5320',
      status: 'applied',
      kid: 'k1',
    });
    // Now the survey is deleted and created again under its id: its own redirects are gone, the supplier's global
    // ones (no postbacks) apply.
    marketplace.state.deleteRedirects(5320);
    marketplace.state.addSurvey({ surveyId: 5320 }, new Date(start));
    clock = start + 60_000;
    calls = [];
    const next = await configure(deps).sync();
    expect(next.results).toContainEqual({
      surveyId: '5320',
      status: 'applied',
      kid: 'k1',
      drifted: expect.arrayContaining(['pstbck', 'pstbck_fail']),
    });
    expect((await configure(deps).show('5320')).differences).toEqual([]);
    // Read back as applied, it is not read again for the same change.
    clock += 15 * 60_000;
    calls = [];
    await configure(deps).sync();
    expect(calls.filter((c) => c.endsWith('/5320'))).toEqual([]);
  });

  it('a marketplace whose clock runs hours ahead does not make every run read a survey back: its own time of the change is kept', async () => {
    // Created now, stamped eight hours ahead (a marketplace writing its Pacific wall time as UTC, or the reverse).
    const ahead = 8 * 3_600_000;
    const { syncRegistry, deps, at, first } = await syncedSurvey(5333, (now) => new Date(now + ahead));
    const start = deps.now().getTime();
    try {
      expect(first.results).toContainEqual({ surveyId: '5333', status: 'applied', kid: 'k1' });
      // (The marketplace's times are to the second.)
      expect((await syncRegistry.get('5333'))?.changeLookedAt).toBe(
        new Date(Math.floor((start + ahead) / 1000) * 1000).toISOString(),
      );
      // The next runs list it again (its time is after their checkpoint) with the same time: not read back.
      for (let run = 0; run < 3; run++) {
        at.advance(15 * 60_000);
        calls = [];
        await configure(deps).sync();
        expect(calls.filter((c) => c.endsWith('/5333'))).toEqual([]);
      }
      // Changed again at the marketplace (created again, its redirects gone): a later time of its own, read back.
      marketplace.state.deleteRedirects(5333);
      marketplace.state.addSurvey({ surveyId: 5333 }, new Date(start + ahead + 50 * 60_000));
      at.advance(15 * 60_000);
      const changed = await configure(deps).sync();
      expect(changed.results).toContainEqual({
        surveyId: '5333',
        status: 'applied',
        kid: 'k1',
        drifted: expect.arrayContaining(['pstbck', 'pstbck_fail']),
      });
    } finally {
      // No survey of the shared marketplace stays dated after now.
      marketplace.state.setLive(5333, false);
    }
  });

  it.each([
    [
      'a 404 that says there are none',
      () =>
        new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'No survey specific redirects found' }), {
          status: 404,
        }),
      ['redirectURL'],
    ],
    [
      'a 400 that says so: the marketplace answers its errors with 400 or 404',
      () =>
        new Response(
          JSON.stringify({ apiStatus: 'Failure', msg: 'No survey specific redirects found for survey 5315' }),
          { status: 400 },
        ),
      ['redirectURL'],
    ],
    [
      'no settings object',
      () =>
        new Response(JSON.stringify({ apiStatus: 'success', msg: 'ok', redirectURL: null }), { status: 200 }),
      ['pstbck', 'pstbck_fail'],
    ],
  ])(
    'a daily read-back showing no survey-level redirects (%s) applies them again',
    async (_, answer, drifted) => {
      const { syncRegistry, deps, at } = await syncedSurvey(5315);
      expect(await syncRegistry.get('5315')).toMatchObject({ verified: true });
      // Deleted at the marketplace, and read back so: once, then as applied again.
      let deleted = true;
      const client = createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        fetch: async (input, init) => {
          const reading =
            String(input).includes('/surveySpecificRedirects/5315') && (init?.method ?? 'GET') === 'GET';
          if (reading && deleted) {
            deleted = false;
            return answer();
          }
          return fetch(input, init);
        },
      });
      at.advance(25 * 3_600_000);
      const next = await configure({ ...deps, marketplace: client }).sync();
      expect(next.results).toContainEqual({ surveyId: '5315', status: 'applied', kid: 'k1', drifted });
      expect(await syncRegistry.get('5315')).toMatchObject({
        verified: true,
        verifiedAt: deps.now().toISOString(),
      });
    },
  );

  it.each([
    ['a page that is not JSON', () => new Response('<html>Forbidden</html>', { status: 403 })],
    [
      'a success without redirectURL that does not say there are none: a rate limit answered 200',
      () =>
        new Response(
          JSON.stringify({ apiStatus: 'success', msg: 'Rate limit exceeded. Try again in 60 seconds' }),
          { status: 200 },
        ),
    ],
    [
      "a closed survey's 404",
      () =>
        new Response(
          JSON.stringify({ apiStatus: 'Failure', msg: 'Survey 5317 is Closed; redirects unavailable' }),
          {
            status: 404,
          },
        ),
    ],
  ])(
    'a daily read-back refused otherwise (%s) is tried the next day: no apply, no drift',
    async (_, answer) => {
      const { syncRegistry, deps, at } = await syncedSurvey(5317);
      const asked: string[] = [];
      const client = createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        fetch: async (input, init) => {
          if (String(input).includes('/5317'))
            asked.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
          return String(input).includes('/surveySpecificRedirects/5317') ? answer() : fetch(input, init);
        },
      });
      at.advance(25 * 3_600_000);
      const next = await configure({ ...deps, marketplace: client }).sync();
      expect(next.results).toContainEqual(expect.objectContaining({ surveyId: '5317', status: 'skipped' }));
      expect(asked.filter((call) => call.startsWith('PUT'))).toEqual([]);
      expect(await syncRegistry.get('5317')).toMatchObject({ verified: true });
    },
  );

  it('drift the read-back finds and the marketplace refuses to undo is still reported as drift', async () => {
    const { deps, at } = await syncedSurvey(5316);
    marketplace.state.setRedirects(5316, { pstbck: 'https://elsewhere.example/postback' });
    const locked = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async (input, init) =>
        init?.method === 'PUT' && String(input).includes('/5316')
          ? new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Survey is locked' }), { status: 400 })
          : fetch(input, init),
    });
    at.advance(25 * 3_600_000);
    const report = await configure({ ...deps, marketplace: locked }).sync();
    expect(report.results).toContainEqual(
      expect.objectContaining({ surveyId: '5316', status: 'failed', drifted: ['pstbck'] }),
    );
    expect(summarizeSyncRun(report).drifted).toContainEqual({ surveyId: '5316', fields: ['pstbck'] });
  });

  it('a read-back the marketplace does not answer is looked at again in an hour, not every run nor the next day, and starves no other', async () => {
    const syncRegistry = await freshRegistry();
    const start = Date.now();
    for (const id of [5737, 5738])
      marketplace.state.addSurvey({ surveyId: id }, new Date(start - 3 * 86_400_000));
    // 5737 read back (verified) longer ago than 5738.
    await configure({ registry: syncRegistry }).apply(['5737']);
    await configure({ registry: syncRegistry, now: () => new Date(start + 60_000) }).apply(['5738']);
    let clock = start + 2 * 86_400_000;
    const reads: string[] = [];
    const client: MarketplaceClient = {
      ...countingClient(),
      getSurveyRedirects: async (surveyId) => {
        reads.push(surveyId);
        if (surveyId === '5737')
          throw new MarketplaceError({
            endpoint: 'x',
            kind: 'http',
            httpStatus: 500,
            detail: 'boom',
            retriable: true,
          });
        return countingClient().getSurveyRedirects(surveyId);
      },
    };
    const run = () =>
      configure({
        registry: syncRegistry,
        marketplace: client,
        readBacksPerRun: 1,
        now: () => new Date(clock),
        initialSince: new Date(clock - 60_000),
      }).sync();
    // One read-back a run: the one that does not answer first (the longer unread), then the other, then neither.
    await run();
    clock += 15 * 60_000;
    await run();
    clock += 15 * 60_000;
    await run();
    expect(reads.filter((id) => id === '5737' || id === '5738')).toEqual(['5737', '5738']);
    // An hour after its try it is due again.
    clock += 45 * 60_000;
    await run();
    expect(reads.filter((id) => id === '5737')).toHaveLength(2);
    expect((await syncRegistry.get('5737'))?.readBackFailures).toBeUndefined();
    for (const id of [5737, 5738]) marketplace.state.setLive(id, false);
  });

  it('reads a verified survey back once a day, and applies redirects changed at the marketplace again', async () => {
    const syncRegistry = await freshRegistry();
    const start = Date.now();
    let clock = start;
    const deps = {
      registry: syncRegistry,
      initialSince: new Date(start - 120_000),
      now: () => new Date(clock),
    };
    marketplace.state.addSurvey({ surveyId: 5310 }, new Date(start - 100_000));
    const first = await configure(deps).sync();
    expect(first.results).toContainEqual({ surveyId: '5310', status: 'applied', kid: 'k1' });
    const readBacks = () => calls.filter((c) => c === 'GET /supply/surveySpecificRedirects/5310').length;

    // Within the day: trusted, nothing read back.
    clock = start + 3_600_000;
    calls = [];
    expect((await configure(deps).sync()).reverified).toBe(0);
    expect(readBacks()).toBe(0);

    // Someone points the success redirect elsewhere at the marketplace; the next day's read-back puts it back.
    marketplace.state.setRedirects(5310, { sUrl: 'https://elsewhere.example/thanks' });
    clock = start + 25 * 3_600_000;
    calls = [];
    const drifted = await configure(deps).sync();
    // (Surveys other tests created in the same minutes were configured and are read back as well.)
    expect(drifted.reverified).toBeGreaterThanOrEqual(1);
    expect(drifted.results).toContainEqual({
      surveyId: '5310',
      status: 'applied',
      kid: 'k1',
      drifted: ['sUrl'],
    });
    expect((await configure(deps).show('5310')).differences).toEqual([]);
    expect((await syncRegistry.get('5310'))?.verifiedAt).toBe(new Date(clock).toISOString());

    // A day later, as applied: the verification is renewed, nothing sent.
    clock = start + 50 * 3_600_000;
    calls = [];
    const same = await configure(deps).sync();
    expect(same.results).toContainEqual({ surveyId: '5310', status: 'unchanged' });
    expect(calls.filter((c) => c.startsWith('PUT'))).toEqual([]);
    expect((await syncRegistry.get('5310'))?.verifiedAt).toBe(new Date(clock).toISOString());

    // A read-back the marketplace refuses is tried again the next day, not every run (the others get their turn).
    /** The marketplace as it is, but for read-backs answered `httpStatus`. */
    const readBacksAnswer = (httpStatus: number): MarketplaceClient => ({
      ...countingClient(),
      getSurveyRedirects: () =>
        Promise.reject(new MarketplaceError({ endpoint: 'x', kind: 'http', httpStatus, detail: 'refused' })),
    });
    const refuse = readBacksAnswer(404);
    clock = start + 75 * 3_600_000;
    const refused = await configure({ ...deps, marketplace: refuse }).sync();
    expect(refused.results).toContainEqual(expect.objectContaining({ surveyId: '5310', status: 'skipped' }));
    expect((await syncRegistry.get('5310'))?.readBackAt).toBe(new Date(clock).toISOString());
    clock += 3_600_000;
    calls = [];
    await configure(deps).sync();
    expect(readBacks()).toBe(0);
    expect((await syncRegistry.get('5310'))?.readBackFailures).toBe(1);
    // Refused again the next day, then read as applied: the count starts over.
    const refusedRun = () => configure({ ...deps, marketplace: refuse }).sync();
    clock = start + 100 * 3_600_000;
    await refusedRun();
    expect((await syncRegistry.get('5310'))?.readBackFailures).toBe(2);
    // The marketplace not answering is no news of the survey: not counted.
    const down = readBacksAnswer(503);
    clock = start + 125 * 3_600_000;
    // (Read back, or left for the next run once ten surveys in a row met the marketplace down.)
    const downRun = await configure({ ...deps, marketplace: down }).sync();
    const downResult = downRun.results.find((r) => r.surveyId === '5310');
    expect(downResult?.status).toMatch(/^(skipped|deferred)$/);
    expect((await syncRegistry.get('5310'))?.readBackFailures).toBe(2);
    // Nor put off to the next day: looked at again in an hour, not every run (behind the surveys unread longer).
    const downAt = clock;
    if (downResult?.status === 'skipped') {
      clock += 15 * 60_000;
      calls = [];
      await configure(deps).sync();
      expect(readBacks()).toBe(0);
    }
    clock = downAt + UNANSWERED_READ_BACK_RETRY_MS + 60_000;
    calls = [];
    expect((await configure(deps).sync()).results).toContainEqual({ surveyId: '5310', status: 'unchanged' });
    expect(readBacks()).toBe(1);
    expect((await syncRegistry.get('5310'))?.readBackFailures).toBeUndefined();
    // Refused on three daily tries in a row: where its postbacks go is not known any more. Unverified and failed,
    // then applied again by the next run.
    for (const hours of [175, 200]) {
      clock = start + hours * 3_600_000;
      expect((await refusedRun()).results).toContainEqual(
        expect.objectContaining({ surveyId: '5310', status: 'skipped' }),
      );
    }
    clock = start + 225 * 3_600_000;
    expect((await refusedRun()).results).toContainEqual({
      surveyId: '5310',
      status: 'failed',
      error: expect.stringMatching(/could not be read back on 3 daily tries in a row/),
    });
    expect(await syncRegistry.get('5310')).toMatchObject({
      verified: false,
      failures: 1,
      lastError: expect.stringMatching(/^read-back: /),
    });
    clock += 60_000;
    expect((await configure(deps).sync()).results).toContainEqual({
      surveyId: '5310',
      status: 'applied',
      kid: 'k1',
    });
    expect(await syncRegistry.get('5310')).toMatchObject({ verified: true, failures: 0 });

    // Removed: what it was configured with goes, its prices stay for reconciliation.
    const priced = await syncRegistry.get('5310');
    await configure(deps).remove(['5310']);
    expect(await syncRegistry.get('5310')).toMatchObject({
      state: 'removed',
      expectedCpi: priced?.expectedCpi,
      cpiHistory: priced?.cpiHistory,
      priceSeenAt: expect.any(String),
    });
    expect((await syncRegistry.get('5310'))?.priceSeenAt).toBe(priced?.priceSeenAt);

    // Turned off, nothing is read back however long ago it was.
    clock = start + 300 * 3_600_000;
    expect((await configure({ ...deps, readBacksPerRun: 0 }).sync()).reverified).toBe(0);
  });

  it('reads back as many surveys a run as every verified live one once a day needs, unless the setting says how many', async () => {
    const syncRegistry = await freshRegistry();
    const start = Date.now();
    let clock = start;
    const ids = Array.from({ length: 60 }, (_, i) => String(5601 + i));
    for (const id of ids) marketplace.state.addSurvey({ surveyId: Number(id) }, new Date(start - 100_000));
    try {
      await configure({
        registry: syncRegistry,
        initialSince: new Date(start - 120_000),
        now: () => new Date(clock),
      }).sync();
      // Every verified one: these 60 and whatever else the marketplace listed as changed lately.
      const real = (await syncRegistry.list()).filter((r) => r.verified);
      expect((await syncRegistry.many(ids)).filter((r) => r.verified)).toHaveLength(60);
      // A supplier of 3,700 verified live surveys and more: the registry's listing with copies of a verified one,
      // read back an hour before the run; the real ones a day and more before it.
      const model = real[0] as SurveyRegistration;
      clock = start + 25 * 3_600_000;
      const recently = new Date(clock - 3_600_000).toISOString();
      const others = Array.from({ length: 3_700 - 60 }, (_, i) => ({
        ...model,
        surveyId: String(900_000 + i),
        readBackAt: recently,
      }));
      const large: SurveyRegistry = {
        ...syncRegistry,
        list: async (listing) => [...(await syncRegistry.list(listing)), ...others],
      };
      const run = async (overrides: Partial<RedirectConfigurationDeps>) => {
        // Not the hourly run (it would look up the copies the list of live surveys leaves out, as closures).
        await syncRegistry.advanceCheckpoint(FULL_LISTING_CHECKPOINT, new Date(clock).toISOString());
        return configure({ registry: large, now: () => new Date(clock), ...overrides }).sync();
      };
      // 3,700 and more over 72 runs: 52 a run or more, where a fixed 50 would leave some unread for over a day.
      const perRun = readBacksPerRunFor(real.length + others.length);
      expect(perRun).toBeGreaterThanOrEqual(52);
      expect((await run({})).reverified).toBe(perRun);
      clock += 60_000;
      // Set, the setting stands.
      expect((await run({ readBacksPerRun: 5 })).reverified).toBe(5);
      const reread = (await syncRegistry.list()).filter(
        (r) => r.verified && (r.readBackAt ?? '') >= recently,
      );
      expect(reread).toHaveLength(perRun + 5);
    } finally {
      // Out of the other tests' listings of live surveys.
      for (const id of ids) marketplace.state.setLive(Number(id), false);
    }
  });

  it("moves a verified survey's postbacks to their own host at its next read-back once one is configured, its redirects staying", async () => {
    const syncRegistry = await freshRegistry();
    const start = Date.now();
    let clock = start;
    const deps = {
      registry: syncRegistry,
      initialSince: new Date(start - 120_000),
      now: () => new Date(clock),
    };
    marketplace.state.addSurvey({ surveyId: 5311 }, new Date(start - 100_000));
    await configure(deps).sync();
    // The stack now has a postback API: the next day's read-back applies the survey again, an apply, not a drift.
    clock = start + 25 * 3_600_000;
    const moved = await configure({ ...deps, postbackBaseUrl: 'https://postbacks.test' }).sync();
    expect(moved.results).toContainEqual({ surveyId: '5311', status: 'applied', kid: 'k1' });
    const { actual } = await configure({ ...deps, postbackBaseUrl: 'https://postbacks.test' }).show('5311');
    expect(actual?.pstbck).toMatch(/^https:\/\/postbacks\.test\/postback\/5311\/success\?/);
    expect(actual?.pstbck_fail).toMatch(/^https:\/\/postbacks\.test\/postback\/5311\/fail\?/);
    expect(actual?.sUrl).toMatch(/^https:\/\/hits\.test\/redirect\/5311\/success\?/);
  });

  it("takes a registered survey's new price from the hourly listing of every live survey when the listing by date does not show the change", async () => {
    const syncRegistry = await freshRegistry();
    const at = (ms: number) => () => new Date(Date.now() + ms);
    marketplace.state.addSurvey({ surveyId: 5252, cpi: '1.50' }, new Date(Date.now() - 2 * SYNC_OVERLAP_MS));
    // Modified three hours ago: inside the listing by date's overlap, listed (and priced) again by every run.
    marketplace.state.addSurvey({ surveyId: 5253, cpi: '1.50' }, new Date(Date.now() - 3 * 3_600_000));
    await configure({ registry: syncRegistry }).sync();
    const registered = Date.now();
    expect((await syncRegistry.get('5252'))?.expectedCpi).toBe('1.50');
    expect((await syncRegistry.get('5253'))?.expectedCpi).toBe('1.50');
    // Repriced at the marketplace without their modified time moving: the listing by date leaves 5252 out.
    for (const id of [5252, 5253]) {
      const listed = marketplace.state.surveys.get(id);
      if (listed) listed.cpi = '1.80';
    }
    const run = await configure({ registry: syncRegistry, now: at(61 * 60_000) }).sync();
    expect(run.results.map((r) => r.surveyId)).not.toContain('5252');
    const repriced = await syncRegistry.get('5252');
    expect(repriced?.expectedCpi).toBe('1.80');
    expect(repriced?.cpiHistory?.map((p) => p.cpi)).toEqual(['1.50', '1.80']);
    // Since the run that saw it, not since the survey's old modified time.
    expect(Date.parse(repriced?.cpiHistory?.at(-1)?.since ?? '')).toBeGreaterThan(Date.now());
    // The one listed by date: not dated before a listing last showed the old price (its modified time, three hours back,
    // over completes made at 1.50 since).
    const inOverlap = await syncRegistry.get('5253');
    expect(inOverlap?.cpiHistory?.map((p) => p.cpi)).toEqual(['1.50', '1.80']);
    expect(Date.parse(inOverlap?.cpiHistory?.at(-1)?.since ?? '')).toBeGreaterThanOrEqual(registered - 5_000);
    // Seen again at the same price: not written again.
    const updatedAt = repriced?.updatedAt;
    await configure({ registry: syncRegistry, now: at(122 * 60_000) }).sync();
    expect((await syncRegistry.get('5252'))?.updatedAt).toBe(updatedAt);
    // A registration with no price at all (written by a release before prices were kept, or by hand): its first
    // price from the hourly listing is dated by the survey's last change there, not the run (clicks since that
    // change were at that price).
    const {
      expectedCpi: _,
      cpiHistory: __,
      priceSeenAt: ___,
      ...unpriced
    } = (await syncRegistry.get('5252')) as SurveyRegistration;
    await syncRegistry.put(unpriced);
    const changed = marketplace.state.surveys.get(5252)?.modifiedAt as Date;
    await configure({ registry: syncRegistry, now: at(183 * 60_000) }).sync();
    expect((await syncRegistry.get('5252'))?.cpiHistory).toEqual([
      { cpi: '1.80', since: new Date(Math.floor(changed.getTime() / 1000) * 1000).toISOString() },
    ]);
  });

  it('configures a live survey the listing by date never shows, found by the hourly listing of every live survey', async () => {
    const syncRegistry = await freshRegistry();
    const at = (ms: number) => () => new Date(Date.now() + ms);
    await configure({ registry: syncRegistry }).sync();
    // Allocated to us now, last changed long before the checkpoint: the listing by date leaves it out.
    marketplace.state.addSurvey({ surveyId: 5251 }, new Date(Date.now() - 2 * SYNC_OVERLAP_MS));
    calls = [];
    const soon = await configure({ registry: syncRegistry, now: at(60_000) }).sync();
    expect(soon.results.map((r) => r.surveyId)).not.toContain('5251');
    expect(calls.filter((c) => c.endsWith('/getAllocatedSurveys'))).toEqual([]);
    const hourLater = await configure({ registry: syncRegistry, now: at(61 * 60_000) }).sync();
    expect(hourLater.unlisted).toBe(1);
    expect(hourLater.results).toContainEqual({ surveyId: '5251', status: 'applied', kid: 'k1' });
    expect((await syncRegistry.get('5251'))?.verified).toBe(true);
  });

  it('records a survey closed once the list of live surveys leaves it out and the marketplace says so; live again, it is not', async () => {
    const syncRegistry = await freshRegistry();
    const at = (hours: number) => () => new Date(Date.now() + hours * 3_600_000);
    marketplace.state.addSurvey({ surveyId: 5261 });
    await configure({ registry: syncRegistry }).sync();
    expect((await syncRegistry.get('5261'))?.verified).toBe(true);
    marketplace.state.setLive(5261, false);
    // The next hourly listing leaves it out: looked up, and recorded closed.
    const closed = await configure({ registry: syncRegistry, now: at(1.1) }).sync();
    expect(closed.results).toContainEqual({
      surveyId: '5261',
      status: 'closed',
      reason: 'Survey 5261 is Paused/Closed',
    });
    expect((await syncRegistry.get('5261'))?.closedAt).toBeDefined();
    // Closed: not looked up again within the day, and not read back; a day later looked up once, still closed.
    calls = [];
    const hourLater = await configure({ registry: syncRegistry, now: at(2.2) }).sync();
    expect(hourLater.results.map((r) => r.surveyId)).not.toContain('5261');
    expect(calls.filter((c) => c.includes('5261'))).toEqual([]);
    calls = [];
    const dayLater = await configure({ registry: syncRegistry, now: at(26) }).sync();
    expect(dayLater.results).toContainEqual({
      surveyId: '5261',
      status: 'skipped',
      reason: 'marketplace says: Survey 5261 is Paused/Closed',
    });
    expect(calls.filter((c) => c.includes('5261'))).toEqual([
      'GET /supply/getAllocatedSurveysBySurveyId/5261',
    ]);
    // Live again: the next listing shows it, and the registration is open again (and read back).
    marketplace.state.setLive(5261, true);
    const reopened = await configure({ registry: syncRegistry, now: at(27.1) }).sync();
    expect((await syncRegistry.get('5261'))?.closedAt).toBeUndefined();
    expect(reopened.results).toContainEqual({ surveyId: '5261', status: 'unchanged' });
  });

  it.each([
    [
      'a rate limit answered 400 in words with a "no" in them',
      5741,
      () =>
        new Response(
          JSON.stringify({
            apiStatus: 'Failure',
            msg: 'Rate limit exceeded: no more than 10 calls per second',
          }),
          { status: 400 },
        ),
    ],
    [
      'an access token refused with 404',
      5742,
      () =>
        new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Invalid access token' }), { status: 404 }),
    ],
    [
      'a success without the survey that does not say it is paused or closed',
      5743,
      () =>
        new Response(JSON.stringify({ apiStatus: 'success', msg: 'Too many requests, please slow down' }), {
          status: 200,
        }),
    ],
  ])(
    'a survey the listing leaves out, looked up while the marketplace refuses the call (%s): not recorded closed, nor removed',
    async (_, id, answer) => {
      const syncRegistry = await freshRegistry();
      const at = (hours: number) => () => new Date(Date.now() + hours * 3_600_000);
      marketplace.state.addSurvey({ surveyId: id });
      await configure({ registry: syncRegistry }).sync();
      expect((await syncRegistry.get(String(id)))?.verified).toBe(true);
      marketplace.state.setLive(id, false);
      // Every call naming the survey is refused so: its lookup, its redirects' read, their delete.
      const refusing = createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        fetch: async (input, init) => (String(input).includes(`/${id}`) ? answer() : fetch(input, init)),
      });
      const report = await configure({ registry: syncRegistry, marketplace: refusing, now: at(1.1) }).sync();
      expect(report.results.find((r) => r.surveyId === String(id))?.status).not.toBe('closed');
      expect((await syncRegistry.get(String(id)))?.closedAt).toBeUndefined();
      // Nor is a removal refused so taken as done: the marketplace may still send its postbacks here. (A delete
      // answered success is one.)
      if (answer().status === 200) return;
      const [removal] = await configure({
        registry: syncRegistry,
        marketplace: refusing,
        now: at(1.2),
      }).remove([String(id)]);
      expect(removal).toMatchObject({ surveyId: String(id), status: 'failed' });
      expect(await syncRegistry.get(String(id))).toMatchObject({ state: 'active' });
    },
  );

  it('lists ended registrations only as far back as asked, reads any by key, and still leaves a removed survey alone or opens a closed one when listed live', async () => {
    const syncRegistry = await freshRegistry();
    const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
    const base = { verified: true, failures: 0, updatedAt: daysAgo(100) };
    await syncRegistry.put({ ...base, surveyId: '5271', state: 'active', closedAt: daysAgo(100) });
    await syncRegistry.put({ ...base, surveyId: '5272', state: 'removed', removedAt: daysAgo(100) });
    await syncRegistry.put({ ...base, surveyId: '5273', state: 'active', closedAt: daysAgo(1) });
    await syncRegistry.put({ ...base, surveyId: '5274', state: 'active' });
    const ids = async (listing?: { endedSince: string }) =>
      (await syncRegistry.list(listing)).map((r) => r.surveyId);
    expect(await ids()).toEqual(['5271', '5272', '5273', '5274']);
    expect(await ids({ endedSince: daysAgo(7) })).toEqual(['5273', '5274']);
    expect(await syncRegistry.surveyIds({ endedSince: daysAgo(7) })).toEqual(['5273', '5274']);
    expect(await syncRegistry.surveyIds()).toEqual(['5271', '5272', '5273', '5274']);
    expect((await syncRegistry.many(['5271', '5272', '5999'])).map((r) => r.surveyId).sort()).toEqual([
      '5271',
      '5272',
    ]);
    // Listed live at the marketplace again, ended long before the sync's own listing reaches: the removed one is
    // left alone, the closed one is open and live again.
    marketplace.state.addSurvey({ surveyId: 5271 });
    marketplace.state.addSurvey({ surveyId: 5272 });
    const run = await configure({ registry: syncRegistry }).sync();
    expect(run.results).toContainEqual({
      surveyId: '5272',
      status: 'skipped',
      reason: 'redirects were removed by an operator',
    });
    expect(marketplace.state.effectiveRedirects(5272).pstbck ?? '').not.toContain(BASE);
    expect((await syncRegistry.get('5271'))?.closedAt).toBeUndefined();
    // Removed long ago, and listed as a row that does not read (its id does): still left alone.
    await syncRegistry.put({ ...base, surveyId: '5275', state: 'removed', removedAt: daysAgo(100) });
    marketplace.state.addSurvey({ surveyId: 5275 });
    const client = countingClient();
    const unreadable = await configure({
      registry: syncRegistry,
      marketplace: {
        ...client,
        getAllocatedSurveysByDate: async () => ({
          rows: [],
          malformed: [
            {
              endpoint: 'GET /supply/getAllocatedSurveysByDate',
              index: 0,
              problem: 'cpi',
              reference: '5275',
            },
          ],
        }),
      },
    }).sync();
    expect(unreadable.results).toContainEqual({
      surveyId: '5275',
      status: 'skipped',
      reason: 'redirects were removed by an operator',
    });
    expect((await syncRegistry.get('5275'))?.state).toBe('removed');
    // (The marketplace's other live surveys are configured by that run too.) 5274, which the marketplace does not
    // know, was left out of the list of live surveys and is recorded closed.
    const live = await ids({ endedSince: daysAgo(0) });
    expect(live).toEqual(expect.arrayContaining(['5271']));
    expect(live).not.toContain('5274');
    expect((await syncRegistry.get('5274'))?.closedAt).toBeDefined();
    expect(live).not.toContain('5272');
    expect(live).not.toContain('5273');
  });

  it('an hourly sync run moves ended registrations an earlier release kept among the live ones', async () => {
    const table = await freshTable();
    const client = createDocumentClient({ endpoint: table.endpoint });
    const syncRegistry = createSurveyRegistry(client, table.tableName);
    const closedAt = new Date(Date.now() - 40 * 86_400_000).toISOString();
    // As an earlier release wrote it: under the live part of the index, though closed.
    await client.send(
      new PutCommand({
        TableName: table.tableName,
        Item: {
          pk: 'SURVEY#5276',
          sk: 'REDIRECTS',
          gsi1pk: 'SURVEYS',
          gsi1sk: '5276',
          kind: 'survey',
          surveyId: '5276',
          state: 'active',
          verified: true,
          failures: 0,
          closedAt,
          updatedAt: closedAt,
        },
      }),
    );
    const recent = { endedSince: new Date(Date.now() - 86_400_000).toISOString() };
    // Listed with the live ones (nothing is lost meanwhile), until the run that lists every live survey moves it.
    expect(await syncRegistry.surveyIds(recent)).toEqual(['5276']);
    await configure({ registry: syncRegistry }).sync();
    // (The sync configured the marketplace's live surveys meanwhile: they are live here now.)
    expect(await syncRegistry.surveyIds(recent)).not.toContain('5276');
    expect(await syncRegistry.surveyIds()).toContain('5276');
    expect((await syncRegistry.get('5276'))?.closedAt).toBe(closedAt);
  });

  it('relocation leaves a registration written since it was read as its writer left it, and stops once none is left', async () => {
    const table = await freshTable();
    const client = createDocumentClient({ endpoint: table.endpoint });
    const closedAt = new Date(Date.now() - 40 * 86_400_000).toISOString();
    const misplaced = (surveyId: string) =>
      new PutCommand({
        TableName: table.tableName,
        Item: {
          pk: `SURVEY#${surveyId}`,
          sk: 'REDIRECTS',
          gsi1pk: 'SURVEYS',
          gsi1sk: surveyId,
          kind: 'survey',
          surveyId,
          state: 'active',
          verified: true,
          failures: 0,
          closedAt,
          updatedAt: closedAt,
        },
      });
    await client.send(misplaced('5277'));
    await client.send(misplaced('5278'));
    const direct = createSurveyRegistry(client, table.tableName);
    // An operator's write lands on 5277 between the relocation's read and its write.
    let raced = false;
    const racing = {
      send: async (command: { input: { Item?: { surveyId?: string } } }) => {
        if (!raced && command.input.Item?.surveyId === '5277') {
          raced = true;
          const current = await direct.get('5277');
          await direct.put({
            ...(current as SurveyRegistration),
            closedAt: undefined,
            updatedAt: new Date().toISOString(),
          });
        }
        return client.send(command as never);
      },
    } as unknown as typeof client;
    const syncRegistry = createSurveyRegistry(racing, table.tableName);
    let relocations = 0;
    const counting: SurveyRegistry = {
      ...syncRegistry,
      relocateEnded: (limit) => {
        relocations += 1;
        return syncRegistry.relocateEnded(limit);
      },
    };
    const hour = 3_600_000;
    const at = (hours: number) => () => new Date(Date.now() + hours * hour);
    await configure({ registry: counting, now: at(0) }).sync();
    expect(raced).toBe(true);
    // The operator's write stands: reopened, not put back as the relocation read it.
    expect((await direct.get('5277'))?.closedAt).toBeUndefined();
    expect((await direct.get('5278'))?.closedAt).toBe(closedAt);
    const recent = { endedSince: new Date(Date.now() - 86_400_000).toISOString() };
    expect(await direct.surveyIds(recent)).not.toContain('5278');
    expect(await direct.checkpoint(RELOCATED_CHECKPOINT)).toBeUndefined();
    // The next hourly run finds none left and records so; the runs after it do not look again.
    await configure({ registry: counting, now: at(1.1) }).sync();
    expect(relocations).toBe(2);
    expect(await direct.checkpoint(RELOCATED_CHECKPOINT)).toBeDefined();
    await configure({ registry: counting, now: at(2.2) }).sync();
    expect(relocations).toBe(2);
  });

  it('closure lookups go to those looked up longest ago, so a list that keeps leaving live surveys out starves none', async () => {
    const syncRegistry = await freshRegistry();
    const ids = ['5281', '5282', '5283'];
    for (const id of ids) marketplace.state.addSurvey({ surveyId: Number(id) });
    await configure({ registry: syncRegistry }).apply(ids);
    // Listings of live surveys that leave these three out, though they are live.
    const omitting: typeof fetch = async (input, init) => {
      const answer = await fetch(input, init);
      const path = new URL(String(input)).pathname;
      if (!path.endsWith('/getAllocatedSurveys') && !path.includes('/getAllocatedSurveysByDate/'))
        return answer;
      const body = (await answer.json()) as { result: { surveyId?: number; SurveyId?: number }[] };
      const result = body.result.filter((s) => !ids.includes(String(s.surveyId ?? s.SurveyId)));
      return new Response(JSON.stringify({ ...body, result }), { status: 200 });
    };
    const lookedUp: string[][] = [];
    for (const hours of [1.1, 2.2]) {
      calls = [];
      await configure({
        registry: syncRegistry,
        marketplace: createMarketplaceClient({
          baseUrl: marketplace.url,
          accessToken: () => TOKEN,
          fetch: async (input, init) => {
            calls.push(new URL(String(input)).pathname);
            return omitting(input, init);
          },
        }),
        closureLookupsPerRun: 2,
        now: () => new Date(Date.now() + hours * 3_600_000),
      }).sync();
      lookedUp.push(
        calls
          .filter((c) => c.includes('getAllocatedSurveysBySurveyId/'))
          .map((c) => c.split('/').pop() as string)
          .filter((id) => ids.includes(id)),
      );
    }
    expect(lookedUp[0]).toHaveLength(2);
    // The one not looked up in the first hour is looked up in the second.
    const missed = ids.filter((id) => !lookedUp[0]?.includes(id));
    expect(lookedUp[1]).toEqual(expect.arrayContaining(missed));
    for (const id of ids) expect((await syncRegistry.get(id))?.closedAt).toBeUndefined();
  });

  it('closure lookups go before the daily read-backs, and a run that could not take them up lists every live survey again with the next run', async () => {
    const syncRegistry = await freshRegistry();
    const start = Date.now();
    const verified = ['5721', '5722', '5723', '5724', '5725', '5726'];
    const closed = ['5727', '5728'];
    for (const id of [...verified, ...closed]) marketplace.state.addSurvey({ surveyId: Number(id) });
    await configure({ registry: syncRegistry }).apply([...verified, ...closed]);
    for (const id of closed) marketplace.state.setLive(Number(id), false);
    const lookups: string[] = [];
    const readBacks: string[] = [];
    const client = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async (input, init) => {
        const path = new URL(String(input)).pathname;
        const lookedUp = path.match(/getAllocatedSurveysBySurveyId\/(\d+)/)?.[1];
        if (lookedUp) lookups.push(lookedUp);
        const readBack = path.match(/surveySpecificRedirects\/(\d+)/)?.[1];
        if (readBack) {
          readBacks.push(readBack);
          // A slow marketplace: each read-back takes a while, so the run's time goes before its work list ends.
          await new Promise((resolve) => setTimeout(resolve, 150));
        }
        const answer = await fetch(input, init);
        if (!path.endsWith('/getAllocatedSurveys')) return answer;
        // The marketplace's other surveys (of the other tests) are none of this supplier's.
        const body = (await answer.json()) as { result: { surveyId?: number; SurveyId?: number }[] };
        const result = body.result.filter((row) => verified.includes(String(row.surveyId ?? row.SurveyId)));
        return new Response(JSON.stringify({ ...body, result }), { status: 200 });
      },
    });
    // Two days on: every verified survey is due its daily read-back, and the hourly listing leaves the closed out;
    // none listed as changed since.
    const at = start + 2 * 86_400_000;
    await syncRegistry.advanceCheckpoint(SYNC_CHECKPOINT, new Date(at).toISOString());
    const run = (minutes: number, budgetMs: number) => {
      const began = Date.now();
      return configure({
        registry: syncRegistry,
        marketplace: client,
        concurrency: 1,
        readBacksPerRun: 6,
        closureLookupsPerRun: 2,
        now: () => new Date(at + minutes * 60_000 + Date.now() - began),
      }).sync({ deadline: new Date(at + minutes * 60_000 + budgetMs) });
    };
    // A run with no time for any survey: the listing of every live survey is taken again by the next.
    const none = await run(0, -1);
    expect(none.results.every((r) => r.status === 'deferred')).toBe(true);
    expect(lookups).toEqual([]);
    // Fifteen minutes on, time for a few surveys: the closure lookups before the read-backs.
    const some = await run(15, 250);
    expect(lookups.slice(0, 2).sort()).toEqual(closed);
    for (const id of closed) expect((await syncRegistry.get(id))?.closedAt).toBeDefined();
    expect(some.results.filter((r) => r.status === 'deferred').length).toBeGreaterThan(0);
    expect(readBacks.length).toBeLessThan(verified.length);
    for (const id of verified) marketplace.state.setLive(Number(id), false);
  });

  it('a survey whose lookup keeps failing: retried on the backoff if unverified, and behind the others in the closure lookups', async () => {
    const syncRegistry = await freshRegistry();
    const start = Date.now();
    // 5291: never verified (its apply failed an hour ago). 5293: verified. 5294: verified, since paused. Looking
    // up 5291 or 5293 fails every time.
    for (const id of [5293, 5294]) marketplace.state.addSurvey({ surveyId: id });
    await configure({ registry: syncRegistry }).apply(['5293', '5294']);
    for (const id of [5293, 5294]) marketplace.state.setLive(id, false);
    await syncRegistry.put(failedAnHourAgo('5291', start));
    const gone = ['5291', '5293'];
    const lookups: string[] = [];
    // Its lookup alone keeps failing (a survey the marketplace cannot serve); one it does not know: below.
    const client = lookingUp(lookups, (id) =>
      gone.includes(id)
        ? new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Service unavailable' }), { status: 503 })
        : undefined,
    );
    const run = (minutes: number) =>
      configure({
        registry: syncRegistry,
        marketplace: client,
        closureLookupsPerRun: 1,
        now: () => new Date(start + minutes * 60_000),
      }).sync();
    // The first run: the unverified one's lookup fails and is counted; one closure lookup, which fails too.
    const first = await run(70);
    expect(first.results).toContainEqual(expect.objectContaining({ surveyId: '5291', status: 'failed' }));
    expect(await syncRegistry.get('5291')).toMatchObject({
      failures: 2,
      lastErrorAt: new Date(start + 70 * 60_000).toISOString(),
    });
    // Within its backoff (a quarter of an hour after the second failure): not looked up; after it, again.
    lookups.length = 0;
    await run(80);
    expect(lookups).not.toContain('5291');
    lookups.length = 0;
    await run(140);
    expect(lookups).toContain('5291');
    expect((await syncRegistry.get('5291'))?.failures).toBe(3);
    // One closure lookup an hour: whichever went first, the other goes the hour after (a failed one is a look).
    const closureLookups = lookups.filter((id) => id !== '5291');
    expect(closureLookups).toHaveLength(1);
    lookups.length = 0;
    await run(200);
    expect(lookups.filter((id) => id !== '5291')).toEqual(
      ['5293', '5294'].filter((id) => !closureLookups.includes(id)),
    );
    expect((await syncRegistry.get('5294'))?.closedAt).toBeDefined();
    expect((await syncRegistry.get('5293'))?.closedAt).toBeUndefined();
    // Listed live again within its backoff: its failures were lookups only, so it is applied at once.
    gone.splice(gone.indexOf('5291'), 1);
    marketplace.state.addSurvey({ surveyId: 5291 }, new Date(start + 205 * 60_000));
    const listedAgain = await run(210);
    expect(listedAgain.results).toContainEqual({ surveyId: '5291', status: 'applied', kid: 'k1' });
  });

  it('a lookup refused with a 400 that says the survey is not found is a survey the marketplace no longer knows; a bare 400 is not', async () => {
    const syncRegistry = await freshRegistry();
    const start = Date.now();
    for (const surveyId of ['5334', '5335']) await syncRegistry.put(failedAnHourAgo(surveyId, start));
    const refused = (msg: string) =>
      new Response(JSON.stringify({ apiStatus: 'Failure', msg }), { status: 400 });
    const client = lookingUp([], (id) =>
      refused(id === '5334' ? `Survey ${id} not found` : 'Request could not be served'),
    );
    const { results } = await configure({
      registry: syncRegistry,
      marketplace: client,
      now: () => new Date(start + 70 * 60_000),
    }).sync();
    expect(results).toContainEqual({
      surveyId: '5334',
      status: 'closed',
      reason: 'the marketplace no longer knows survey 5334',
    });
    expect(results).toContainEqual(expect.objectContaining({ surveyId: '5335', status: 'failed' }));
  });

  it('a survey the marketplace no longer knows is recorded closed, looked at once a day, and opened again when listed live', async () => {
    const syncRegistry = await freshRegistry();
    const start = Date.now();
    // 5330: verified, then deleted at the marketplace. 5331: its apply failed an hour ago, then deleted. 5332: a
    // 404 to its lookup that does not say it is unknown, and whose redirects still read back: not closed.
    for (const id of [5330, 5332]) marketplace.state.addSurvey({ surveyId: id });
    await configure({ registry: syncRegistry }).apply(['5330', '5332']);
    marketplace.state.setLive(5332, false);
    await syncRegistry.put(failedAnHourAgo('5331', start));
    const deleted = (id: number) => {
      marketplace.state.surveys.delete(id);
      marketplace.state.surveyRedirects.delete(id);
    };
    deleted(5330);
    const lookups: string[] = [];
    const client = lookingUp(lookups, (id) =>
      id === '5332'
        ? new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Request could not be served' }), {
            status: 404,
          })
        : undefined,
    );
    const run = (minutes: number) =>
      configure({
        registry: syncRegistry,
        marketplace: client,
        now: () => new Date(start + minutes * 60_000),
      }).sync();
    const first = await run(70);
    for (const id of ['5330', '5331'])
      expect(first.results).toContainEqual({
        surveyId: id,
        status: 'closed',
        reason: `the marketplace no longer knows survey ${id}`,
      });
    expect(first.results).toContainEqual(expect.objectContaining({ surveyId: '5332', status: 'failed' }));
    expect(await syncRegistry.get('5330')).toMatchObject({
      closedAt: new Date(start + 70 * 60_000).toISOString(),
      verified: true,
    });
    expect((await syncRegistry.get('5331'))?.failures).toBe(1);
    expect((await syncRegistry.get('5332'))?.closedAt).toBeUndefined();
    // The hours after: neither is looked up, nothing fails for them; a day later, one look each, which fails no run.
    lookups.length = 0;
    const later = await run(130);
    expect(lookups.filter((id) => id !== '5332')).toEqual([]);
    expect(later.results.filter((r) => r.surveyId !== '5332' && r.status === 'failed')).toEqual([]);
    lookups.length = 0;
    const nextDay = await run(70 + 25 * 60);
    expect(lookups.filter((id) => id !== '5332').sort()).toEqual(['5330', '5331']);
    expect(nextDay.results.filter((r) => r.surveyId !== '5332' && r.status === 'failed')).toEqual([]);
    // Created again under its id and listed live: open again, and its redirects applied.
    marketplace.state.addSurvey({ surveyId: 5330 }, new Date(start + 26 * 60 * 60_000));
    const listed = await run(27 * 60);
    expect(listed.results).toContainEqual(expect.objectContaining({ surveyId: '5330', status: 'applied' }));
    expect((await syncRegistry.get('5330'))?.closedAt).toBeUndefined();
    // A rotation meets 5331 (closed, unknown) and 5332 (failing): only 5332 is left on the old key.
    const rotation = await configure({ registry: syncRegistry, marketplace: client }).rotate({
      secret: 'second-signing-key-for-redirect-tests-00',
      retireAt: new Date(start + 48 * 3_600_000),
    });
    expect(rotation.results).toContainEqual({
      surveyId: '5331',
      status: 'closed',
      reason: 'the marketplace no longer knows survey 5331',
    });
    expect(rotation.results.filter((r) => r.status === 'failed').map((r) => r.surveyId)).not.toContain(
      '5331',
    );
  });

  it("the registry's replace writes only over the registration read: none, one by its updatedAt, one written by hand without any", async () => {
    const syncRegistry = await freshRegistry();
    const at = new Date().toISOString();
    const first = { surveyId: '5734', state: 'active' as const, verified: true, failures: 0, updatedAt: at };
    expect(await syncRegistry.replace(first, undefined)).toBe(true);
    // Another writer read nothing too: theirs loses.
    expect(await syncRegistry.replace({ ...first, kid: 'other' }, undefined)).toBe(false);
    const later = { ...first, kid: 'k2', updatedAt: new Date(Date.now() + 1_000).toISOString() };
    expect(await syncRegistry.replace(later, first)).toBe(true);
    expect(await syncRegistry.replace({ ...first, kid: 'k1' }, first)).toBe(false);
    expect((await syncRegistry.get('5734'))?.kid).toBe('k2');
    // An item without updatedAt (written by hand): replaced when read so, not when it has gained one since.
    await createDocumentClient({ endpoint }).send(
      new PutCommand({
        TableName: tableName,
        Item: {
          pk: 'SURVEY#5735',
          sk: 'REDIRECTS',
          kind: 'survey',
          surveyId: '5735',
          state: 'active',
          verified: true,
          failures: 0,
        },
      }),
    );
    const handMade = await registry.get('5735');
    expect(handMade?.surveyId).toBe('5735');
    expect(await registry.replace({ ...first, surveyId: '5735' }, handMade)).toBe(true);
    expect(await registry.replace({ ...first, surveyId: '5735', kid: 'x' }, handMade)).toBe(false);
  });

  it('a daily read-back whose registration a rotation re-signed meanwhile does not renew it over the rotation', async () => {
    const syncRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5736 }, new Date(Date.now() - 3 * 86_400_000));
    await configure({ registry: syncRegistry }).apply(['5736']);
    const read = await syncRegistry.get('5736');
    // The rotation lands while the read-back is on its way: its write stands.
    const rotated = {
      ...(read as NonNullable<typeof read>),
      kid: 'k9',
      updatedAt: new Date(Date.now() + 5).toISOString(),
    };
    const racing: SurveyRegistry = {
      ...syncRegistry,
      get: async (surveyId) => {
        const found = await syncRegistry.get(surveyId);
        if (surveyId === '5736') await syncRegistry.put(rotated);
        return found;
      },
    };
    await configure({
      registry: racing,
      now: () => new Date(Date.now() + 2 * 86_400_000),
    }).sync();
    expect(await syncRegistry.get('5736')).toMatchObject({ kid: 'k9', updatedAt: rotated.updatedAt });
    marketplace.state.setLive(5736, false);
  });

  it('a rotation and the scheduled sync applying one survey at once: the write that lands second leaves it unverified, and the next sync puts it on the current key', async () => {
    const syncRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5731 }, new Date(Date.now() - 3 * 86_400_000));
    // Its last apply failed an hour ago: its retry is due in the next sync run.
    const start = Date.now();
    await syncRegistry.put({ ...failedAnHourAgo('5731', start), kid: 'k1' });
    await syncRegistry.advanceCheckpoint(SYNC_CHECKPOINT, new Date(start).toISOString());
    await syncRegistry.advanceCheckpoint(FULL_LISTING_CHECKPOINT, new Date(start).toISOString());
    const oldRing = ring;
    // The rotation has set the new key's settings and read them back; its registry write is slow.
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let reached = () => {};
    const atWrite = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const slow: SurveyRegistry = {
      ...syncRegistry,
      replace: async (registration, read) => {
        if (registration.surveyId === '5731') {
          reached();
          await gate;
        }
        return syncRegistry.replace(registration, read);
      },
    };
    const rotating = configure({ registry: slow }).rotate({
      kid: 'k2',
      secret: 'second-signing-key-for-the-race-test-0000',
      retireAt: new Date(start + 3_600_000),
    });
    await atWrite;
    // Meanwhile the scheduled sync, which read the ring before the rotation saved it, retries the survey on k1.
    const sync = await configure({ registry: syncRegistry, keyRing: async () => oldRing }).sync();
    expect(sync.results).toContainEqual({ surveyId: '5731', status: 'applied', kid: 'k1' });
    expect(marketplace.state.effectiveRedirects(5731).pstbck).toContain('kid=k1');
    release();
    const rotation = await rotating;
    // The rotation's write lands second: not recorded verified on k2, which the marketplace does not hold.
    expect(rotation.results).toContainEqual(
      expect.objectContaining({
        surveyId: '5731',
        status: 'failed',
        error: expect.stringMatching(/at the same time/),
      }),
    );
    expect(await syncRegistry.get('5731')).toMatchObject({ verified: false });
    // The next sync run (the new ring) applies it again, on k2.
    const next = await configure({ registry: syncRegistry }).sync();
    expect(next.results).toContainEqual({ surveyId: '5731', status: 'applied', kid: 'k2' });
    expect(marketplace.state.effectiveRedirects(5731).pstbck).toContain('kid=k2');
    expect(await syncRegistry.get('5731')).toMatchObject({ kid: 'k2', verified: true });
    // Off the marketplace's listings again: the tests after it list every live survey.
    marketplace.state.setLive(5731, false);
  });

  it("a sync tick delivered twice (two runs at once, one ring): the same settings applied twice are verified, not failed as another writer's", async () => {
    const syncRegistry = await freshRegistry();
    const start = Date.now();
    const ids = [5749, 5750, 5751, 5752];
    for (const id of ids) marketplace.state.addSurvey({ surveyId: id }, new Date(start - 3_600_000));
    await syncRegistry.advanceCheckpoint(SYNC_CHECKPOINT, new Date(start - 2 * 3_600_000).toISOString());
    await syncRegistry.advanceCheckpoint(FULL_LISTING_CHECKPOINT, new Date(start).toISOString());
    const [a, b] = await Promise.all([
      configure({ registry: syncRegistry }).sync(),
      configure({ registry: syncRegistry }).sync(),
    ]);
    const ours = (run: typeof a) => run.results.filter((r) => ids.map(String).includes(r.surveyId));
    expect([...ours(a), ...ours(b)].filter((r) => r.status === 'failed')).toEqual([]);
    for (const id of ids)
      expect(await syncRegistry.get(String(id))).toMatchObject({ verified: true, kid: 'k1', failures: 0 });
    for (const id of ids) marketplace.state.setLive(id, false);
  });

  it('a rotation re-signs closed surveys too, which stay closed; a refused list of every live survey is reported, not counted', async () => {
    const syncRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5271 });
    await configure({ registry: syncRegistry }).apply(['5271']);
    const closedAt = new Date().toISOString();
    const registration = await syncRegistry.get('5271');
    await syncRegistry.put({ ...(registration as NonNullable<typeof registration>), closedAt });
    calls = [];
    const rotation = await configure({ registry: syncRegistry }).rotate({
      secret: 'a-third-signing-key-for-the-rotation-000',
      retireAt: new Date(Date.now() + 3_600_000),
    });
    // Resumed after the old key retires, it would otherwise refuse its postbacks until a sync re-signed it.
    expect(rotation.results).toContainEqual({ surveyId: '5271', status: 'applied', kid: rotation.kid });
    expect(marketplace.state.effectiveRedirects(5271).pstbck).toContain(`kid=${rotation.kid}`);
    expect((await syncRegistry.get('5271'))?.closedAt).toBe(closedAt);
    // The hourly listing of every live survey refused: the run goes on, and says so apart from its failures.
    const refusing: typeof fetch = async (input, init) =>
      String(input).includes('/getAllocatedSurveys?') || String(input).endsWith('/getAllocatedSurveys')
        ? new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'countryCode is required' }), {
            status: 400,
          })
        : fetch(input, init);
    const report = await configure({
      registry: syncRegistry,
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        fetch: refusing,
      }),
      now: () => new Date(Date.now() + 2 * 3_600_000),
    }).sync();
    expect(report.fullListingError).toMatch(/countryCode is required/);
    expect(report.listingError).toBeUndefined();
    expect(summarizeSyncRun(report).failed).toEqual([]);
  });

  it('a read-back the marketplace keeps spelling otherwise fails on its own fields only, retried less and less often', async () => {
    const urls = {
      sUrl: 'https://hits.test/r/1/success?pid=[%%pid%%]&token=[%%token%%]&kid=k1&sig=abc',
      pstbck: 'https://hits.test/p/1/success?pid=[%%pid%%]&token=[%%token%%]&kid=k1&sig=def',
      pstbck_fail: 'https://hits.test/p/1/fail?pid=[%%pid%%]&token=[%%token%%]&kid=k1&sig=ghi',
      tUrl: 'https://hits.test/r/1/term?pid=[%%pid%%]',
      pstBckSuccessMethod: 'POST',
    };
    /** The fields read back as differing from `urls`. */
    const drifted = (actual: Parameters<typeof settingsDifferences>[1]) =>
      settingsDifferences(urls, actual).map((d) => d.field);
    // Escaped placeholders and HTML ampersands are the same URL; fields it does not keep per survey are no drift.
    expect(
      drifted({
        sUrl: urls.sUrl.replaceAll('[%%pid%%]', '%5B%25%25pid%25%25%5D').replaceAll('&', '&amp;'),
        pstbck: urls.pstbck.replaceAll('[', '%5b').replaceAll(']', '%5d'),
        pstbck_fail: urls.pstbck_fail,
      }),
    ).toEqual([]);
    // Nor are its parameters written back in another order.
    expect(
      drifted({
        sUrl: 'https://hits.test/r/1/success?token=[%%token%%]&pid=[%%pid%%]&sig=abc&kid=k1',
        pstbck: urls.pstbck.replaceAll('&', '&amp;'),
        pstbck_fail: urls.pstbck_fail,
      }),
    ).toEqual([]);
    // An escaped `&` is no separator, and `&` as a numeric entity starts a fragment: the signature lost, a difference.
    expect(
      drifted({
        ...urls,
        pstbck: 'https://hits.test/p/1/success?kid=k1%26sig=def&pid=[%%pid%%]&token=[%%token%%]',
        pstbck_fail: urls.pstbck_fail.replaceAll('&', '&#38;'),
      }),
    ).toEqual(['pstbck', 'pstbck_fail']);
    // An escaped `=`, `/`, `?` or `+` changes how the receiver reads the URL (`kid%3Dk1` is no kid parameter,
    // `/p%2F1` no route): a difference, in either case of its hex; other escapes of ASCII are the same character.
    expect(
      drifted({
        ...urls,
        sUrl: urls.sUrl.replace('kid=k1', 'kid%3dk1'),
        pstbck: urls.pstbck.replace('/p/1/', '/p%2F1/'),
        pstbck_fail: urls.pstbck_fail.replace('?pid', '%3Fpid'),
      }),
    ).toEqual(['sUrl', 'pstbck', 'pstbck_fail']);
    expect(
      drifted({
        ...urls,
        sUrl: urls.sUrl.replace('kid=k1', 'kid=%6B1'),
        pstbck: urls.pstbck.replace('/p/1/', '/%70/1/'),
      }),
    ).toEqual([]);
    // Nor are the supplier's global values where it keeps none per survey (tUrl, the methods), or a host
    // spelled in another case, with its default port.
    expect(
      drifted({
        ...urls,
        sUrl: urls.sUrl.replace('https://hits.test/', 'HTTPS://Hits.TEST:443/'),
        pstbck: urls.pstbck.replace('https://hits.test/', 'https://hits.test:443/'),
        tUrl: 'https://panel.example/global-termination',
        pstBckSuccessMethod: 'GET',
        pstBckFailMethod: 'GET',
      }),
    ).toEqual([]);
    // A postback it does not report, or a different URL (another host, another port), is one.
    expect(drifted({ ...urls, pstbck_fail: undefined })).toEqual(['pstbck_fail']);
    expect(
      drifted({
        ...urls,
        pstbck: urls.pstbck.replace('hits.test/', 'hits.test:8443/'),
        pstbck_fail: urls.pstbck_fail.replace('hits.test', 'panel.example'),
        sUrl: urls.sUrl.replace('/r/1/', '/R/1/'),
      }),
    ).toEqual(['sUrl', 'pstbck', 'pstbck_fail']);
    expect(drifted({ ...urls, sUrl: urls.sUrl.replace('sig=abc', 'sig=abd') })).toEqual(['sUrl']);
    expect([1, 2, 3, 4, 9, 20].map((failures) => retryDelayMs(failures) / 60_000)).toEqual([
      0, 15, 30, 60, 1440, 1440,
    ]);
  });

  it('fails a listed survey whose id its URLs cannot carry, and goes on with the rest', async () => {
    const syncRegistry = await freshRegistry();
    const deps = { registry: syncRegistry, initialSince: new Date(Date.now() - 5_000) };
    marketplace.state.addSurvey({ surveyId: 1_234_567_890_123 });
    marketplace.state.addSurvey({ surveyId: 5410 });
    const report = await configure(deps).sync();
    expect(report.results).toContainEqual({
      surveyId: '1234567890123',
      status: 'failed',
      error: expect.stringMatching(/^survey 1234567890123: surveyId must be/),
    });
    expect(report.results).toContainEqual(expect.objectContaining({ surveyId: '5410', status: 'applied' }));
    // Gone again, so the other tests' listings do not meet it.
    marketplace.state.surveys.delete(1_234_567_890_123);
  });

  it('leaves a survey an operator removed alone, even when it changes', async () => {
    const syncRegistry = await freshRegistry();
    const deps = { registry: syncRegistry, initialSince: new Date(Date.now() - 5_000) };
    marketplace.state.addSurvey({ surveyId: 5401 });
    await configure(deps).sync();
    await configure(deps).remove(['5401']);
    marketplace.state.setLive(5401, true);
    const result = await configure({ ...deps }).sync();
    expect(result.results).toContainEqual({
      surveyId: '5401',
      status: 'skipped',
      reason: 'redirects were removed by an operator',
    });
  });

  it('defers what does not fit the time budget and moves the checkpoint only up to it', async () => {
    const syncRegistry = await freshRegistry();
    const base = Date.now() - 60_000;
    marketplace.state.addSurvey({ surveyId: 5501 }, new Date(base + 1_000));
    marketplace.state.addSurvey({ surveyId: 5502 }, new Date(base + 2_000));
    const deps = { registry: syncRegistry, initialSince: new Date(base), concurrency: 1 };
    const report = await configure(deps).sync({ deadline: new Date(0) });
    expect(report.results.every((r) => r.status === 'deferred')).toBe(true);
    // Nothing was processed: the checkpoint may move only to just before the first deferred survey.
    const checkpoint = await syncRegistry.checkpoint(SYNC_CHECKPOINT);
    expect(checkpoint === undefined || checkpoint < new Date(base + 1_000).toISOString()).toBe(true);
    const next = await configure(deps).sync();
    expect(next.results.filter((r) => r.status === 'applied').map((r) => r.surveyId)).toEqual(
      expect.arrayContaining(['5501', '5502']),
    );
  });

  it('a run that defers keeps the overlap before the first survey it left, as a run that does not', async () => {
    const syncRegistry = await freshRegistry();
    const base = Date.now();
    const changed = base - 20 * 3_600_000;
    marketplace.state.addSurvey({ surveyId: 5505 }, new Date(changed));
    try {
      const deps = { registry: syncRegistry, initialSince: new Date(base - 40 * 3_600_000), concurrency: 1 };
      const report = await configure(deps).sync({ deadline: new Date(0) });
      expect(report.results[0]).toMatchObject({ surveyId: '5505', status: 'deferred' });
      const checkpoint = await syncRegistry.checkpoint(SYNC_CHECKPOINT);
      expect(Date.parse(checkpoint ?? '')).toBeLessThanOrEqual(changed - SYNC_OVERLAP_MS);
    } finally {
      marketplace.state.setLive(5505, false);
    }
  });

  it('a dry run lists what it would apply and moves no checkpoint', async () => {
    const syncRegistry = await freshRegistry();
    const report = await configure({ registry: syncRegistry }).sync({ dryRun: true });
    expect(report.results.length).toBeGreaterThan(0);
    expect(report.results.every((r) => r.status === 'would-apply')).toBe(true);
    expect(report.checkpoint).toBeUndefined();
    expect(await syncRegistry.checkpoint(SYNC_CHECKPOINT)).toBeUndefined();
  });
});

describe('rotation', () => {
  it('re-applies every active survey with the new key; old-key hits are accepted until retirement, refused after', async () => {
    const rotationRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5601 });
    const deps = { registry: rotationRegistry };
    await configure(deps).apply(['5601']);
    const oldUrl = marketplace.state.effectiveRedirects(5601).pstbck as string;

    const retireAt = new Date(Date.now() + 60 * 60_000);
    // The new ring saved, then a wait for every receiver to be able to learn it, and only then the first apply.
    const steps: string[] = [];
    calls = [];
    const rotation = await configure({
      ...deps,
      saveKeyRing: async (next) => {
        // As the receivers read it back: a ring they would refuse would refuse every hit.
        const read = parseKeyRing(serializeKeyRing(next));
        steps.push(
          `save ${[...read.keys.values()].map((k) => `${k.kid}${k.retireAt ? ' retiring' : ''}`).join(',')}, ${read.current.kid} current, after ${calls.length} calls`,
        );
        ring = next;
      },
      sleep: async (ms) => {
        steps.push(`sleep ${ms} after ${calls.length} calls`);
      },
    }).rotate({
      secret: randomBytes(48).toString('base64url'),
      retireAt,
    });
    expect(rotation).toMatchObject({
      kid: 'k2',
      previousKid: 'k1',
      results: [{ surveyId: '5601', status: 'applied', kid: 'k2' }],
    });
    // The new key accepted first, the old one still current (what a sync meanwhile signs with); then current.
    expect(steps).toEqual([
      'save k1,k2, k1 current, after 0 calls',
      `sleep ${ROTATION_SETTLE_MS} after 0 calls`,
      'save k1 retiring,k2, k2 current, after 0 calls',
    ]);
    expect(calls.some((call) => call.includes('setRedirectionForSurvey'))).toBe(true);
    expect(ROTATION_SETTLE_MS).toBeGreaterThanOrEqual(2 * UNKNOWN_KEY_REFRESH_MS + KEY_RING_FETCH_TIMEOUT_MS);
    const newUrl = marketplace.state.effectiveRedirects(5601).pstbck as string;
    expect(newUrl).toContain('kid=k2');
    expect(ring.keys.get('k1')?.retireAt?.toISOString()).toBe(retireAt.toISOString());

    // The receiver, reading the rotated ring, accepts both keys now ...
    const { postback: handler } = await receivers({ endpoint, tableName, keyRing: serializeKeyRing(ring) });
    const hit = (url: string, pid: string) =>
      invoke(handler, apiEvent('GET', url.replace('[%%pid%%]', pid).replace('[%%token%%]', `t-${pid}`)));
    expect((await hit(oldUrl, 'old-key')).statusCode).toBe(200);
    expect((await hit(newUrl, 'new-key')).statusCode).toBe(200);

    // ... and refuses the old key once its retirement time has passed.
    const retired = parseKeyRing(serializeKeyRing(ring));
    const k1 = retired.keys.get('k1');
    if (!k1) throw new Error('k1 missing');
    (retired.keys as Map<string, typeof k1>).set('k1', { ...k1, retireAt: new Date(Date.now() - 1) });
    const oldSig =
      new URL(oldUrl.replace('[%%pid%%]', 'x').replace('[%%token%%]', 'y')).searchParams.get('sig') ??
      undefined;
    expect(
      verify(
        retired,
        { channel: 'postback', surveyId: '5601', outcome: 'success' },
        'k1',
        oldSig,
        new Date(),
      ),
    ).toEqual({
      valid: false,
      reason: 'retired-key',
    });
    const store = createLedgerStore(createDocumentClient({ endpoint }), tableName);
    expect((await store.attemptsOf('5601', 'old-key'))[0]?.postback?.outcome).toBe('success');
  });

  it('two rotations at once: one saves the ring, the other is refused before it reads it; a retirement before the surveys can move is refused', async () => {
    const rotationRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5603 });
    await configure({ registry: rotationRegistry }).apply(['5603']);
    const saved: string[] = [];
    let release: () => void = () => undefined;
    const waiting = new Promise<void>((resolve) => {
      release = resolve;
    });
    const rotating = (sleep: (ms: number) => Promise<void>) =>
      configure({
        registry: rotationRegistry,
        saveKeyRing: async (next) => {
          saved.push(`${next.current.kid}:${next.current.secret.slice(0, 6)}`);
          ring = next;
        },
        sleep,
      }).rotate({
        secret: randomBytes(48).toString('base64url'),
        retireAt: new Date(Date.now() + 3_600_000),
      });
    // The first holds the ring through its wait; the second starts meanwhile.
    const first = rotating(() => waiting);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await expect(rotating(async () => undefined)).rejects.toThrow(
      /another rotation is saving the key ring \(until \d{4}-.*Z at most\): run this one after it/,
    );
    release();
    expect((await first).kid).toBe('k2');
    // One new key, one secret, saved twice (accepted, then current).
    expect(new Set(saved.map((s) => s.split(':')[1])).size).toBe(2);
    expect(saved.filter((s) => s.startsWith('k2:'))).toHaveLength(1);
    // Once it is done, the next rotation may run, even from a machine whose clock is behind: it makes k3.
    const behind = await rotationRegistry.takeLease(
      'rotation',
      'clock-behind',
      new Date(),
      new Date(Date.now() - 60_000),
    );
    expect(behind.taken).toBe(true);
    await rotationRegistry.releaseLease('rotation', 'clock-behind', new Date());
    expect((await rotating(async () => undefined)).kid).toBe('k3');
    // One that stalls in its wait past its lease, while another takes the ring: saves nothing more, and says so.
    saved.length = 0;
    await expect(
      rotating(async () => {
        const later = new Date(Date.now() + 10 * 60_000);
        expect((await rotationRegistry.takeLease('rotation', 'another', later, later)).taken).toBe(true);
      }),
    ).rejects.toThrow(/this rotation lost its hold on the key ring .*nothing more saved/);
    expect(saved).toEqual([expect.stringMatching(/^k3:/)]);
    await rotationRegistry.releaseLease('rotation', 'another', new Date());
    // The old keys retired sooner than the surveys can move off them: refused, nothing saved.
    saved.length = 0;
    await expect(
      configure({ registry: rotationRegistry, sleep: async () => undefined }).rotate({
        secret: randomBytes(48).toString('base64url'),
        retireAt: new Date(Date.now() + 10_000),
      }),
    ).rejects.toThrow(
      /would refuse the old keys before the surveys move off them .*give one 75 s from now or later/,
    );
    expect(saved).toEqual([]);
  });

  it('a survey a rotation could not re-sign while the marketplace was down is recorded so, and still holds the old key', async () => {
    const rotationRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5602 });
    await configure({ registry: rotationRegistry }).apply(['5602']);
    expect((await rotationRegistry.get('5602'))?.kid).toBe(ring.current.kid);
    const before = ring.current.kid;
    marketplace.apiFaults = { ...NO_API_FAULTS, serverError: 1 };
    const rotation = await configure({ registry: rotationRegistry }).rotate({
      secret: randomBytes(48).toString('base64url'),
      retireAt: new Date(Date.now() + 60 * 60_000),
    });
    marketplace.apiFaults = { ...NO_API_FAULTS };
    expect(rotation.results).toMatchObject([{ surveyId: '5602', status: 'failed' }]);
    expect(marketplace.state.effectiveRedirects(5602).pstbck).toContain(`kid=${before}`);
    // Recorded under the key tried, as the marketplace not answering (an outage, which the survey health waits
    // through); the next sync re-signs it.
    expect(await rotationRegistry.get('5602')).toMatchObject({
      kid: rotation.kid,
      verified: false,
      failures: 1,
      unavailableFailures: 1,
    });
    // A refusal after it is no outage.
    const refusing: MarketplaceClient = {
      ...countingClient(),
      setRedirectionForSurvey: () =>
        Promise.reject(
          new MarketplaceError({
            endpoint: 'x',
            kind: 'http',
            httpStatus: 400,
            detail: 'Invalid pstbck URL',
          }),
        ),
    };
    await configure({ registry: rotationRegistry, marketplace: refusing }).apply(['5602']);
    expect(await rotationRegistry.get('5602')).toMatchObject({
      verified: false,
      lastError: expect.stringMatching(/Invalid pstbck URL/),
      failures: 2,
      unavailableFailures: 1,
    });
    // Applied at last: both counts start again.
    await configure({ registry: rotationRegistry }).apply(['5602']);
    const applied = await rotationRegistry.get('5602');
    expect(applied).toMatchObject({ verified: true, failures: 0 });
    expect(applied?.unavailableFailures).toBeUndefined();
  });

  it('a sync that read its ring just before a rotation leaves the rotated surveys on the new key', async () => {
    const rotationRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5610 });
    await configure({ registry: rotationRegistry }).apply(['5610']);
    // Its last apply failed, so the sync retries it.
    const registration = await rotationRegistry.get('5610');
    await rotationRegistry.put({ ...(registration as NonNullable<typeof registration>), verified: false });
    const before = ring;
    // A day later, the sync reads its ring, and the rotation is saved and applied right after.
    const later = new Date(Date.now() + 25 * 3_600_000);
    const stale = await configure({
      registry: rotationRegistry,
      now: () => later,
      keyRing: async () => {
        await configure({ registry: rotationRegistry, now: () => new Date(later.getTime() + 1_000) }).rotate({
          secret: randomBytes(48).toString('base64url'),
          retireAt: new Date(later.getTime() + 3_600_000),
        });
        return before;
      },
    }).sync();
    expect(stale.results).toContainEqual({
      surveyId: '5610',
      status: 'skipped',
      reason: 'applied with key k2 since this run read its key ring; the next run applies it',
    });
    expect(marketplace.state.effectiveRedirects(5610).pstbck).toContain('kid=k2');
    expect((await rotationRegistry.get('5610'))?.kid).toBe('k2');
  });

  it('a ring started over (a new stack, k1 again) re-signs surveys registered on a key it does not hold', async () => {
    const rotationRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5615 });
    await configure({ registry: rotationRegistry }).apply(['5615']);
    const registration = await rotationRegistry.get('5615');
    // Registered on k3 of the old stack's ring, copied over with the table.
    await rotationRegistry.put({ ...(registration as NonNullable<typeof registration>), kid: 'k3' });
    const applied = await configure({ registry: rotationRegistry }).apply(['5615'], { force: true });
    expect(applied).toEqual([{ surveyId: '5615', status: 'applied', kid: 'k1' }]);
    expect((await rotationRegistry.get('5615'))?.kid).toBe('k1');
  });

  it('a closed survey whose daily look fails is looked at again the next day, not every run, and fails no run', async () => {
    const syncRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5625 });
    await configure({ registry: syncRegistry }).apply(['5625']);
    const registration = await syncRegistry.get('5625');
    await syncRegistry.put({
      ...(registration as NonNullable<typeof registration>),
      closedAt: new Date().toISOString(),
    });
    marketplace.state.setLive(5625, false);
    const archived = {
      ...countingClient(),
      getAllocatedSurveyById: (id: string) =>
        id === '5625'
          ? Promise.reject(
              new MarketplaceError({ endpoint: 'x', kind: 'http', httpStatus: 404, detail: 'not found' }),
            )
          : countingClient().getAllocatedSurveyById(id),
    } as MarketplaceClient;
    const dayLater = new Date(Date.now() + 25 * 3_600_000);
    const first = await configure({
      registry: syncRegistry,
      marketplace: archived,
      now: () => dayLater,
    }).sync();
    expect(first.results).toContainEqual({
      surveyId: '5625',
      status: 'skipped',
      reason: 'closed; looking it up failed: x: not found',
    });
    expect(summarizeSyncRun(first).failed).toEqual([]);
    const next = await configure({
      registry: syncRegistry,
      marketplace: archived,
      now: () => new Date(dayLater.getTime() + 15 * 60_000),
    }).sync();
    expect(next.results.map((r) => r.surveyId)).not.toContain('5625');
  });

  it('a closed survey the rotation could not re-sign, resumed and left out of the listings, is found by its daily look and re-signed', async () => {
    const rotationRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5620 });
    await configure({ registry: rotationRegistry }).apply(['5620']);
    const registration = await rotationRegistry.get('5620');
    await rotationRegistry.put({
      ...(registration as NonNullable<typeof registration>),
      closedAt: new Date().toISOString(),
    });
    // The marketplace will not change a closed survey's redirects.
    const original = marketplace.state.setRedirects.bind(marketplace.state);
    marketplace.state.setRedirects = (id, request) => {
      if (id === 5620) throw new Error('survey is closed');
      original(id, request);
    };
    const rotation = await configure({ registry: rotationRegistry }).rotate({
      secret: randomBytes(48).toString('base64url'),
      retireAt: new Date(Date.now() + 3_600_000),
    });
    marketplace.state.setRedirects = original;
    expect(rotation.results).toContainEqual(expect.objectContaining({ surveyId: '5620', status: 'failed' }));
    expect(marketplace.state.effectiveRedirects(5620).pstbck).toContain('kid=k1');
    // Resumed, but the listings leave it out.
    const omitting: typeof fetch = async (input, init) => {
      const answer = await fetch(input, init);
      const path = new URL(String(input)).pathname;
      if (!path.endsWith('/getAllocatedSurveys') && !path.includes('/getAllocatedSurveysByDate/'))
        return answer;
      const body = (await answer.json()) as { result: { surveyId?: number }[] };
      return new Response(
        JSON.stringify({ ...body, result: body.result.filter((s) => s.surveyId !== 5620) }),
        {
          status: 200,
        },
      );
    };
    const report = await configure({
      registry: rotationRegistry,
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        fetch: omitting,
      }),
      now: () => new Date(Date.now() + 25 * 3_600_000),
    }).sync();
    expect(report.results).toContainEqual({ surveyId: '5620', status: 'applied', kid: rotation.kid });
    expect(marketplace.state.effectiveRedirects(5620).pstbck).toContain(`kid=${rotation.kid}`);
    expect((await rotationRegistry.get('5620'))?.closedAt).toBeUndefined();
  });

  it('a dry run of a rotation saves no key and changes no survey', async () => {
    const rotationRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5701 });
    await configure({ registry: rotationRegistry }).apply(['5701']);
    const before = serializeKeyRing(ring);
    calls = [];
    const report = await configure({ registry: rotationRegistry }).rotate(
      { secret: randomBytes(48).toString('base64url'), retireAt: new Date(Date.now() + 3_600_000) },
      { dryRun: true },
    );
    expect(report.results).toEqual([expect.objectContaining({ surveyId: '5701', status: 'would-apply' })]);
    expect(serializeKeyRing(ring)).toBe(before);
    expect(calls).toEqual([]);
  });
});

describe('surveys left on another key than the current one', () => {
  /** A registry whose one survey the first sync applied with k1, and a clock to run later syncs by. */
  async function appliedWithK1(surveyId: number) {
    const syncRegistry = await freshRegistry();
    let clock = Date.now();
    const deps = {
      registry: syncRegistry,
      initialSince: new Date(clock - 3 * 86_400_000),
      now: () => new Date(clock),
    };
    marketplace.state.addSurvey({ surveyId }, new Date(clock - 2 * 86_400_000));
    expect((await configure(deps).sync()).results).toContainEqual({
      surveyId: String(surveyId),
      status: 'applied',
      kid: 'k1',
    });
    return { syncRegistry, deps, later: (ms: number) => (clock += ms) };
  }
  const heldKid = (surveyId: number) =>
    new URL(
      (marketplace.state.effectiveRedirects(surveyId).pstbck as string).replace(/\[%%\w+%%\]/g, 'x'),
    ).searchParams.get('kid');

  it('a rotation stopped after saving its ring: the next sync re-signs the survey, not its read-back a day later', async () => {
    const { deps, later } = await appliedWithK1(5711);
    ring = rotateKeyRing(ring, {
      secret: randomBytes(48).toString('base64url'),
      retireAt: new Date(Date.now() + 6 * 3_600_000),
      now: new Date(),
    });
    later(15 * 60_000);
    expect((await configure(deps).sync()).results).toContainEqual({
      surveyId: '5711',
      status: 'applied',
      kid: 'k2',
    });
    expect(heldKid(5711)).toBe('k2');
  });

  it('the ring rolled back to a version without the current key: the next sync signs the survey with the current one', async () => {
    const { deps, later } = await appliedWithK1(5712);
    const before = ring;
    await configure(deps).rotate({
      secret: randomBytes(48).toString('base64url'),
      retireAt: new Date(Date.now() + 6 * 3_600_000),
    });
    expect(heldKid(5712)).toBe('k2');
    ring = before;
    later(15 * 60_000);
    expect((await configure(deps).sync()).results).toContainEqual({
      surveyId: '5712',
      status: 'applied',
      kid: 'k1',
    });
    expect(heldKid(5712)).toBe('k1');
  });

  it('two rotations overlapping: the later key stands, on the surveys the first had not reached and, after the next sync, on the one it had', async () => {
    const syncRegistry = await freshRegistry();
    let clock = Date.now();
    const deps = { registry: syncRegistry, initialSince: new Date(clock), now: () => new Date(clock) };
    const later = (ms: number) => (clock += ms);
    for (const surveyId of [5713, 5714]) marketplace.state.addSurvey({ surveyId });
    await configure(deps).apply(['5713', '5714']);
    let releaseFirst: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      releaseFirst = resolve;
    });
    let firstStarted: () => void = () => undefined;
    const started = new Promise<void>((resolve) => {
      firstStarted = resolve;
    });
    // The first rotation's first marketplace call waits until the second rotation has finished.
    const slow: MarketplaceClient = {
      ...countingClient(),
      setRedirectionForSurvey: async (id, settings) => {
        firstStarted();
        await held;
        return countingClient().setRedirectionForSurvey(id, settings);
      },
    };
    const first = configure({ ...deps, marketplace: slow, concurrency: 1 }).rotate({
      secret: randomBytes(48).toString('base64url'),
      retireAt: new Date(Date.now() + 24 * 3_600_000),
    });
    await started;
    const second = await configure(deps).rotate({
      secret: randomBytes(48).toString('base64url'),
      retireAt: new Date(Date.now() + 2 * 3_600_000),
    });
    expect(second.kid).toBe('k3');
    releaseFirst();
    // The survey it had not reached is left on the newer key; the one under way when the second saved is not.
    expect((await first).results).toEqual([
      expect.objectContaining({ surveyId: '5713', status: 'applied', kid: 'k2' }),
      expect.objectContaining({ surveyId: '5714', status: 'skipped' }),
    ]);
    expect([heldKid(5713), heldKid(5714)]).toEqual(['k2', 'k3']);
    // The next sync signs it with the current key (k2 retires with k1, in two hours).
    later(15 * 60_000);
    expect((await configure(deps).sync()).results).toContainEqual({
      surveyId: '5713',
      status: 'applied',
      kid: 'k3',
    });
    expect([heldKid(5713), heldKid(5714)]).toEqual(['k3', 'k3']);
    expect((await syncRegistry.get('5713'))?.kid).toBe('k3');
  });

  it("refuses a new key named as one of the ring's own fields, and saves nothing", async () => {
    const before = serializeKeyRing(ring);
    for (const kid of ['retire', 'current', 'constructor', '__proto__'])
      await expect(
        configure({ registry: await freshRegistry() }).rotate({
          kid,
          secret: randomBytes(48).toString('base64url'),
          retireAt: new Date(Date.now() + 3_600_000),
        }),
      ).rejects.toThrow(/a name the ring itself uses, or every object has/);
    expect(serializeKeyRing(ring)).toBe(before);
  });
});

describe('redirect sync, surveys the marketplace refuses', () => {
  it('a rotation meeting a paused survey (its PUT and read-back 404 "Paused/Closed") reports it left on the old key, not unknown', async () => {
    const rotationRegistry = await freshRegistry();
    marketplace.state.addSurvey({ surveyId: 5391 });
    await configure({ registry: rotationRegistry }).apply(['5391']);
    const pausedAnswer = () =>
      new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Survey 5391 is Paused/Closed' }), {
        status: 404,
      });
    const paused = createMarketplaceClient({
      baseUrl: marketplace.url,
      accessToken: () => TOKEN,
      retries: 0,
      fetch: async (input, init) =>
        String(input).includes('/5391') && !String(input).includes('getAllocatedSurveysBySurveyId')
          ? pausedAnswer()
          : fetch(input, init),
    });
    const rotation = await configure({ registry: rotationRegistry, marketplace: paused }).rotate({
      secret: 'second-signing-key-for-redirect-tests-00',
      retireAt: new Date(Date.now() + 48 * 3_600_000),
    });
    const result = rotation.results.find((r) => r.surveyId === '5391');
    // Still on the retiring key at the marketplace: the CLI's "left on the old keys" warning must name it.
    expect(result?.status).toBe('failed');
  });

  it('read-backs a survey listed as changed brings between its daily ones count once a day toward READ_BACK_TRIES', async () => {
    const { syncRegistry, deps, at } = await syncedSurvey(5390);
    try {
      // Its redirects cannot be read back for now (a 404 that says nothing of the survey): each day's try counts.
      const refusing = createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => TOKEN,
        retries: 0,
        fetch: async (input, init) =>
          String(input).includes('/surveySpecificRedirects/5390') && (init?.method ?? 'GET') === 'GET'
            ? new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Request could not be served' }), {
                status: 404,
              })
            : fetch(input, init),
      });
      // The marketplace touches the survey (its quota, its counts) three times in an afternoon.
      for (let hour = 1; hour <= 3; hour++) {
        at.advance(3_600_000);
        marketplace.state.setLive(5390, true, new Date(deps.now().getTime() - 60_000));
        await configure({ ...deps, marketplace: refusing }).sync();
      }
      // Three failed reads in three hours are not "three days in a row": one counted.
      expect(await syncRegistry.get('5390')).toMatchObject({ verified: true, readBackFailures: 1 });
    } finally {
      marketplace.state.setLive(5390, false);
    }
  });
});
