/**
 * Contract tests: every client call against the local marketplace (v1 and v2), then faults: retries stop,
 * errors are typed, 4xx is not retried, the concurrency limit holds, and the token never leaks.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createMarketplaceClient,
  MAX_REFUSAL_MS,
  type MarketplaceClientOptions,
  MarketplaceError,
  marketplaceDown,
  marketplaceLimit,
  RUN_MAX_RETRY_AFTER_MS,
  retryAfterMs,
} from '../../functions/marketplace/marketplace-client';
import { pacificDay } from '../../functions/marketplace/pacific-time';
import {
  type LocalMarketplace,
  NO_API_FAULTS,
  startLocalMarketplace,
} from '../../infra/local/marketplace/server';

const TOKEN = 'secret-token-for-tests-0123456789';
let marketplace: LocalMarketplace;

beforeAll(async () => {
  marketplace = await startLocalMarketplace({ accessToken: TOKEN, seed: 7 });
});
afterAll(() => marketplace.stop());

const client = (overrides: Partial<MarketplaceClientOptions> = {}) =>
  createMarketplaceClient({
    baseUrl: marketplace.url,
    accessToken: () => TOKEN,
    minBackoffMs: 1,
    maxBackoffMs: 5,
    retries: 3,
    timeoutMs: 2000,
    ...overrides,
  });

/** A fetch that answers the first `times` calls itself, then passes through. */
function failingFirst(times: number, answer: () => Response) {
  let calls = 0;
  const wrapped: typeof fetch = async (input, init) => {
    calls++;
    return calls <= times ? answer() : fetch(input, init);
  };
  return { fetch: wrapped, calls: () => calls };
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

async function failure(promise: Promise<unknown>): Promise<MarketplaceError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof MarketplaceError) return error;
    throw error;
  }
  throw new Error('expected a MarketplaceError');
}

describe.each(['v1', 'v2'] as const)('supplier endpoints (%s)', (apiVersion) => {
  const api = () => client({ apiVersion });

  it('getAllocatedSurveys lists live surveys only; v2 adds codes and statistics', async () => {
    const { rows, malformed } = await api().getAllocatedSurveys({ countryCode: 'US', languageCode: 'en' });
    expect(malformed).toEqual([]);
    const ids = rows.map((s) => s.surveyId);
    expect(ids).toEqual(expect.arrayContaining(['1001', '1002', '1003']));
    expect(ids).not.toContain('1004');
    const survey = rows.find((s) => s.surveyId === '1001');
    expect(survey).toMatchObject({ cpi: '1.25', loiMinutes: 8, country: 'United States' });
    expect(survey?.createdAt?.utc).toMatch(/Z$/);
    if (apiVersion === 'v2')
      expect(survey).toMatchObject({
        countryCode: 'US',
        languageCode: 'en',
        numberOfStarts: expect.any(Number),
      });
    else expect(survey?.countryCode).toBeUndefined();
  });

  it('getAllocatedSurveyById: live with details, or the Paused/Closed message', async () => {
    expect(await api().getAllocatedSurveyById('1002')).toMatchObject({
      live: true,
      survey: { surveyId: '1002', cpi: '2.10' },
    });
    expect(await api().getAllocatedSurveyById('1004')).toEqual({
      live: false,
      message: 'Survey 1004 is Paused/Closed',
    });
    // The survey given as the result itself rather than a list of one: live all the same.
    const live = await api().getAllocatedSurveyById('1002');
    const unwrapped = failingFirst(1, () =>
      json(200, { apiStatus: 'success', msg: 'Survey', result: { surveyId: 1002, CPI: '2.10' } }),
    );
    expect(await client({ apiVersion, fetch: unwrapped.fetch }).getAllocatedSurveyById('1002')).toMatchObject(
      {
        live: true,
        survey: { surveyId: '1002', cpi: live.live ? live.survey.cpi : 'live' },
      },
    );
    // An empty result, in whatever shape: not live, as a success without one is.
    const empty = failingFirst(1, () =>
      json(200, { apiStatus: 'success', msg: 'Survey is Closed', result: {} }),
    );
    expect(await client({ apiVersion, fetch: empty.fetch }).getAllocatedSurveyById('1002')).toEqual({
      live: false,
      message: 'Survey is Closed',
    });
    // A message that quotes the access token back: never the token, as every other message.
    const echoing = failingFirst(1, () =>
      json(200, { apiStatus: 'success', msg: `Survey is Closed (token ${TOKEN})`, result: [] }),
    );
    expect(await client({ apiVersion, fetch: echoing.fetch }).getAllocatedSurveyById('1002')).toEqual({
      live: false,
      message: 'Survey is Closed (token [redacted])',
    });
  });

  it('getAllocatedSurveysByDate lists live surveys created or updated after the instant', async () => {
    const before = new Date(Date.now() - 1000);
    const surveyId = apiVersion === 'v1' ? 2101 : 2102;
    marketplace.state.addSurvey({ surveyId });
    const { rows } = await api().getAllocatedSurveysByDate(before);
    expect(rows.map((s) => s.surveyId)).toContain(String(surveyId));
    expect(rows.map((s) => s.surveyId)).not.toContain('1001');
  });

  it('getQuotaForSurvey', async () => {
    const { rows } = await api().getQuotaForSurvey('1001');
    expect(rows[0]).toMatchObject({ id: 10010, quotaN: 500, quotaStatus: 'Open' });
  });

  it('redirects: set merges, get reads back, delete falls back to the global settings', async () => {
    const surveyId = '1003';
    await api().setRedirectionForSurvey(surveyId, {
      sUrl: 'https://a.example/s',
      pstbck: 'https://a.example/p',
      pstBckSuccessMethod: 'POST',
    });
    await api().setRedirectionForSurvey(surveyId, { sUrl: 'https://b.example/s' });
    expect(await api().getSurveyRedirects(surveyId)).toMatchObject({
      sUrl: 'https://b.example/s',
      pstbck: 'https://a.example/p',
      pstBckSuccessMethod: 'POST',
      pstBckFailMethod: 'GET',
    });
    expect(await api().deleteSurveyRedirects(surveyId)).toMatch(/removed/);
    expect(await api().getSurveyRedirects(surveyId)).toMatchObject({ sUrl: '', pstbck: '' });
  });

  it('getSurveyTransactions: all, by Pacific day, by status, and "No data found" as zero rows', async () => {
    const surveyId = apiVersion === 'v1' ? 2201 : 2202;
    marketplace.state.addSurvey({ surveyId, cpi: '3.30' });
    await marketplace.respondents.respondent({ surveyId, status: 'Completed' });
    await marketplace.respondents.respondent({ surveyId, status: 'Over Quota' });
    const all = await api().getSurveyTransactions(String(surveyId));
    expect(all.malformed).toEqual([]);
    expect(all.rows.map((t) => [t.status, t.cpi]).sort()).toEqual([
      ['Completed', '3.30'],
      ['Over Quota', '0.00'],
    ]);
    const today = pacificDay(new Date());
    const byDay = await api().getSurveyTransactions(String(surveyId), {
      startDate: today,
      endDate: today,
      statuses: ['Over Quota'],
    });
    expect(byDay.rows.map((t) => t.status)).toEqual(['Over Quota']);
    expect(
      await api().getSurveyTransactions(String(surveyId), { startDate: '2020-01-01', endDate: '2020-01-02' }),
    ).toEqual({
      rows: [],
      malformed: [],
    });
  });

  it('refuses one date without the other before calling', async () => {
    await expect(api().getSurveyTransactions('1001', { startDate: '2026-11-01' })).rejects.toThrow(
      /together/,
    );
  });

  it('lookups, respondent checks, term reasons and metadata', async () => {
    expect((await api().getQuestionsByCategory('US', 'ENGLISH'))[0]).toMatchObject({ QuestionKey: 'AGE' });
    expect(await api().getAnswersByQuestionKey('GENDER', { country: 'US' })).toMatchObject({
      QuestionOptions: expect.any(Array),
    });
    expect(
      await api().getRespondentSurveys('p1', { ip: '198.51.100.1', numSurveys: 1, deviceType: 'All' }),
    ).toMatchObject({
      surveyId: expect.any(Number),
    });
    expect(
      await api().respondentPreSurveyCheck({
        pid: 'p1',
        ip: '198.51.100.1',
        survNum: 1004,
        deviceType: 'All',
      }),
    ).toEqual({
      status: 'disqualified',
      disqualification: ['OpportunityFull'],
    });
    expect(await api().getTermReasonCategories(1005)).toEqual([
      expect.objectContaining({ name: 'ClientQuotaFull', code: 1005 }),
    ]);
    expect(await api().allowUniquePidAndIp({ id: 'x', pid: 'never-seen', survNum: 1001 })).toEqual({
      IP: true,
      PID: true,
    });
    expect(await api().getMetadata()).toMatchObject({
      surveyStatus: expect.objectContaining({ Completed: expect.any(Number) }),
    });
  });
});

