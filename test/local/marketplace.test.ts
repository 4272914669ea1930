/**
 * The local marketplace behaves as the field notes say the real one does, and its respondents reach the
 * supplier the way a real marketplace's would.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pacificWallToUtc } from '../../functions/marketplace/pacific-time';
import { type LocalMarketplace, startLocalMarketplace } from '../../infra/local/marketplace/server';

const TOKEN = 'marketplace-test-token';
let marketplace: LocalMarketplace;

/** A stand-in supplier that records what arrives. */
interface Received {
  method: string;
  path: string;
  query: URLSearchParams;
  contentType?: string;
  body: string;
}
const received: Received[] = [];
let supplier: ReturnType<typeof createServer>;
let supplierUrl: string;

beforeAll(async () => {
  marketplace = await startLocalMarketplace({ accessToken: TOKEN, seed: 11 });
  supplier = createServer(async (req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? '/', 'http://x');
    received.push({
      method: req.method ?? '',
      path: url.pathname,
      query: url.searchParams,
      ...(req.headers['content-type'] ? { contentType: req.headers['content-type'] } : {}),
      body: Buffer.concat(chunks).toString(),
    });
    res.writeHead(url.pathname.startsWith('/r/') ? 302 : 200, { location: 'https://panel.example/done' });
    res.end();
  });
  supplier.listen(0, '127.0.0.1');
  await new Promise((resolve) => supplier.once('listening', resolve));
  supplierUrl = `http://127.0.0.1:${(supplier.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await marketplace.stop();
  supplier.close();
});

const api = async (path: string, init: RequestInit = {}) => {
  const response = await fetch(`${marketplace.url}/api/v1${path}`, {
    ...init,
    headers: { 'x-access-token': TOKEN, ...init.headers },
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};

/** Every redirect and postback of a survey pointed at the stand-in supplier. */
const supplierRedirects = (methods: { success?: string; fail?: string } = {}) => ({
  sUrl: `${supplierUrl}/r/success?pid=[%%pid%%]&token=[%%token%%]`,
  fUrl: `${supplierUrl}/r/fail?pid=[%%pid%%]&token=[%%token%%]`,
  oUrl: `${supplierUrl}/r/overquota?pid=[%%pid%%]&token=[%%token%%]`,
  qTUrl: `${supplierUrl}/r/quality?pid=[%%pid%%]&token=[%%token%%]`,
  tUrl: `${supplierUrl}/r/termination?pid=[%%pid%%]&token=[%%token%%]`,
  pstbck: `${supplierUrl}/pb/success?pid=[%%pid%%]&token=[%%token%%]`,
  pstbck_fail: `${supplierUrl}/pb/fail?pid=[%%pid%%]&token=[%%token%%]`,
  pstBckSuccessMethod: methods.success ?? 'GET',
  pstBckFailMethod: methods.fail ?? 'GET',
});

const pointAtSupplier = (surveyId: number, methods: { success?: string; fail?: string } = {}) =>
  marketplace.state.setRedirects(surveyId, supplierRedirects(methods));

describe('authentication', () => {
  it('refuses a missing or wrong x-access-token', async () => {
    const response = await fetch(`${marketplace.url}/api/v1/mapping/metadata/`);
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ apiStatus: 'Failure', msg: 'Invalid access token' });
  });
});

describe('getSurveyTransactions', () => {
  const surveyId = 3001;
  beforeAll(async () => {
    marketplace.state.addSurvey({ surveyId, cpi: '1.75' });
    // Clicked in at 23:55 PT on Nov 21, completed at 00:20 PT on Nov 22: belongs to Nov 21.
    await marketplace.respondents.respondent({
      surveyId,
      status: 'Completed',
      clickedAt: new Date(pacificWallToUtc(2026, 11, 21, 23, 55)),
      completedAt: new Date(pacificWallToUtc(2026, 11, 22, 0, 20)),
    });
    await marketplace.respondents.respondent({
      surveyId,
      status: 'Over Quota',
      clickedAt: new Date(pacificWallToUtc(2026, 11, 22, 0, 5)),
    });
    // The fall-back day: 01:30 happens twice; the second one is still Nov 1.
    await marketplace.respondents.respondent({
      surveyId,
      status: 'Failed',
      clickedAt: new Date('2026-11-01T09:30:00Z'),
    });
  });

  it('filters inclusive Pacific days on creation (click) time, not completion time', async () => {
    const day21 = await api(
      `/supply/getSurveyTransactions/${surveyId}?startDate=2026-11-21&endDate=2026-11-21`,
    );
    expect((day21.body.result as { status: string }[]).map((t) => t.status)).toEqual(['Completed']);
    const both = await api(
      `/supply/getSurveyTransactions/${surveyId}?startDate=2026-11-21&endDate=2026-11-22`,
    );
    expect((both.body.result as unknown[]).length).toBe(2);
    const fallBack = await api(
      `/supply/getSurveyTransactions/${surveyId}?startDate=2026-11-01&endDate=2026-11-01`,
    );
    expect((fallBack.body.result as { status: string }[]).map((t) => t.status)).toEqual(['Failed']);
  });

  it('answers CPI as a decimal string for completes and the number 0 otherwise, times in Pacific format', async () => {
    const all = (await api(`/supply/getSurveyTransactions/${surveyId}`)).body.result as Record<
      string,
      unknown
    >[];
    const complete = all.find((t) => t.status === 'Completed');
    const overQuota = all.find((t) => t.status === 'Over Quota');
    expect(complete).toMatchObject({
      CPI: '1.75',
      verifyToken: 'Pending',
      clkDateTime: '11/21/2026, 11:55:00 pm PST',
      completeDateTime: '11/22/2026, 12:20:00 am PST',
    });
    expect(overQuota).toMatchObject({ CPI: 0, completeDateTime: '' });
  });

  it('wants both dates or neither', async () => {
    const one = await api(`/supply/getSurveyTransactions/${surveyId}?startDate=2026-11-21`);
    expect(one).toEqual({
      status: 400,
      body: { apiStatus: 'Failure', msg: 'startDate and endDate must be given together' },
    });
  });

  it('filters by status names with spaces; an unknown name or empty item is a 400', async () => {
    const overQuota = await api(
      `/supply/getSurveyTransactions/${surveyId}?status=${encodeURIComponent('Over Quota,Failed')}`,
    );
    expect((overQuota.body.result as { status: string }[]).map((t) => t.status).sort()).toEqual([
      'Failed',
      'Over Quota',
    ]);
    expect((await api(`/supply/getSurveyTransactions/${surveyId}?status=OverQuota`)).status).toBe(400);
    expect((await api(`/supply/getSurveyTransactions/${surveyId}?status=Failed,`)).status).toBe(400);
  });

  it('answers 400 "No data found" when nothing matches', async () => {
    expect(
      await api(`/supply/getSurveyTransactions/${surveyId}?startDate=2025-01-01&endDate=2025-01-01`),
    ).toEqual({
      status: 400,
      body: { apiStatus: 'Failure', msg: `No data found for survey: ${surveyId}` },
    });
  });

  it('moves completes from Pending to Valid or Invalid on review', async () => {
    marketplace.state.review({ invalidShare: 1 });
    const all = (await api(`/supply/getSurveyTransactions/${surveyId}`)).body.result as Record<
      string,
      unknown
    >[];
    expect(all.find((t) => t.status === 'Completed')).toMatchObject({
      verifyToken: 'Invalid',
      verifiedTknDt: expect.stringMatching(/PST$/),
    });
  });
});

describe('setRedirectionForSurvey', () => {
  it('merges: a field left out keeps the survey value, else the global one', async () => {
    const surveyId = 3002;
    marketplace.state.addSurvey({ surveyId });
    marketplace.state.globalRedirects.fUrl = 'https://global.example/fail';
    await api(`/supply/setRedirectionForSurvey/${surveyId}`, {
      method: 'PUT',
      body: JSON.stringify({ sUrl: 'https://one.example/s' }),
    });
    await api(`/supply/setRedirectionForSurvey/${surveyId}`, {
      method: 'PUT',
      body: JSON.stringify({ tUrl: 'https://two.example/t' }),
    });
    const { body } = await api(`/supply/surveySpecificRedirects/${surveyId}`);
    expect(body.redirectURL).toMatchObject({
      sUrl: 'https://one.example/s',
      tUrl: 'https://two.example/t',
      fUrl: 'https://global.example/fail',
    });
    await api(`/supply/surveySpecificRedirects/${surveyId}`, { method: 'DELETE' });
    expect((await api(`/supply/surveySpecificRedirects/${surveyId}`)).body.redirectURL).toMatchObject({
      sUrl: '',
      fUrl: 'https://global.example/fail',
    });
    marketplace.state.globalRedirects.fUrl = '';
  });

  it('refuses a method other than GET or POST', async () => {
    const response = await api('/supply/setRedirectionForSurvey/1001', {
      method: 'PUT',
      body: JSON.stringify({ pstBckFailMethod: 'PATCH' }),
    });
    expect(response.status).toBe(400);
  });
});

describe('simulated respondents', () => {
  const surveyId = 3003;
  beforeAll(() => {
    marketplace.state.addSurvey({ surveyId });
  });

  it('go to the redirect of their outcome and fire the matching postback, placeholders filled', async () => {
    pointAtSupplier(surveyId);
    received.length = 0;
    const complete = await marketplace.respondents.respondent({ surveyId, status: 'Completed' });
    const overQuota = await marketplace.respondents.respondent({ surveyId, status: 'Over Quota' });
    expect(received.map((r) => `${r.method} ${r.path}`)).toEqual([
      'GET /r/success',
      'GET /pb/success',
      'GET /r/overquota',
      'GET /pb/fail',
    ]);
    expect(received[0]?.query.get('pid')).toBe(complete.transaction.pid);
    expect(received[1]?.query.get('token')).toBe(complete.transaction.token);
    expect(received[3]?.query.get('token')).toBe(overQuota.transaction.token);
  });

  it('POST postbacks when configured, with the values in the query and sometimes a JSON or form body', async () => {
    pointAtSupplier(surveyId, { success: 'POST', fail: 'POST' });
    received.length = 0;
    for (let i = 0; i < 12; i++) await marketplace.respondents.respondent({ surveyId, status: 'Completed' });
    const postbacks = received.filter((r) => r.path.startsWith('/pb/'));
    expect(postbacks.every((r) => r.method === 'POST')).toBe(true);
    const kinds = new Set(postbacks.map((r) => r.contentType ?? 'none'));
    expect(kinds).toEqual(new Set(['none', 'application/json', 'application/x-www-form-urlencoded']));
    const json = postbacks.find((r) => r.contentType === 'application/json');
    expect(JSON.parse(json?.body ?? '{}')).toEqual({
      pid: json?.query.get('pid'),
      token: json?.query.get('token'),
    });
  });

  it('obey the delivery faults: dropped, repeated and phantom', async () => {
    pointAtSupplier(surveyId);
    const sim = marketplace.respondents;
    const base = { ...sim.faults };
    try {
      sim.faults = { ...base, dropPostback: 1 };
      received.length = 0;
      await sim.respondent({ surveyId, status: 'Completed' });
      expect(received.map((r) => r.path)).toEqual(['/r/success']);

      sim.faults = { ...base, repeatPostback: 1 };
      received.length = 0;
      await sim.respondent({ surveyId, status: 'Completed' });
      expect(received.map((r) => r.path)).toEqual(['/r/success', '/pb/success', '/pb/success']);

      sim.faults = { ...base, phantom: 1 };
      received.length = 0;
      const phantom = await sim.respondent({ surveyId, status: 'Completed' });
      expect(received).toEqual([]);
      expect(marketplace.state.transactions).toContain(phantom.transaction);
    } finally {
      sim.faults = base;
    }
  });

  it('repeat the same traffic for the same seed', async () => {
    const run = async () => {
      const other = await startLocalMarketplace({ accessToken: TOKEN, seed: 99 });
      try {
        const attempts = [];
        for (let i = 0; i < 5; i++) attempts.push(await other.respondents.respondent({ surveyId: 1001 }));
        return attempts.map((a) => [a.transaction.pid, a.transaction.token, a.transaction.status]);
      } finally {
        await other.stop();
      }
    };
    expect(await run()).toEqual(await run());
  });
});

describe('survey health knobs', () => {
  const sim = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${marketplace.url}/_sim${path}`, {
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
  /** What the stand-in supplier received for one attempt, as `METHOD /path`. */
  const arrivedFor = (token: string) =>
    received.filter((r) => r.query.get('token') === token).map((r) => `${r.method} ${r.path}`);

  it('a control request naming no survey, or one it does not have, is a 400 or 404, never a 500', async () => {
    expect((await sim('POST', '/respondents', { surveyId: 7777, count: 1 })).status).toBe(404);
    expect((await sim('POST', '/respondents', { count: 1 })).status).toBe(400);
    expect((await sim('POST', '/surveys/9898/status', { live: false })).status).toBe(404);
  });

  it('dropPostbacksFor stops the postbacks of the listed survey only, redirects still sent, until emptied', async () => {
    const [quiet, other] = [3004, 3005];
    for (const surveyId of [quiet, other]) {
      marketplace.state.addSurvey({ surveyId });
      pointAtSupplier(surveyId);
    }
    const sim1 = marketplace.respondents;
    try {
      const set = await sim('PUT', '/faults', { delivery: { dropPostbacksFor: [quiet] } });
      expect(set.status).toBe(200);
      expect((set.body.delivery as { dropPostbacksFor: number[] }).dropPostbacksFor).toEqual([quiet]);

      const complete = await sim1.respondent({ surveyId: quiet, status: 'Completed' });
      const overQuota = await sim1.respondent({ surveyId: quiet, status: 'Over Quota' });
      const elsewhere = await sim1.respondent({ surveyId: other, status: 'Completed' });
      expect(arrivedFor(complete.transaction.token)).toEqual(['GET /r/success']);
      expect(arrivedFor(overQuota.transaction.token)).toEqual(['GET /r/overquota']);
      expect(complete.dropped).toEqual({ redirect: false, postback: true });
      expect(marketplace.state.injections.get(complete.transaction.token)).toEqual(['dropped-postback']);
      expect(arrivedFor(elsewhere.transaction.token)).toEqual(['GET /r/success', 'GET /pb/success']);

      await sim('PUT', '/faults', { delivery: { dropPostbacksFor: [] } });
      const resumed = await sim1.respondent({ surveyId: quiet, status: 'Completed' });
      expect(arrivedFor(resumed.transaction.token)).toEqual(['GET /r/success', 'GET /pb/success']);
    } finally {
      sim1.faults = { ...sim1.faults, dropPostbacksFor: [] };
    }
  });

  it('dropPostbacksFor must be a list of survey ids', async () => {
    for (const dropPostbacksFor of [1001, ['1001'], [0], [1.5]]) {
      const answer = await sim('PUT', '/faults', { delivery: { dropPostbacksFor } });
      expect(answer, JSON.stringify(dropPostbacksFor)).toEqual({
        status: 400,
        body: { apiStatus: 'Failure', msg: 'delivery.dropPostbacksFor must be a list of survey ids' },
      });
    }
    expect(marketplace.respondents.faults.dropPostbacksFor).toEqual([]);
  });

  describe('tamper', () => {
    const surveyId = 3006;
    const applied = () => supplierRedirects();
    const apply = () =>
      api(`/supply/setRedirectionForSurvey/${surveyId}`, { method: 'PUT', body: JSON.stringify(applied()) });
    const readBack = async () =>
      (await api(`/supply/surveySpecificRedirects/${surveyId}`)).body.redirectURL as Record<string, string>;

    beforeAll(async () => {
      marketplace.state.addSurvey({ surveyId });
      marketplace.state.addSurvey({ surveyId: surveyId + 1 });
      pointAtSupplier(surveyId + 1);
    });

    it("re-points the survey's postbacks at another host: the read-back differs, redirects still arrive, postbacks do not", async () => {
      await apply();
      expect(await readBack()).toEqual(applied());

      const tampered = await sim('POST', `/surveys/${surveyId}/redirects/tamper`);
      expect(tampered.status).toBe(200);
      const elsewhere = `${marketplace.url}/_sim/elsewhere/${surveyId}`;
      const expected = {
        ...applied(),
        pstbck: `${elsewhere}/pb/success?pid=[%%pid%%]&token=[%%token%%]`,
        pstbck_fail: `${elsewhere}/pb/fail?pid=[%%pid%%]&token=[%%token%%]`,
      };
      expect(tampered.body.redirectURL).toEqual(expected);
      expect(await readBack()).toEqual(expected);

      const complete = await marketplace.respondents.respondent({ surveyId, status: 'Completed' });
      const failed = await marketplace.respondents.respondent({ surveyId, status: 'Failed' });
      const untouched = await marketplace.respondents.respondent({
        surveyId: surveyId + 1,
        status: 'Completed',
      });
      expect(arrivedFor(complete.transaction.token)).toEqual(['GET /r/success']);
      expect(arrivedFor(failed.transaction.token)).toEqual(['GET /r/fail']);
      expect(complete.postbacks.map((p) => [p.url.startsWith(elsewhere), p.status])).toEqual([[true, 200]]);
      expect(arrivedFor(untouched.transaction.token)).toEqual(['GET /r/success', 'GET /pb/success']);
      const landed = (await sim('GET', '/elsewhere')).body.result as { surveyId: number; path: string }[];
      expect(landed.filter((p) => p.surveyId === surveyId).map((p) => p.path)).toEqual([
        '/pb/success',
        '/pb/fail',
      ]);
    });

    it("the supplier's setRedirectionForSurvey puts the survey right again", async () => {
      await sim('POST', `/surveys/${surveyId}/redirects/tamper`);
      await apply();
      expect(await readBack()).toEqual(applied());
      const complete = await marketplace.respondents.respondent({ surveyId, status: 'Completed' });
      expect(arrivedFor(complete.transaction.token)).toEqual(['GET /r/success', 'GET /pb/success']);
    });

    it('sends the postbacks to a given host, keeping path and query', async () => {
      await apply();
      await sim('POST', `/surveys/${surveyId}/redirects/tamper`, { to: `${supplierUrl}/other-supplier` });
      const overQuota = await marketplace.respondents.respondent({ surveyId, status: 'Over Quota' });
      expect(arrivedFor(overQuota.transaction.token)).toEqual([
        'GET /r/overquota',
        'GET /other-supplier/pb/fail',
      ]);
      await apply();
    });

    it('refuses an unknown survey and a target that is not an http(s) URL', async () => {
      await apply();
      expect((await sim('POST', '/surveys/999999/redirects/tamper')).status).toBe(404);
      expect((await sim('POST', `/surveys/${surveyId}/redirects/tamper`, { to: 'ftp://x' })).status).toBe(
        400,
      );
      expect(await readBack()).toEqual(applied());
    });
  });
});
