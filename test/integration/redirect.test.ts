/**
 * The redirect handler against the real DynamoDB protocol: respondents always get their answer; only
 * verified hits become outcomes; refused ones are kept apart.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SURVEY_OVER_PAGE } from '../../functions/core/landing-page';
import { createDocumentClient, createLedgerStore, type LedgerStore } from '../../functions/core/store';
import { apiEvent, filledUrl, type Handler, invoke } from '../support/api-events';
import { freshTable, TEST_KEY_RING } from '../support/ledger';

let redirect: Handler;
let postback: Handler;
let store: LedgerStore;

beforeAll(async () => {
  const { endpoint, tableName } = await freshTable();
  Object.assign(process.env, {
    TABLE_NAME: tableName,
    DYNAMODB_ENDPOINT: endpoint,
    SIGNING_KEYS: TEST_KEY_RING,
    LANDING_URL_SUCCESS: 'https://panel.example.com/thanks?pid={pid}&survey={surveyId}&o={outcome}',
    LANDING_URL_FAIL: 'https://panel.example.com/sorry?pid={pid}',
  });
  ({ handler: redirect } = (await import('../../functions/redirect')) as { handler: Handler });
  ({ handler: postback } = (await import('../../functions/postback')) as { handler: Handler });
  store = createLedgerStore(createDocumentClient({ endpoint }), tableName);
});

let ids: { pid: string; token: string };
beforeEach(() => {
  ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
});

const redirectUrl = (
  outcome: 'success' | 'fail' | 'overquota' | 'quality' | 'termination',
  survey = '2002',
) => filledUrl(TEST_KEY_RING, 'redirect', survey, outcome, ids);

const rejectedFor = async (token: string) =>
  (await store.rejectedHits(new Date().toISOString().slice(0, 10))).filter((hit) => hit.token === token);

describe('a signed redirect hit', () => {
  it.each(['dGVzdC0x+/Q==', 'a@b.com', '12345|x', 'user 1', 'a#b%2F&c=d', 'Zoë 👩‍👩‍👧'])(
    'with the supplier pid %j is recorded and the landing page gets the pid percent-encoded',
    async (pid) => {
      ids = { pid, token: randomUUID() };
      const result = await invoke(redirect, apiEvent('GET', redirectUrl('success')));
      expect(result.statusCode).toBe(302);
      const location = new URL(String(result.headers?.location));
      expect(location.searchParams.get('pid')).toBe(pid);
      expect(location.searchParams.get('survey')).toBe('2002');
      expect(result.headers?.location).toContain(`pid=${encodeURIComponent(pid)}&`);
      const [attempt] = await store.attemptsOf('2002', pid);
      expect(attempt).toMatchObject({ pid, token: ids.token, redirect: { outcome: 'success', hits: 1 } });
    },
  );

  it('is recorded as a redirect-only complete and sends the respondent to the landing page', async () => {
    const result = await invoke(redirect, apiEvent('GET', redirectUrl('success')));
    expect(result.statusCode).toBe(302);
    expect(result.headers?.location).toBe(
      `https://panel.example.com/thanks?pid=${ids.pid}&survey=2002&o=success`,
    );
    expect(result.headers?.['referrer-policy']).toBe('no-referrer');
    const [attempt] = await store.attemptsOf('2002', ids.pid);
    expect(attempt).toMatchObject({ complete: 'redirect-only', redirect: { outcome: 'success', hits: 1 } });
    expect(attempt?.postback).toBeUndefined();
  });

  it('becomes postback-confirmed once the success postback arrives, on the same attempt', async () => {
    await invoke(redirect, apiEvent('GET', redirectUrl('success')));
    await invoke(postback, apiEvent('GET', filledUrl(TEST_KEY_RING, 'postback', '2002', 'success', ids)));
    const attempts = await store.attemptsOf('2002', ids.pid);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ complete: 'postback-confirmed', conflict: false });
  });

  it('for an outcome without a landing template answers the plain page', async () => {
    const result = await invoke(redirect, apiEvent('GET', redirectUrl('overquota')));
    expect(result.statusCode).toBe(200);
    expect(result.headers?.['content-type']).toBe('text/html; charset=utf-8');
    expect(result.body).toBe(SURVEY_OVER_PAGE);
    expect((await store.attemptsOf('2002', ids.pid))[0]?.redirect?.outcome).toBe('overquota');
  });

  it('refreshed counts, and a later different outcome is a conflict that does not overwrite', async () => {
    await invoke(redirect, apiEvent('GET', redirectUrl('success')));
    await invoke(redirect, apiEvent('GET', redirectUrl('success')));
    await invoke(redirect, apiEvent('GET', redirectUrl('termination')));
    const [attempt] = await store.attemptsOf('2002', ids.pid);
    expect(attempt?.redirect).toMatchObject({ outcome: 'success', hits: 3, conflict: true });
    expect(attempt?.redirect?.sightings.map((s) => [s.outcome, s.hits])).toEqual([
      ['success', 2],
      ['termination', 1],
    ]);
  });
});

describe('a redirect hit that does not check out', () => {
  it('with a bad signature still redirects, is stored as rejected and never as an outcome', async () => {
    const forged = redirectUrl('success').replace(/sig=[^&]+/, `sig=${'B'.repeat(43)}`);
    const result = await invoke(redirect, apiEvent('GET', forged, { sourceIp: '203.0.113.50' }));
    expect(result.statusCode).toBe(302);
    expect(result.headers?.location).toContain(`pid=${ids.pid}`);
    expect(await store.attemptsOf('2002', ids.pid)).toEqual([]);
    expect(await rejectedFor(ids.token)).toEqual([
      expect.objectContaining({
        reason: 'signature mismatch',
        surveyId: '2002',
        outcome: 'success',
        pid: ids.pid,
        sourceIp: '203.0.113.50',
      }),
    ]);
  });

  it("with another survey's signature is rejected", async () => {
    const forged = redirectUrl('success', '2003').replace('/2003/', '/2002/');
    await invoke(redirect, apiEvent('GET', forged));
    expect(await store.attemptsOf('2002', ids.pid)).toEqual([]);
    expect(await rejectedFor(ids.token)).toHaveLength(1);
  });

  it('with a malformed pid answers the plain page, never an error, and stores nothing as an outcome', async () => {
    const url = redirectUrl('success').replace(`pid=${ids.pid}`, 'pid=%3Cscript%3E%0A');
    const result = await invoke(redirect, apiEvent('GET', url));
    expect(result.statusCode).toBe(200);
    expect(result.body).toBe(SURVEY_OVER_PAGE);
    expect(await rejectedFor(ids.token)).toEqual([
      expect.objectContaining({
        reason: 'pid must not contain control characters',
        pid: '<script>?',
      }),
    ]);
  });

  it('with a pid over the bound is kept apart, its pid clipped to well-formed text', async () => {
    const pid = `a${'👩'.repeat(60)}`;
    const url = redirectUrl('success').replace(`pid=${ids.pid}`, `pid=${encodeURIComponent(pid)}`);
    const result = await invoke(redirect, apiEvent('GET', url));
    expect(result.statusCode).toBe(200);
    const [rejected] = await rejectedFor(ids.token);
    expect(rejected?.reason).toBe('pid must be at most 64 bytes of UTF-8');
    expect(pid.startsWith(rejected?.pid ?? '-')).toBe(true);
    expect(rejected?.pid).not.toMatch(/\p{Cs}/u);
  });

  it('stores every field of a rejected hit bounded, however long the reason it was refused for', async () => {
    await store.recordRejectedHit({
      at: new Date().toISOString(),
      requestId: 'r'.repeat(5000),
      channel: 'redirect',
      reason: `survey id must be digits, not ${'x'.repeat(4045)}`,
      surveyId: 's'.repeat(5000),
      pid: 'p'.repeat(5000),
      token: ids.token,
      sourceIp: '1'.repeat(5000),
    });
    const [rejected] = await rejectedFor(ids.token);
    expect(rejected?.reason).toHaveLength(200);
    expect(rejected?.reason.startsWith('survey id must be digits, not x')).toBe(true);
    for (const field of [rejected?.requestId, rejected?.surveyId, rejected?.pid, rejected?.sourceIp])
      expect(field).toHaveLength(100);
  });

  it('with an unknown outcome answers the plain page', async () => {
    const url = redirectUrl('success').replace('/success?', '/complete?');
    const result = await invoke(redirect, apiEvent('GET', url));
    expect(result.statusCode).toBe(200);
    expect(result.body).toBe(SURVEY_OVER_PAGE);
  });
});