/** A readable complete as the transaction list writes it. */
const good = {
  token: 't1',
  PID: 'p1',
  status: 'Completed',
  CPI: '1.00',
  clkDateTime: '11/21/2026, 1:00:00 pm PST',
};

describe('answers', () => {
  it('accept apiStatus in any casing', async () => {
    const { fetch } = failingFirst(1, () => json(200, { apiStatus: 'Success', result: { countries: [] } }));
    expect(await client({ fetch }).getMetadata()).toEqual({ countries: [] });
  });

  it('turn a 200 with apiStatus Failure into a typed error carrying msg', async () => {
    const { fetch, calls } = failingFirst(1, () => json(200, { apiStatus: 'Failure', msg: 'Survey locked' }));
    const error = await failure(client({ fetch }).getMetadata());
    expect(error).toMatchObject({
      kind: 'failure',
      httpStatus: 200,
      marketplaceMessage: 'Survey locked',
      retriable: false,
    });
    expect(calls()).toBe(1);
  });

  it('read "No surveys available" (or "No data found") on a survey listing as an empty list, not a failed call', async () => {
    for (const [status, msg] of [
      [400, 'No surveys available'],
      [404, 'No surveys available'],
      [400, 'No data found'],
      [200, 'No surveys available'],
    ] as const) {
      // A success says it as the lookup of a paused survey does: that message, no result.
      const empty = failingFirst(2, () =>
        json(status, { apiStatus: status === 200 ? 'success' : 'Failure', msg }),
      );
      const api = client({ fetch: empty.fetch });
      expect(await api.getAllocatedSurveysByDate(new Date())).toEqual({ rows: [], malformed: [] });
      expect(await api.getAllocatedSurveys()).toEqual({ rows: [], malformed: [] });
      expect(empty.calls()).toBe(2);
    }
    // A success with rows is its rows, whatever its message says (here one that does not read, reported).
    const listed = failingFirst(1, () =>
      json(200, { apiStatus: 'success', msg: 'No surveys available', result: [{ surveyId: 'x' }] }),
    );
    expect((await client({ fetch: listed.fetch }).getAllocatedSurveys()).malformed).toHaveLength(1);
    // Any other refusal of the listing stays an error.
    const refused = failingFirst(1, () =>
      json(400, { apiStatus: 'Failure', msg: 'Error while getting list' }),
    );
    expect(
      (await failure(client({ fetch: refused.fetch }).getAllocatedSurveysByDate(new Date()))).message,
    ).toMatch(/Error while getting list/);
  });

  it('refuse a success whose list is missing, rather than read it as no transactions', async () => {
    // Rows under another name: read as an empty list, three received completes would show as not paid.
    const misnamed = () => json(200, { apiStatus: 'success', msg: 'Transactions', data: [{ token: 'a' }] });
    const api = client({ fetch: failingFirst(3, misnamed).fetch, retries: 0 });
    const error = await failure(
      api.getSurveyTransactions('2203', { startDate: '2026-11-20', endDate: '2026-11-20' }),
    );
    expect(error.kind).toBe('malformed');
    expect(error.message).toMatch(/no result list/);
    expect((await failure(api.getAllocatedSurveys())).message).toMatch(/no result list/);
    expect((await failure(api.getAllocatedSurveysByDate(new Date()))).message).toMatch(/no result list/);
  });

  it('refuse a success that carries nothing and says the call or its token was refused (answered 200), rather than read it as no data', async () => {
    const answering = (msg: string, extra: Record<string, unknown> = {}) => {
      let calls = 0;
      let reads = 0;
      const fetcher: typeof fetch = async () => {
        calls++;
        return json(200, { apiStatus: 'success', msg, ...extra });
      };
      return { fetch: fetcher, calls: () => calls, reads: () => reads, token: () => `t${++reads}` };
    };
    const day = { startDate: '2026-11-20', endDate: '2026-11-20' };
    // Transactions: an empty list during a rate limit is no answer (three completes were judged not paid); retried,
    // and the marketplace out of reach as for a 429.
    const limited = answering('Too many requests. Rate limit exceeded, retry later', { result: [] });
    const error = await failure(
      client({ fetch: limited.fetch, retries: 2 }).getSurveyTransactions('2210', day),
    );
    expect(error).toMatchObject({ kind: 'failure', retriable: true });
    expect(error.message).toMatch(/a success without data that says: Too many requests/);
    expect(limited.calls()).toBe(3);
    expect(marketplaceDown(error)).toBe(true);
    // A token refused: read afresh once, as after a 401, then the marketplace refusing every call (not this survey).
    const inactive = answering('Access token inactive, please renew');
    const refusal = await failure(
      client({ fetch: inactive.fetch, retries: 2, accessToken: inactive.token }).getAllocatedSurveyById(
        '2210',
      ),
    );
    expect(refusal).toMatchObject({ kind: 'failure', retriable: false });
    expect([inactive.calls(), inactive.reads()]).toEqual([2, 2]);
    expect(marketplaceDown(refusal)).toBe(true);
    // Other common wordings of a refusal.
    for (const msg of [
      'Quota exceeded',
      'Request limit exceeded',
      'You have exceeded your quota',
      'Maximum number of calls reached',
      'Invalid API key',
      'Not authorized',
    ])
      expect(
        (
          await failure(
            client({ fetch: answering(msg, { result: [] }).fetch, retries: 0 }).getSurveyTransactions(
              '2210',
              day,
            ),
          )
        ).callerRefused,
      ).toBe(true);
    // A lookup whose sentence names the survey but refuses the call is no closure either.
    for (const msg of [
      'Too many requests: API access paused for 60 seconds',
      'Survey API access paused for this token: rate limit exceeded',
      'Invalid access token for survey 2210',
    ])
      expect(
        (await failure(client({ fetch: answering(msg).fetch, retries: 0 }).getAllocatedSurveyById('2210')))
          .kind,
      ).toBe('failure');
    // The sync's listings: no checkpoint moves on a refusal.
    const slowDown = answering('Too many requests, slow down', { result: [] });
    expect(
      (await failure(client({ fetch: slowDown.fetch, retries: 0 }).getAllocatedSurveysByDate(new Date())))
        .kind,
    ).toBe('failure');
    expect((await failure(client({ fetch: slowDown.fetch, retries: 0 }).getAllocatedSurveys())).kind).toBe(
      'failure',
    );
    // A read-back with empty settings, or none and "no redirect data" in a rate limit's words: no read-back, no drift.
    for (const extra of [{ redirectURL: {} }, {}]) {
      const readBack = answering('Too many requests: no redirect data returned', extra);
      expect(
        (await failure(client({ fetch: readBack.fetch, retries: 0 }).getSurveyRedirects('2210'))).kind,
      ).toBe('failure');
    }
    // What only names a token, a quota or a rate is read as ever: a survey closed, an empty listing, no rows.
    for (const msg of [
      'Survey 2210 is Paused/Closed (token expires in 3 days): quota full',
      'Survey 2210 is closed: survey quota reached',
      'Closed survey: no more entries for this token',
      'Paused by the buyer (survey 2210); your access token is valid',
    ])
      expect(
        await client({ fetch: answering(msg).fetch, retries: 0 }).getAllocatedSurveyById('2210'),
      ).toMatchObject({
        live: false,
      });
    expect(
      await client({
        fetch: answering('No surveys available for this token', { result: null }).fetch,
        retries: 0,
      }).getAllocatedSurveys(),
    ).toMatchObject({ rows: [] });
    expect(
      await client({
        fetch: answering('Transactions. Rate limit: 100 calls/min', { result: [] }).fetch,
        retries: 0,
      }).getSurveyTransactions('2210', day),
    ).toMatchObject({ rows: [] });
    // A success with data stands whatever its message.
    const listed = answering('Rate limit exceeded soon: 1 call left', {
      result: [{ token: 'abc', status: 'Completed' }],
    });
    await expect(
      client({ fetch: listed.fetch, retries: 0 }).getSurveyTransactions('2210', day),
    ).resolves.toBeDefined();
  });

  it('read "No data found" as no transactions whatever the token, and send only statuses the marketplace names', async () => {
    // A token whose characters occur in the message: concealed in what is shown, but the message still read.
    const sent: string[] = [];
    const answering: typeof fetch = async (input) => {
      sent.push(String(input));
      return json(400, { apiStatus: 'Failure', msg: 'No data found for survey: 2204' });
    };
    const api = client({ fetch: answering, accessToken: () => 'ta' });
    expect(await api.getSurveyTransactions('2204')).toEqual({ rows: [], malformed: [] });
    await api.getSurveyTransactions('2204', { statuses: [] });
    await api.getSurveyTransactions('2204', { statuses: ['OverQuota', ' completed'] });
    const statusOf = (url: string | undefined) => new URL(url ?? '').searchParams.get('status');
    expect(sent.map(statusOf)).toEqual([null, null, 'Over Quota,Completed']);
  });

  it('refuse a list that says it is one page of more, rather than read the rest as missing', async () => {
    for (const [envelope, problem] of [
      [{ totalPages: 3, page: 1 }, /one page of 3 \(totalPages\)/],
      [{ nextCursor: 'abc' }, /more pages \(nextCursor\)/],
      [{ hasMore: true }, /more pages \(hasMore\)/],
      [{ total: '1000', page: 1 }, /holds 2 of 1000 rows \(total\)/],
      // In a paging object beside the list.
      [{ pagination: { totalPages: 3, page: 1 } }, /one page of 3 \(pagination\.totalPages\)/],
      [{ meta: { next_page: 2 } }, /more pages \(meta\.next_page\)/],
      // Other spellings of the same (any case, with or without underscores), a last page said false, a count in words.
      [{ currentPage: 1, totalCount: 5 }, /holds 2 of 5 rows \(totalCount\)/],
      [{ current_page: 1, per_page: 2, total: 5 }, /holds 2 of 5 rows \(total\)/],
      [{ pageNo: 1, totalRecords: '5' }, /holds 2 of 5 rows \(totalRecords\)/],
      [{ page_size: 2, total_records: 5 }, /holds 2 of 5 rows \(total_records\)/],
      [{ offset: 0, recordsTotal: 5 }, /holds 2 of 5 rows \(recordsTotal\)/],
      [{ hasNextPage: true }, /more pages \(hasNextPage\)/],
      [{ next_page_url: 'https://x/2' }, /more pages \(next_page_url\)/],
      [{ paging: { next_url: 'https://x/2' } }, /more pages \(paging\.next_url\)/],
      [{ NextPageToken: 'abc' }, /more pages \(NextPageToken\)/],
      [{ isLastPage: false }, /more pages \(isLastPage is false\)/],
      [{ msg: '2 of 5 transactions' }, /holds 2 of 5 rows \(msg\)/],
      // A page count in the singular or turned round, a page number beside a total, a filtered total beside a page.
      [{ totalPage: 2 }, /one page of 2 \(totalPage\)/],
      [{ pageTotal: 2 }, /one page of 2 \(pageTotal\)/],
      [{ pageNum: 1, totalRecords: 5 }, /holds 2 of 5 rows \(totalRecords\)/],
      [{ offset: 0, recordsFiltered: 5 }, /holds 2 of 5 rows \(recordsFiltered\)/],
      [{ msg: 'Page 1 of 2' }, /page 1 of 2 \(msg\)/],
    ] as const) {
      const { fetch } = failingFirst(9, () =>
        json(200, { apiStatus: 'success', result: [good, { ...good, token: 't2' }], ...envelope }),
      );
      const error = await failure(client({ fetch }).getSurveyTransactions('1001'));
      expect(error).toMatchObject({ kind: 'malformed', retriable: false });
      expect(error.message).toMatch(problem);
    }
    // Paging fields that say the list is whole are no reason to refuse it, nor a total without a page beside it.
    for (const envelope of [
      { totalPages: 1 },
      { total: 2 },
      { hasMore: false, next: null },
      { hasMore: 'false' },
      { total: 1000 },
      { pagination: { totalPages: 1, page: 1 } },
      { links: { next: null } },
      { isLastPage: true, hasNextPage: false, next_page_url: null },
      { currentPage: 1, totalCount: 2 },
      { totalCount: 5 },
      { msg: '2 of 2 transactions' },
      { msg: 'found 1 of 5 kinds' },
      { msg: 'Page 1 of 1' },
      // DataTables' request counter is no page, and its recordsTotal counts before the date filter.
      { draw: 1, recordsTotal: 500, recordsFiltered: 2 },
      // The range asked for, echoed, beside a count of something else.
      { start: '2026-11-20', end: '2026-11-20', count: 57 },
      { page: 'transactions', total: 57 },
    ]) {
      const { fetch } = failingFirst(9, () =>
        json(200, { apiStatus: 'success', result: [good, { ...good, token: 't2' }], ...envelope }),
      );
      expect((await client({ fetch }).getSurveyTransactions('1001')).rows).toHaveLength(2);
    }
    const { fetch } = failingFirst(9, () => json(200, { apiStatus: 'success', result: [], totalPages: 2 }));
    expect((await failure(client({ fetch }).getAllocatedSurveys())).message).toMatch(/one page of 2/);
  });

  it('skip and report a malformed row without failing the page or counting it as zero', async () => {
    const { fetch } = failingFirst(1, () =>
      json(200, {
        apiStatus: 'success',
        result: [good, { ...good, token: 't2', CPI: 'free' }, { ...good, token: 't3' }],
      }),
    );
    const { rows, malformed } = await client({ fetch }).getSurveyTransactions('1001');
    expect(rows.map((t) => t.token)).toEqual(['t1', 't3']);
    expect(malformed).toEqual([
      expect.objectContaining({ index: 1, reference: 't2', problem: expect.stringMatching(/CPI/) }),
    ]);
  });

  it('read an id written as an integer past 2^53 with its digits as written, not rounded', async () => {
    const row = JSON.stringify({ ...good, PID: 'X', token: 'Y' })
      .replace('"PID":"X"', '"PID": 12345678901234567891')
      .replace('"token":"Y"', '"token":98765432109876543211');
    const fetch: typeof globalThis.fetch = async () =>
      new Response(`{"apiStatus":"success","result":[${row}]}`, { status: 200 });
    const { rows } = await client({ fetch }).getSurveyTransactions('1001');
    expect(rows.map((t) => [t.pid, t.token])).toEqual([['12345678901234567891', '98765432109876543211']]);
  });
});

