/**
 * The redirect handler against the real DynamoDB protocol: respondents always get their answer; only
 * verified hits become outcomes; refused ones are kept apart.
 */
import { createHash, randomUUID } from 'node:crypto';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createDocumentClient,
  createLedgerStore,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { SURVEY_OVER_PAGE } from '../../functions/receiving/landing-page';
import { senderOf } from '../../functions/receiving/sender';
import { parseKeyRing } from '../../functions/receiving/signing';
import { apiEvent, filledUrl, type Handler, invoke } from '../support/api-events';
import { receivers } from '../support/handlers';
import { freshTable, TEST_KEY_RING } from '../support/ledger';

let redirect: Handler;
let postback: Handler;
let store: LedgerStore;
let table: { endpoint: string; tableName: string };

beforeAll(async () => {
  table = await freshTable();
  const { endpoint, tableName } = table;
  ({ redirect, postback } = await receivers({
    endpoint,
    tableName,
    landing: {
      success: 'https://panel.example.com/thanks?pid={pid}&survey={surveyId}&o={outcome}',
      fail: 'https://panel.example.com/sorry?pid={pid}',
    },
  }));
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

/** A source address of the test's own: refused hits are counted per source, so tests cannot see each other's. */
const freshSource = () => `2001:db8::${randomUUID().slice(0, 4)}:${randomUUID().slice(0, 4)}`;

const rejectedFrom = async (sourceIp: string, day = new Date().toISOString().slice(0, 10)) =>
  (await store.rejectedHits(day)).filter((hit) => hit.sourceIp === sourceIp);

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

  it('with a pid byte that is not UTF-8 hands the panel that byte, as the marketplace sent it', async () => {
    // A Latin-1 id (`José` as one byte E9) and one mixing UTF-8 with a stray byte: kept as escapes in the ledger.
    for (const [sent, stored] of [
      ['Jos%E9', 'Jos%E9'],
      ['caf%C3%A9%E9+x', 'café%E9 x'],
    ] as const) {
      ids = { pid: 'placeholder-pid', token: randomUUID() };
      const url = redirectUrl('success').replace('pid=placeholder-pid', `pid=${sent}`);
      const result = await invoke(redirect, apiEvent('GET', url));
      expect(result.statusCode).toBe(302);
      expect(String(result.headers?.location)).toContain(`pid=${sent.replace('+', '%20')}&`);
      const [attempt] = await store.attemptsOf('2002', stored);
      expect(attempt).toMatchObject({ pid: stored, token: ids.token, redirect: { outcome: 'success' } });
    }
  });

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

  it("is not recorded when a browser prefetches it or a link-preview bot unfurls it: no respondent's visit", async () => {
    const at = (headers: Record<string, string>) =>
      invoke(redirect, apiEvent('GET', redirectUrl('success'), { headers }));
    // The browser drops a refused prefetch and asks again if the respondent navigates.
    for (const headers of [
      { 'sec-purpose': 'prefetch' },
      { 'sec-purpose': 'prefetch;prerender' },
      { purpose: 'prefetch' },
    ] as Record<string, string>[]) {
      const answer = await at(headers);
      expect(answer.statusCode).toBe(425);
      expect(answer.headers?.['cache-control']).toBe('no-store');
    }
    for (const agent of [
      'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
      'facebookexternalhit/1.1',
      'WhatsApp/2.23.20.0',
    ]) {
      const answer = await at({ 'user-agent': agent });
      expect(answer.statusCode).toBe(200);
      expect(answer.body).toBe(SURVEY_OVER_PAGE);
    }
    expect(await store.attemptsOf('2002', ids.pid)).toEqual([]);
    // The respondent's own visit, from a browser (Facebook's in-app one among them), is recorded once.
    await at({
      'user-agent': 'Mozilla/5.0 (iPhone) AppleWebKit/605.1.15 Mobile/15E148 [FBAN/FBIOS;FBAV/400.0]',
    });
    expect((await store.attemptsOf('2002', ids.pid))[0]).toMatchObject({
      redirect: { outcome: 'success', hits: 1 },
    });
  });

  it("keeps who sent it as a fingerprint of the address, never the address, and the first sender's only", async () => {
    const first = freshSource();
    await invoke(redirect, apiEvent('GET', redirectUrl('success'), { sourceIp: first }));
    await invoke(redirect, apiEvent('GET', redirectUrl('success'), { sourceIp: freshSource() }));
    const [attempt] = await store.attemptsOf('2002', ids.pid);
    const secret = parseKeyRing(TEST_KEY_RING).current.secret;
    expect(attempt?.redirect?.from).toBe(senderOf(first, secret));
    expect(attempt?.redirect?.from).toMatch(/^[\w-]{8}$/);
    expect(JSON.stringify(attempt)).not.toContain(first);
    const other = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
    await invoke(
      redirect,
      apiEvent('GET', filledUrl(TEST_KEY_RING, 'redirect', '2002', 'fail', other), { sourceIp: first }),
    );
    expect((await store.attemptsOf('2002', other.pid))[0]?.redirect?.from).toBe(senderOf(first, secret));
    // Keyed: not the plain hash of the address, which hashing every address would reverse.
    expect(attempt?.redirect?.from).not.toBe(
      createHash('sha256').update(first).digest('base64url').slice(0, 8),
    );
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

describe("one sender's redirects past the per-minute bound", () => {
  it('are answered as every redirect is and not recorded; other senders and postbacks are not held back', async () => {
    const bounded = await receivers({ ...table, perSenderMinute: 3 });
    const send = (pid: string, sourceIp: string) =>
      invoke(
        bounded.redirect,
        apiEvent('GET', filledUrl(TEST_KEY_RING, 'redirect', '2010', 'success', { pid, token: pid }), {
          sourceIp,
        }),
      );
    const flood = Array.from({ length: 5 }, (_, i) => `flood-${randomUUID().slice(0, 6)}-${i}`);
    // One IPv6 /64: any of its addresses is the same sender.
    for (const [i, pid] of flood.entries()) {
      // The plain page every redirect of this survey gets (no landing page set), recorded or not.
      const result = await send(pid, `2001:db8:77:1::${i + 1}`);
      expect(result.statusCode).toBe(200);
    }
    const stored = async (pid: string) => (await store.attemptsOf('2010', pid)).length;
    expect(await Promise.all(flood.map(stored))).toEqual([1, 1, 1, 0, 0]);
    const other = `other-${randomUUID().slice(0, 6)}`;
    await send(other, '2001:db8:77:2::1');
    expect(await stored(other)).toBe(1);
    // The marketplace's server is never bounded, whatever the redirects from its address did.
    const confirmed = await invoke(
      bounded.postback,
      apiEvent(
        'GET',
        filledUrl(TEST_KEY_RING, 'postback', '2010', 'success', {
          pid: flood[4] as string,
          token: flood[4] as string,
        }),
        { sourceIp: '2001:db8:77:1::9' },
      ),
    );
    expect(confirmed.statusCode).toBe(200);
    expect(await stored(flood[4] as string)).toBe(1);
  });
});

describe('a redirect hit that does not check out', () => {
  let sourceIp: string;
  beforeEach(() => {
    sourceIp = freshSource();
  });
  const refused = (url: string) => invoke(redirect, apiEvent('GET', url, { sourceIp }));

  it('with a bad signature still redirects, is stored as rejected and never as an outcome', async () => {
    const forged = redirectUrl('success').replace(/sig=[^&]+/, `sig=${'B'.repeat(43)}`);
    const result = await refused(forged);
    expect(result.statusCode).toBe(302);
    expect(result.headers?.location).toContain(`pid=${ids.pid}`);
    expect(await store.attemptsOf('2002', ids.pid)).toEqual([]);
    expect(await rejectedFrom(sourceIp)).toEqual([
      expect.objectContaining({
        code: 'signature_mismatch',
        reason: 'signature mismatch',
        surveyId: '2002',
        outcome: 'success',
        pid: ids.pid,
        token: ids.token,
        sourceIp,
        hits: 1,
      }),
    ]);
  });

  it("with another survey's signature is rejected", async () => {
    const forged = redirectUrl('success', '2003').replace('/2003/', '/2002/');
    await refused(forged);
    expect(await store.attemptsOf('2002', ids.pid)).toEqual([]);
    expect(await rejectedFrom(sourceIp)).toEqual([
      expect.objectContaining({ code: 'signature_mismatch', token: ids.token, hits: 1 }),
    ]);
  });

  it('without a signature is rejected as such, under the id API Gateway gave the request', async () => {
    const event = apiEvent('GET', redirectUrl('success').replace(/&?sig=[^&]+/, ''), { sourceIp });
    await invoke(redirect, event);
    expect(await rejectedFrom(sourceIp)).toEqual([
      expect.objectContaining({
        code: 'signature_missing',
        reason: 'signature missing',
        hits: 1,
        requestId: event.requestContext.requestId,
      }),
    ]);
  });

  it('with a Latin-1 pid is stored as rejected under the pid as a recorded hit would read it', async () => {
    const forged = redirectUrl('success')
      .replace(`pid=${ids.pid}`, 'pid=Jos%E9')
      .replace(/sig=[^&]+/, `sig=${'B'.repeat(43)}`);
    await refused(forged);
    expect(await rejectedFrom(sourceIp)).toEqual([expect.objectContaining({ pid: 'Jos%E9' })]);
  });

  it('with a malformed pid answers the plain page, never an error, and stores nothing as an outcome', async () => {
    const url = redirectUrl('success').replace(`pid=${ids.pid}`, 'pid=%3Cscript%3E%00');
    const result = await refused(url);
    expect(result.statusCode).toBe(200);
    expect(result.body).toBe(SURVEY_OVER_PAGE);
    expect(await rejectedFrom(sourceIp)).toEqual([
      expect.objectContaining({
        code: 'bad_request',
        reason: 'pid must not contain NUL or C1 control characters (U+0080-U+009F)',
        pid: '<script>?',
        token: ids.token,
      }),
    ]);
  });

  it('with a pid over the bound is kept apart, its pid clipped to well-formed text', async () => {
    const pid = `a${'👩'.repeat(512)}`;
    const url = redirectUrl('success').replace(`pid=${ids.pid}`, `pid=${encodeURIComponent(pid)}`);
    const result = await refused(url);
    expect(result.statusCode).toBe(200);
    const [rejected] = await rejectedFrom(sourceIp);
    expect(rejected?.reason).toBe('pid must be at most 2048 bytes of UTF-8');
    expect(pid.startsWith(rejected?.pid ?? '-')).toBe(true);
    expect(rejected?.pid).not.toMatch(/\p{Cs}/u);
  });

  it('stores every field of a rejected hit bounded, however long the reason it was refused for', async () => {
    const longSource = `${sourceIp}${'1'.repeat(5000)}`;
    await store.recordRejectedHit({
      at: new Date().toISOString(),
      requestId: 'r'.repeat(5000),
      channel: 'redirect',
      code: 'bad_request',
      reason: `survey id must be digits, not ${'x'.repeat(4045)}`,
      surveyId: 's'.repeat(5000),
      pid: 'p'.repeat(5000),
      token: ids.token,
      sourceIp: longSource,
    });
    const [rejected] = (await store.rejectedHits(new Date().toISOString().slice(0, 10))).filter(
      (hit) => hit.token === ids.token,
    );
    expect(rejected?.reason).toHaveLength(200);
    expect(rejected?.reason.startsWith('survey id must be digits, not x')).toBe(true);
    for (const field of [rejected?.requestId, rejected?.surveyId, rejected?.pid, rejected?.sourceIp])
      expect(field).toHaveLength(100);
    expect(longSource.startsWith(rejected?.sourceIp ?? '-')).toBe(true);
  });

  it('with an unknown outcome answers the plain page', async () => {
    const url = redirectUrl('success').replace('/success?', '/complete?');
    const result = await refused(url);
    expect(result.statusCode).toBe(200);
    expect(result.body).toBe(SURVEY_OVER_PAGE);
    expect(await rejectedFrom(sourceIp)).toEqual([expect.objectContaining({ code: 'bad_request' })]);
  });
});

describe('refused redirect hits are counted per source, code and UTC minute', () => {
  // The middle of a minute, so a slow run cannot split the flood across two, at noon, so the next minute is on the
  // same UTC day whenever the tests run.
  const minute = new Date(`${new Date().toISOString().slice(0, 10)}T12:00:30.000Z`);
  const day = minute.toISOString().slice(0, 10);
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'], now: minute });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const forged = () =>
    filledUrl(TEST_KEY_RING, 'redirect', '2002', 'success', {
      pid: `p-${randomUUID().slice(0, 8)}`,
      token: randomUUID(),
    }).replace(/sig=[^&]+/, `sig=${'C'.repeat(43)}`);

  it('50 forged requests from one source in one minute make one item that counts 50, the first as sample', async () => {
    const sourceIp = freshSource();
    const urls = Array.from({ length: 50 }, forged);
    for (const url of urls) {
      const result = await invoke(redirect, apiEvent('GET', url, { sourceIp }));
      expect(result.statusCode).toBe(302);
    }
    const first = new URL(urls[0] as string).searchParams;
    expect(await rejectedFrom(sourceIp, day)).toEqual([
      expect.objectContaining({
        at: minute.toISOString(),
        code: 'signature_mismatch',
        reason: 'signature mismatch',
        pid: first.get('pid'),
        token: first.get('token'),
        sourceIp,
        hits: 50,
      }),
    ]);
  });

  it('concurrent forged requests from one source count exactly', async () => {
    const sourceIp = freshSource();
    await Promise.all(
      Array.from({ length: 20 }, () => invoke(redirect, apiEvent('GET', forged(), { sourceIp }))),
    );
    expect((await rejectedFrom(sourceIp, day)).map((hit) => hit.hits)).toEqual([20]);
  });

  it('two refusal codes from one source make two items', async () => {
    const sourceIp = freshSource();
    for (let i = 0; i < 3; i++) await invoke(redirect, apiEvent('GET', forged(), { sourceIp }));
    const noPid = forged().replace(/pid=[^&]+&/, '');
    for (let i = 0; i < 2; i++) await invoke(redirect, apiEvent('GET', noPid, { sourceIp }));
    const rejected = await rejectedFrom(sourceIp, day);
    expect(rejected.map((hit) => [hit.code, hit.hits]).sort()).toEqual([
      ['bad_request', 2],
      ['signature_mismatch', 3],
    ]);
    expect(rejected.find((hit) => hit.code === 'bad_request')?.reason).toBe('pid is missing');
  });

  it('another source makes another item', async () => {
    const [one, other] = [freshSource(), freshSource()];
    for (let i = 0; i < 4; i++) await invoke(redirect, apiEvent('GET', forged(), { sourceIp: one }));
    await invoke(redirect, apiEvent('GET', forged(), { sourceIp: other }));
    expect((await rejectedFrom(one, day)).map((hit) => hit.hits)).toEqual([4]);
    expect((await rejectedFrom(other, day)).map((hit) => hit.hits)).toEqual([1]);
  });

  it('the next minute makes another item', async () => {
    const sourceIp = freshSource();
    await invoke(redirect, apiEvent('GET', forged(), { sourceIp }));
    vi.setSystemTime(new Date(minute.getTime() + 60_000));
    await invoke(redirect, apiEvent('GET', forged(), { sourceIp }));
    await invoke(redirect, apiEvent('GET', forged(), { sourceIp }));
    expect((await rejectedFrom(sourceIp, day)).map((hit) => [hit.at, hit.hits])).toEqual([
      [minute.toISOString(), 1],
      [new Date(minute.getTime() + 60_000).toISOString(), 2],
    ]);
  });
});

describe('rejected hits stored before they were counted', () => {
  it('are still read, one hit each, among the counted ones', async () => {
    const sourceIp = freshSource();
    const day = '2024-05-06';
    const client = createDocumentClient({ endpoint: table.endpoint });
    // The previous shape: one item per request, keyed by its time and request id, no code, no counter.
    for (const [at, requestId] of [
      ['2024-05-06T10:00:01.000Z', 'req-old-1'],
      ['2024-05-06T10:00:02.000Z', 'req-old-2'],
    ] as const)
      await client.send(
        new PutCommand({
          TableName: table.tableName,
          Item: {
            pk: `REJECTED#${day}`,
            sk: `${at}#${requestId}`,
            kind: 'rejected',
            at,
            requestId,
            channel: 'redirect',
            reason: 'signature mismatch',
            surveyId: '2002',
            outcome: 'success',
            pid: 'p-old',
            token: 't-old',
            sourceIp,
            expiresAt: Math.floor(Date.parse(at) / 1000) + 90 * 86_400,
          },
        }),
      );
    await store.recordRejectedHit({
      at: '2024-05-06T10:00:03.000Z',
      requestId: 'req-new',
      channel: 'redirect',
      code: 'signature_mismatch',
      reason: 'signature mismatch',
      sourceIp,
    });
    expect(await rejectedFrom(sourceIp, day)).toEqual([
      expect.objectContaining({
        at: '2024-05-06T10:00:01.000Z',
        requestId: 'req-old-1',
        hits: 1,
        pid: 'p-old',
      }),
      expect.objectContaining({ at: '2024-05-06T10:00:02.000Z', requestId: 'req-old-2', hits: 1 }),
      expect.objectContaining({ at: '2024-05-06T10:00:03.000Z', code: 'signature_mismatch', hits: 1 }),
    ]);
    const [old] = await rejectedFrom(sourceIp, day);
    expect(old?.code).toBeUndefined();
  });
});