describe('faults', () => {
  it('429 and 5xx are retried with backoff until they pass', async () => {
    const { fetch, calls } = failingFirst(2, () =>
      json(429, { apiStatus: 'Failure', msg: 'Too many requests' }),
    );
    const { rows } = await client({ fetch }).getAllocatedSurveys();
    expect(rows.length).toBeGreaterThan(0);
    expect(calls()).toBe(3);
  });

  it("a 429's Retry-After holds back the refused call and every other call of the client, up to a bound", async () => {
    const started: number[] = [];
    let refused = 0;
    const limited: typeof fetch = async (input, init) => {
      started.push(Date.now());
      if (refused++ === 0)
        return new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Too many requests' }), {
          status: 429,
          headers: { 'retry-after': '1' },
        });
      return fetch(input, init);
    };
    const api = client({ fetch: limited, concurrency: 2 });
    const first = api.getAllocatedSurveys();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const t0 = Date.now();
    const second = api.getAllocatedSurveys();
    await Promise.all([first, second]);
    // The refused call and the one made during the pause both went out only after the second asked for.
    expect(started).toHaveLength(3);
    expect(Math.min(...started.slice(1)) - (started[0] as number)).toBeGreaterThanOrEqual(950);
    expect(Math.min(...started.slice(1)) - t0).toBeGreaterThanOrEqual(850);
    expect(retryAfterMs('Wed, 21 Oct 2015 07:28:00 GMT', Date.parse('2015-10-21T07:27:00Z'))).toBe(60_000);
    expect(retryAfterMs('soon', 0)).toBeUndefined();
  });

  it("a scheduled run's client waits longer Retry-Afters, but a call refused through every retry still holds the others back 30 s at most", async () => {
    const refusing = failingFirst(
      10,
      () => new Response('{}', { status: 429, headers: { 'retry-after': '0' } }),
    );
    const api = client({ fetch: refusing.fetch, retries: 1, maxRetryAfterMs: RUN_MAX_RETRY_AFTER_MS });
    const at = Date.now();
    expect(await failure(api.getMetadata())).toMatchObject({ httpStatus: 429 });
    const held = await failure(api.getAllocatedSurveys());
    const until = Date.parse(/until (\S+)/.exec(held.message)?.[1] ?? '');
    expect(until - at).toBeLessThanOrEqual(31_000);
    expect(until - at).toBeGreaterThan(25_000);
  });

  it("a Retry-After date is read against the answer's own Date: a marketplace clock minutes ahead does not turn a pause of seconds into a refusal", async () => {
    const skewMs = 3 * 60_000;
    const ahead = failingFirst(1, () => {
      const theirNow = Date.now() + skewMs;
      return new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Too many requests' }), {
        status: 429,
        headers: {
          date: new Date(theirNow).toUTCString(),
          'retry-after': new Date(Math.ceil((theirNow + 1_000) / 1000) * 1000).toUTCString(),
        },
      });
    });
    const api = client({ fetch: ahead.fetch, maxRetryAfterMs: 5_000 });
    await api.getMetadata();
    expect(ahead.calls()).toBe(2);
  }, 15_000);

  it('a Retry-After longer than the client waits fails the call at once, and no call goes out before it has passed', async () => {
    const hour = failingFirst(
      1,
      () =>
        new Response(JSON.stringify({ apiStatus: 'Failure', msg: 'Daily quota used up' }), {
          status: 429,
          headers: { 'retry-after': '3600' },
        }),
    );
    const api = client({ fetch: hour.fetch, maxRetryAfterMs: 100 });
    const at = Date.now();
    const first = await failure(api.getAllocatedSurveys());
    expect(Date.now() - at).toBeLessThan(1_000);
    expect(first).toMatchObject({
      httpStatus: 429,
      retriable: true,
      marketplaceMessage: 'Daily quota used up',
    });
    expect(first.message).toMatch(/asked for no calls for 3600 s; none is made until \d{4}-/);
    // Every other call of the client fails without asking (a later run's client asks again).
    const second = await failure(api.getMetadata());
    expect(second.message).toMatch(/not tried: the marketplace is refusing calls, none is made until/);
    expect(hour.calls()).toBe(1);
    // A date far off is obeyed for an hour at most.
    const far = failingFirst(
      1,
      () => new Response('{}', { status: 429, headers: { 'retry-after': String(30 * 86_400) } }),
    );
    const farMessage = (await failure(client({ fetch: far.fetch, maxRetryAfterMs: 100 }).getMetadata()))
      .message;
    const until = Date.parse(farMessage.match(/until (\S+)/)?.[1] ?? '');
    expect(until - Date.now()).toBeLessThanOrEqual(MAX_REFUSAL_MS);
    expect(until - Date.now()).toBeGreaterThan(MAX_REFUSAL_MS - 60_000);
  });

  it('a call refused 429 through every retry stops the other calls for the longest pause, then they go out again', async () => {
    const refusing = failingFirst(4, () => json(429, { apiStatus: 'Failure', msg: 'Too many requests' }));
    const api = client({ fetch: refusing.fetch, retries: 3, maxRetryAfterMs: 300 });
    expect(await failure(api.getAllocatedSurveys())).toMatchObject({ httpStatus: 429 });
    expect(refusing.calls()).toBe(4);
    // Within the pause: failed at once, nothing asked, and the pause is not stretched by the calls not made.
    for (let i = 0; i < 3; i++) expect((await failure(api.getMetadata())).message).toMatch(/not tried/);
    expect(refusing.calls()).toBe(4);
    await new Promise((resolve) => setTimeout(resolve, 350));
    await api.getMetadata();
    expect(refusing.calls()).toBe(5);
  });

  it('callsPerSecond spaces the calls of the client out, whoever makes them', async () => {
    const started: number[] = [];
    const timed: typeof fetch = async (input, init) => {
      started.push(Date.now());
      return fetch(input, init);
    };
    const api = client({ fetch: timed, concurrency: 4, callsPerSecond: 20 });
    await Promise.all(Array.from({ length: 6 }, () => api.getMetadata()));
    const sorted = [...started].sort((a, b) => a - b);
    // Six calls at 20 a second: the last starts at least five intervals (250 ms) after the first.
    expect((sorted.at(-1) as number) - (sorted[0] as number)).toBeGreaterThanOrEqual(240);
    for (let i = 1; i < sorted.length; i++)
      expect((sorted[i] as number) - (sorted[i - 1] as number)).toBeGreaterThanOrEqual(40);
  });

  it('retries stop after the configured number and the error says what happened', async () => {
    marketplace.apiFaults = { ...NO_API_FAULTS, serverError: 1 };
    try {
      const { fetch, calls } = failingFirst(0, () => json(500, {}));
      const error = await failure(client({ retries: 2, fetch }).getAllocatedSurveys());
      expect(error).toMatchObject({
        kind: 'http',
        httpStatus: 503,
        retriable: true,
        marketplaceMessage: 'Service unavailable',
      });
      expect(calls()).toBe(3);
    } finally {
      marketplace.apiFaults = { ...NO_API_FAULTS };
    }
  });

  it('timeouts and malformed bodies are typed and retried', async () => {
    marketplace.apiFaults = { ...NO_API_FAULTS, timeout: 1 };
    try {
      const timedOut = await failure(client({ retries: 1, timeoutMs: 150 }).getMetadata());
      expect(timedOut).toMatchObject({ kind: 'timeout', retriable: true });
      marketplace.apiFaults = { ...NO_API_FAULTS, malformed: 1 };
      const malformed = await failure(client({ retries: 1 }).getMetadata());
      expect(malformed).toMatchObject({ kind: 'malformed', retriable: true });
    } finally {
      marketplace.apiFaults = { ...NO_API_FAULTS };
    }
  });

  it('an answer over the size bound fails the call by name, read no further (its size declared or not)', async () => {
    let enqueued = 0;
    const endless: typeof fetch = async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          pull(controller) {
            enqueued++;
            controller.enqueue(new Uint8Array(64 * 1024).fill(32));
          },
        }),
        { status: 200 },
      );
    const big = await failure(
      client({ fetch: endless, maxBodyBytes: 1_048_576, retries: 2 }).getSurveyTransactions('1001'),
    );
    expect(big).toMatchObject({ kind: 'malformed', retriable: false });
    expect(big.message).toMatch(/the answer is over 1 MB, not read/);
    // Stopped at the bound (16 pieces of 64 kB), not read to the end; and not tried again.
    expect(enqueued).toBeLessThan(24);
    const declared: typeof fetch = async () =>
      new Response('{}', { status: 200, headers: { 'content-length': String(5 * 1_048_576) } });
    expect(
      (await failure(client({ fetch: declared, maxBodyBytes: 1_048_576 }).getMetadata())).message,
    ).toMatch(/over 1 MB/);
    // A bound past what one string holds (a function of 10 GB's eighth) is the largest a string takes.
    const huge: typeof fetch = async () =>
      new Response('{}', { status: 200, headers: { 'content-length': String(300 * 1_048_576) } });
    expect(
      (await failure(client({ fetch: huge, maxBodyBytes: 1_280 * 1_048_576 }).getMetadata())).message,
    ).toMatch(/over 256 MB/);
    // An error's body past the bound is left unread: the answer is judged by its status (a 503 is retried).
    const unavailable = failingFirst(1, () => new Response('x'.repeat(2 * 1_048_576), { status: 503 }));
    await expect(
      client({ fetch: unavailable.fetch, maxBodyBytes: 1_048_576 }).getMetadata(),
    ).resolves.toBeDefined();
    expect(unavailable.calls()).toBe(2);
  });

  it('reads an answer that starts with a byte-order mark, as Response.text() does', async () => {
    const bom: typeof fetch = async () =>
      new Response(`\uFEFF${JSON.stringify({ apiStatus: 'success', result: { data: [] } })}`, {
        status: 200,
      });
    await expect(client({ fetch: bom }).getMetadata()).resolves.toBeDefined();
  });

  it('a large answer may take longer to read than to begin; a body that stalls is a timeout, not a malformed answer', async () => {
    // The answer begins at once, then its body arrives in pieces for about 400 ms: a survey's window of tens of
    // thousands of rows is tens of megabytes.
    const trickling =
      (pieces: readonly string[], gapMs: number, stallAfter = pieces.length): typeof fetch =>
      async (_input, init) => {
        let timer: NodeJS.Timeout | undefined;
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            init?.signal?.addEventListener('abort', () => {
              clearTimeout(timer);
              controller.error(init.signal?.reason);
            });
            let sent = 0;
            const next = () => {
              if (sent === stallAfter) return;
              controller.enqueue(new TextEncoder().encode(pieces[sent++]));
              if (sent === pieces.length) controller.close();
              else timer = setTimeout(next, gapMs);
            };
            next();
          },
        });
        return new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
      };
    const answer = JSON.stringify({ apiStatus: 'success', result: { data: [] } });
    const pieces = answer.match(/.{1,8}/g) ?? [];
    const gapMs = Math.ceil(400 / pieces.length);
    const slow = client({ fetch: trickling(pieces, gapMs), timeoutMs: 150, retries: 0 });
    await expect(slow.getMetadata()).resolves.toBeDefined();
    const stalled = await failure(
      client({
        fetch: trickling(pieces, gapMs, 2),
        timeoutMs: 150,
        bodyTimeoutMs: 300,
        retries: 0,
      }).getMetadata(),
    );
    expect(stalled).toMatchObject({ kind: 'timeout', retriable: true, httpStatus: 200 });
    expect(stalled.message).toContain("the answer's body was not read in full within 300 ms");
  });

  it('a token store that hangs or fails fails the call as a marketplace out of reach, within the run, never the secret shown', async () => {
    // Secrets Manager accepting the connection and never answering: the run's end bounds the read too.
    const stopAt = Date.now() + 400;
    const started = Date.now();
    const hung = await failure(
      client({
        accessToken: () => new Promise<string>(() => undefined),
        retries: 4,
        stopAt: () => stopAt,
      }).getMetadata(),
    );
    expect(hung).toMatchObject({ kind: 'network', retriable: true });
    expect(hung.message).toMatch(/the access token could not be read: no answer within \d+ ms/);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(marketplaceDown(hung)).toBe(true);
    // Failing at once (the secret's read refused): the same kind, retried, and counted toward the run's stop.
    let reads = 0;
    const refused = await failure(
      client({
        accessToken: () => {
          reads++;
          throw Object.assign(new Error('AccessDeniedException: not authorized'), {
            name: 'GetParameterError',
          });
        },
        retries: 2,
      }).getMetadata(),
    );
    expect(refused).toMatchObject({ kind: 'network', retriable: true });
    expect(refused.message).toContain('AccessDeniedException: not authorized');
    expect(reads).toBe(3);
  });

  it("a run's end cuts a hanging call short and stops its retries and a 429's hold, rather than outlast the run", async () => {
    const hanging: typeof fetch = (_input, init) =>
      new Promise((_, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal?.reason)));
    let stopAt = Date.now() + 400;
    const started = Date.now();
    // Five tries of 2 s each would take 10 s; the run ends in 400 ms.
    const cut = await failure(client({ fetch: hanging, retries: 4, stopAt: () => stopAt }).getMetadata());
    expect(cut).toMatchObject({ kind: 'timeout' });
    expect(Date.now() - started).toBeLessThan(1_500);
    // Past the end nothing goes out at all.
    const { fetch, calls } = failingFirst(0, () => json(500, {}));
    stopAt = Date.now() - 1;
    expect(await failure(client({ fetch, stopAt: () => stopAt }).getMetadata())).toMatchObject({
      kind: 'timeout',
      message: expect.stringContaining("not tried: the run's time is up"),
    });
    expect(calls()).toBe(0);
    // A marketplace asking to be left alone for a minute is not waited for past the end.
    const held = failingFirst(5, () => new Response('{}', { status: 429, headers: { 'retry-after': '60' } }));
    stopAt = Date.now() + 300;
    const at = Date.now();
    await failure(client({ fetch: held.fetch, maxRetryAfterMs: 60_000, stopAt: () => stopAt }).getMetadata());
    expect(Date.now() - at).toBeLessThan(1_500);
  });

  it('network errors are typed and retried', async () => {
    const error = await failure(client({ baseUrl: 'http://127.0.0.1:9', retries: 1 }).getMetadata());
    expect(error).toMatchObject({ kind: 'network', retriable: true });
    // Where it was going: a wrong address or port is the usual cause.
    expect(error.message).toMatch(/network error reaching http:\/\/127\.0\.0\.1:9 \(/);
  });

  it('other 4xx are not retried', async () => {
    const { fetch, calls } = failingFirst(0, () => json(500, {}));
    const error = await failure(
      client({ fetch }).getSurveyTransactions('1001', { statuses: ['Completed', 'Nope'] }),
    );
    expect(error).toMatchObject({
      kind: 'http',
      httpStatus: 400,
      marketplaceMessage: 'Invalid status: "Nope"',
      retriable: false,
    });
    expect(calls()).toBe(1);
  });

  it("a message quoting a postback URL back is kept without the URL's signature", async () => {
    const sig = 'O2dqVf_Ab3dE9xYz0AbCdEfGhIjKlMnOpQrStUvWxYz';
    const echoing = failingFirst(1, () =>
      json(400, {
        apiStatus: 'Failure',
        msg: `Invalid pstbck URL: https://h.example/postback/1001/success?pid=[%%pid%%]&kid=k2&sig=${sig}`,
      }),
    );
    const error = await failure(
      client({ fetch: echoing.fetch }).setRedirectionForSurvey('1001', { pstbck: 'x' }),
    );
    expect(error.message).toContain('&kid=k2&sig=[concealed]');
    expect(JSON.stringify(error)).not.toContain(sig);
    expect(error.marketplaceMessage).not.toContain(sig);
  });

  it('a wrong token is a typed 401, and no error ever carries the token', async () => {
    const wrong = await failure(client({ accessToken: () => 'not-the-token' }).getMetadata());
    expect(wrong).toMatchObject({ httpStatus: 401, retriable: false });
    const { fetch } = failingFirst(5, () =>
      json(400, { apiStatus: 'Failure', msg: `bad token ${TOKEN} given` }),
    );
    const echoed = await failure(client({ fetch }).getMetadata());
    for (const error of [wrong, echoed]) {
      expect(
        `${error.message} ${error.marketplaceMessage} ${JSON.stringify(error)} ${error.stack}`,
      ).not.toContain(TOKEN);
    }
    expect(echoed.marketplaceMessage).toBe('bad token [redacted] given');
    // Echoed where the message is cut (its 300th character), or URL-encoded: not even its start is kept.
    const odd = 'odd-secret/token+with=signs-0123456789';
    const across = failingFirst(5, () =>
      json(400, { apiStatus: 'Failure', msg: `${'x'.repeat(290)}${odd} and ${encodeURIComponent(odd)}` }),
    );
    const cut = await failure(client({ fetch: across.fetch, accessToken: () => odd }).getMetadata());
    expect(`${cut.message} ${cut.marketplaceMessage}`).not.toMatch(/odd-secr|odd-secret%2Ftoken/);
  });

  it("no error carries a token in the answer's apiStatus, nor the token a 401's retry replaced", async () => {
    const { fetch } = failingFirst(5, () => json(200, { apiStatus: `Invalid access token ${TOKEN}` }));
    const inStatus = await failure(client({ fetch }).getMetadata());
    const echoingHeaders = failingFirst(5, () =>
      json(200, { apiStatus: { headers: { 'x-access-token': TOKEN } } }),
    );
    const inObject = await failure(client({ fetch: echoingHeaders.fetch }).getMetadata());
    for (const error of [inStatus, inObject])
      expect(`${error.message} ${error.marketplaceMessage} ${JSON.stringify(error)}`).not.toContain(TOKEN);
    expect(inStatus.message).toContain('Invalid access token [redacted]');
    // Refused once, asked again with the token read afresh, then told of the first: neither is shown.
    const afterRefusal = (second: Response) => {
      let calls = 0;
      return failure(
        client({
          retries: 0,
          accessToken: (options) =>
            options?.fresh ? 'the-fresh-token-0123456789' : 'the-first-token-0123456789',
          fetch: async () =>
            ++calls === 1
              ? json(401, { apiStatus: 'Failure', msg: 'the-first-token-0123456789 unauthorized' })
              : second,
        }).getMetadata(),
      );
    };
    const replaced = await afterRefusal(
      json(403, { apiStatus: 'Failure', msg: 'token the-first-token-0123456789 was revoked' }),
    );
    expect(replaced.message).toContain('token [redacted] was revoked');
    expect(JSON.stringify(replaced)).not.toContain('the-first-token');
    // The second token echoed where the message is cut, after the first: not even its start is kept.
    const cut = await afterRefusal(
      json(400, { apiStatus: 'Failure', msg: `${'x'.repeat(290)} the-fresh-token-0123456789` }),
    );
    expect(`${cut.message} ${cut.marketplaceMessage}`).not.toMatch(/the-fresh|the-first/);
  });

  it('a redirect is not followed: the token goes to the marketplace alone, and the answer says where it pointed', async () => {
    const asked: { url: string; redirect?: RequestInit['redirect'] }[] = [];
    const error = await failure(
      client({
        fetch: async (input, init) => {
          asked.push({ url: String(input), redirect: init?.redirect });
          // As fetch answers a redirect it was told not to follow.
          return new Response('', {
            status: 307,
            headers: { location: 'https://elsewhere.example/api?x=1' },
          });
        },
      }).getMetadata(),
    );
    expect(asked).toEqual([expect.objectContaining({ redirect: 'manual' })]);
    expect(error).toMatchObject({ httpStatus: 307, retriable: false });
    expect(error.message).toContain('a redirect to https://elsewhere.example, not followed');
    // And with fetch itself: the other host is never asked.
    const other = createServer((_request, response) => {
      other.emit('asked');
      response.end('{}');
    });
    let otherAsked = false;
    other.on('asked', () => {
      otherAsked = true;
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const redirecting = createServer((_request, response) => {
      response.writeHead(302, { location: `http://127.0.0.1:${(other.address() as AddressInfo).port}/` });
      response.end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    try {
      const followed = await failure(
        client({ baseUrl: `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}` }).getMetadata(),
      );
      expect(followed.httpStatus).toBe(302);
      expect(otherAsked).toBe(false);
    } finally {
      await Promise.all([
        new Promise((resolve) => other.close(resolve)),
        new Promise((resolve) => redirecting.close(resolve)),
      ]);
    }
  });

  it('a 401 reads the token once more past its cache and tries again: a token rotated meanwhile passes', async () => {
    // The marketplace took the new token; the cache still serves the old one until asked afresh.
    const asked: (boolean | undefined)[] = [];
    const rotated = client({
      retries: 0,
      accessToken: (options) => {
        asked.push(options?.fresh);
        return options?.fresh ? TOKEN : 'the-old-token';
      },
    });
    await expect(rotated.getMetadata()).resolves.toBeDefined();
    expect(asked).toEqual([undefined, true]);
    // Refused again with the token read afresh: the 401 stands, once more only.
    asked.length = 0;
    const revoked = await failure(
      client({
        accessToken: (options) => {
          asked.push(options?.fresh);
          return 'revoked';
        },
      }).getMetadata(),
    );
    expect(revoked).toMatchObject({ httpStatus: 401, retriable: false });
    expect(asked).toEqual([undefined, true]);
  });

  /** A fetch that counts requests in flight, each held for a moment. */
  function countingFetch() {
    const counts = { inFlight: 0, peak: 0 };
    const counting: typeof fetch = async (input, init) => {
      counts.inFlight++;
      counts.peak = Math.max(counts.peak, counts.inFlight);
      try {
        await new Promise((resolve) => setTimeout(resolve, 10));
        return await fetch(input, init);
      } finally {
        counts.inFlight--;
      }
    };
    return { fetch: counting, counts };
  }

  it('one concurrency limit holds across every client it is shared with', async () => {
    const { fetch: counting, counts } = countingFetch();
    const limit = marketplaceLimit(3);
    const first = client({ fetch: counting, limit });
    const second = client({ fetch: counting, limit });
    await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? first : second).getMetadata()));
    expect(counts.peak).toBe(3);
  });

  it('a client made later with another concurrency leaves the first client its own limit', async () => {
    const one = countingFetch();
    const two = countingFetch();
    const first = client({ fetch: one.fetch, concurrency: 2 });
    const second = client({ fetch: two.fetch, concurrency: 5 });
    await Promise.all(Array.from({ length: 10 }, () => first.getMetadata()));
    expect(one.counts.peak).toBe(2);
    await Promise.all(Array.from({ length: 10 }, () => second.getMetadata()));
    expect(two.counts.peak).toBe(5);
  });

  it('a client takes a concurrency or a shared limit, not both', () => {
    expect(() => client({ concurrency: 2, limit: marketplaceLimit(3) })).toThrow(RangeError);
  });
});

describe('rate limits', () => {
  it('calls waiting for a callsPerSecond slot wait out a Retry-After pause set meanwhile', async () => {
    const started: number[] = [];
    let first = true;
    const stub: typeof fetch = async (input, init) => {
      started.push(Date.now());
      if (first) {
        first = false;
        return new Response('{}', { status: 429, headers: { 'retry-after': '1' } });
      }
      return fetch(input, init);
    };
    const api = client({ fetch: stub, concurrency: 4, callsPerSecond: 10, retries: 2 });
    await Promise.all(Array.from({ length: 4 }, () => api.getMetadata()));
    // The first call was answered 429 "retry after 1 s" at once: no call of the client goes out within that second.
    const t0 = started[0] as number;
    expect(
      started
        .slice(1)
        .map((t) => t - t0)
        .filter((ms) => ms < 950),
    ).toEqual([]);
  });
});
