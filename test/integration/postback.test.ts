/**
 * The postback handler against the real DynamoDB protocol (embedded engine behind a recording proxy).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createDocumentClient,
  createLedgerStore,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { apiEvent, filledUrl, type Handler, invoke, jsonBody } from '../support/api-events';
import { type EngineProxy, startEngineProxy } from '../support/engine-proxy';
import { receivers } from '../support/handlers';
import { freshTable, TEST_KEY_RING } from '../support/ledger';

let handler: Handler;
let store: LedgerStore;
let proxy: EngineProxy;
let tableName: string;

beforeAll(async () => {
  const table = await freshTable();
  const { endpoint } = table;
  tableName = table.tableName;
  proxy = await startEngineProxy(endpoint);
  ({ postback: handler } = await receivers({ endpoint: proxy.endpoint, tableName }));
  store = createLedgerStore(createDocumentClient({ endpoint }), tableName);
});

afterAll(() => proxy.stop());

let ids: { pid: string; token: string };
beforeEach(() => {
  ids = { pid: `p-${randomUUID().slice(0, 8)}`, token: randomUUID() };
});

const successUrl = () => filledUrl(TEST_KEY_RING, 'postback', '1001', 'success', ids);
const failUrl = () => filledUrl(TEST_KEY_RING, 'postback', '1001', 'fail', ids);
const only = async () => {
  const attempts = await store.attemptsOf('1001', ids.pid);
  expect(attempts).toHaveLength(1);
  return attempts[0] as NonNullable<(typeof attempts)[0]>;
};

describe('a signed postback', () => {
  it.each([
    'dGVzdC0x+/Q==',
    'a@b.com',
    '12345|x',
    'user 1',
    'a#b%23',
    'ユーザー①',
    // What a panel's CSV import leaves in its ids comes back in the postback: refused, the postback would be lost.
    'p-17\r',
    'tab\there',
    // None: a panel whose entry link carried no id gets its postbacks with `pid=` (the token names the attempt).
    '',
    // A signed or encrypted id (a JWT): hundreds of bytes, well past the 64 that keep an attempt in one write unit.
    `eyJhbGciOiJIUzI1NiJ9.${'eyJzdWIiOiJyZXNwb25kZW50In0'.repeat(50)}.c2lnbmF0dXJl`,
  ])('with the supplier pid %j is recorded and found by that pid', async (pid) => {
    ids = { pid, token: randomUUID() };
    const result = await invoke(handler, apiEvent('GET', successUrl()));
    expect(result.statusCode).toBe(200);
    expect(await only()).toMatchObject({ pid, token: ids.token, complete: 'postback-confirmed' });
  });

  it('with a pid a Latin-1 panel sent (a byte that is not UTF-8) is recorded under it, its stray byte kept escaped', async () => {
    ids = { pid: 'placeholder', token: randomUUID() };
    const url = successUrl().replace('pid=placeholder', 'pid=Jos%E9');
    const result = await invoke(handler, apiEvent('GET', url));
    expect(result.statusCode).toBe(200);
    ids = { ...ids, pid: 'Jos%E9' };
    expect(await only()).toMatchObject({ pid: 'Jos%E9', complete: 'postback-confirmed' });
  });

  it('over GET is stored as a postback-confirmed complete and answered 200 once stored', async () => {
    const result = await invoke(handler, apiEvent('GET', successUrl()));
    expect(result.statusCode).toBe(200);
    expect(jsonBody(result)).toEqual({ ok: true, effect: 'recorded', outcome: 'success' });
    const attempt = await only();
    expect(attempt).toMatchObject({
      surveyId: '1001',
      pid: ids.pid,
      token: ids.token,
      complete: 'postback-confirmed',
      conflict: false,
      postback: { outcome: 'success', hits: 1, source: 'query' },
    });
    expect(attempt.redirect).toBeUndefined();
  });

  it.each([
    ['a JSON body', 'application/json', (i: typeof ids) => JSON.stringify(i), 'json'],
    [
      'a form body',
      'application/x-www-form-urlencoded',
      (i: typeof ids) => new URLSearchParams(i).toString(),
      'form',
    ],
    // The postback body's format is undocumented: a sender may label every request application/json, or send
    // JSON as text; the body's evident form is read when it is not of the type declared.
    [
      'a form body labelled application/json',
      'application/json',
      (i: typeof ids) => new URLSearchParams(i).toString(),
      'form',
    ],
    [
      'a JSON body labelled text/plain',
      'text/plain;charset=UTF-8',
      (i: typeof ids) => JSON.stringify(i),
      'json',
    ],
    [
      'a JSON body labelled form-encoded',
      'application/x-www-form-urlencoded',
      (i: typeof ids) => JSON.stringify(i),
      'json',
    ],
    [
      'a form body after a byte-order mark',
      'application/x-www-form-urlencoded',
      (i: typeof ids) => `\uFEFF${new URLSearchParams(i).toString()}`,
      'form',
    ],
  ])('over POST with %s is stored', async (_, contentType, body, source) => {
    const url = new URL(successUrl());
    url.searchParams.delete('pid');
    url.searchParams.delete('token');
    const result = await invoke(
      handler,
      apiEvent('POST', url.toString(), { body: body(ids), headers: { 'content-type': contentType } }),
    );
    expect(result.statusCode).toBe(200);
    expect((await only()).postback).toMatchObject({ outcome: 'success', source });
  });

  it('configured at the marketplace HTML-escaped (`&amp;` between parameters) is still recorded', async () => {
    const escaped = successUrl().replaceAll('&', '&amp;');
    const result = await invoke(handler, apiEvent('GET', escaped));
    expect(result.statusCode).toBe(200);
    expect(await only()).toMatchObject({ pid: ids.pid, complete: 'postback-confirmed' });
  });

  it('over POST with the values in the query and an empty body is stored', async () => {
    const result = await invoke(
      handler,
      apiEvent('POST', failUrl(), { headers: { 'content-type': 'application/json' } }),
    );
    expect(result.statusCode).toBe(200);
    expect((await only()).postback).toMatchObject({ outcome: 'fail', source: 'query' });
  });

  it('repeated changes nothing but the counters and the last-seen time', async () => {
    await invoke(handler, apiEvent('GET', successUrl()));
    const before = await only();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const again = await invoke(handler, apiEvent('GET', successUrl()));
    expect(jsonBody(again)).toMatchObject({ effect: 'duplicate' });
    const after = await only();
    expect((after.lastSeenAt ?? '') > (before.lastSeenAt ?? '~')).toBe(true);
    expect(after.postback?.hits).toBe(2);
    const strip = (a: typeof before) => ({
      ...a,
      lastSeenAt: '',
      postback: { ...a.postback, hits: 0, sightings: [] },
    });
    expect(strip(after)).toEqual(strip(before));
  });

  it('contradicting the standing outcome is kept as a conflict, never overwriting it', async () => {
    await invoke(handler, apiEvent('GET', successUrl()));
    const contradiction = await invoke(handler, apiEvent('GET', failUrl()));
    expect(contradiction.statusCode).toBe(200);
    expect(jsonBody(contradiction)).toEqual({ ok: true, effect: 'conflict', outcome: 'success' });
    const attempt = await only();
    expect(attempt.postback).toMatchObject({ outcome: 'success', hits: 2, conflict: true });
    expect(attempt.postback?.sightings.map((s) => [s.outcome, s.hits])).toEqual([
      ['success', 1],
      ['fail', 1],
    ]);
    expect(attempt).toMatchObject({ complete: 'postback-confirmed', conflict: true });
  });

  it('costs exactly one write request and no read', async () => {
    const start = proxy.operations.length;
    await invoke(handler, apiEvent('GET', successUrl()));
    await invoke(handler, apiEvent('GET', successUrl()));
    await invoke(handler, apiEvent('GET', failUrl()));
    expect(proxy.operations.slice(start)).toEqual(['UpdateItem', 'UpdateItem', 'UpdateItem']);
  });
});

describe('concurrent postbacks', () => {
  it('many identical hits at once give exact counts and exactly one first record', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, () => invoke(handler, apiEvent('GET', successUrl()))),
    );
    const effects = results.map((r) => jsonBody(r).effect);
    expect(effects.filter((e) => e === 'recorded')).toHaveLength(1);
    expect(effects.filter((e) => e === 'duplicate')).toHaveLength(39);
    expect((await only()).postback?.hits).toBe(40);
  });

  it('success and fail racing: the first made stands, the other is the conflict, counts exact', async () => {
    const urls = Array.from({ length: 30 }, (_, i) => (i % 2 ? failUrl() : successUrl()));
    const results = await Promise.all(urls.map((url) => invoke(handler, apiEvent('GET', url))));
    const attempt = await only();
    const standing = attempt.postback?.outcome;
    // Whichever write landed first: the outcome first made (its sighting's time; in one millisecond, by name).
    const [first] = [...(attempt.postback?.sightings ?? [])].sort(
      (a, b) => a.firstAt.localeCompare(b.firstAt) || a.outcome.localeCompare(b.outcome),
    );
    expect(standing).toBe(first?.outcome);
    expect(attempt.postback?.sightings.map((s) => s.hits).sort()).toEqual([15, 15]);
    // Every answer names one of the two and is 200; those answered before an earlier-made hit settled (its write
    // overtaken by the other's) name the outcome that stood then. The other outcome is a conflict.
    expect(results.every((r) => r.statusCode === 200)).toBe(true);
    expect(results.every((r) => ['success', 'fail'].includes(String(jsonBody(r).outcome)))).toBe(true);
    expect(attempt.conflict).toBe(true);
    expect(results.some((r) => jsonBody(r).effect === 'conflict')).toBe(true);
  });
});

describe('a refused postback stores no attempt, only its refusal count', () => {
  const tamper = (url: string, name: string, value: string | null) => {
    const parsed = new URL(url);
    if (value === null) parsed.searchParams.delete(name);
    else parsed.searchParams.set(name, value);
    return parsed.toString();
  };

  it.each([
    ['no signature', (u: string) => tamper(u, 'sig', null), 'signature is missing (sig not in the query)'],
    ['no key id', (u: string) => tamper(u, 'kid', null), 'signature is missing (kid not in the query)'],
    [
      'the key id named in upper case',
      (u: string) => u.replace('kid=', 'KID='),
      'signature is missing (kid not in the query): the query has KID, and parameter names are lower-case',
    ],
    [
      'parameters separated by semicolons',
      (u: string) => u.replace(/&/g, ';'),
      'signature is missing (kid and sig not in the query): parameters are separated by &, not ;',
    ],
    ['a wrong signature', (u: string) => tamper(u, 'sig', 'A'.repeat(43)), 'signature is not valid'],
    ['an unknown key id', (u: string) => tamper(u, 'kid', 'k9'), 'signature is not valid'],
    ['another key id', (u: string) => tamper(u, 'kid', 'k1'), 'signature is not valid'],
    [
      'the signature of another survey',
      (u: string) => u.replace('/1001/', '/1002/'),
      'signature is not valid',
    ],
    [
      'the signature of the other outcome',
      (u: string) => u.replace('/success?', '/fail?'),
      'signature is not valid',
    ],
  ])('with %s: 403', async (_, forge, message) => {
    const start = proxy.operations.length;
    const result = await invoke(handler, apiEvent('GET', forge(successUrl())));
    expect(result.statusCode).toBe(403);
    expect(jsonBody(result)).toEqual({ error: 'forbidden', message });
    expect(proxy.operations.slice(start)).toEqual(['UpdateItem']);
    expect(await store.attemptsOf(url1002(forge) ? '1002' : '1001', ids.pid)).toEqual([]);
  });

  it('with the redirect signature of the same survey and outcome: 403', async () => {
    const redirect = new URL(filledUrl(TEST_KEY_RING, 'redirect', '1001', 'success', ids));
    const result = await invoke(
      handler,
      apiEvent('GET', redirect.toString().replace('/redirect/', '/postback/')),
    );
    expect(result.statusCode).toBe(403);
    expect(await store.attemptsOf('1001', ids.pid)).toEqual([]);
  });

  it.each([
    ['a missing pid', (u: string) => tamper(u, 'pid', null), 400, 'pid is missing'],
    [
      'a token with a NUL',
      (u: string) => tamper(u, 'token', 'a\u0000b'),
      400,
      'token must not contain NUL or C1 control characters (U+0080-U+009F)',
    ],
    [
      'a pid with a C1 control (a Windows-1252 character read as Latin-1)',
      (u: string) => tamper(u, 'pid', 'Price\u0080'),
      400,
      'pid must not contain NUL or C1 control characters (U+0080-U+009F)',
    ],
    [
      'a pid over the byte bound',
      (u: string) => tamper(u, 'pid', 'é'.repeat(1025)),
      400,
      'pid must be at most 2048 bytes of UTF-8',
    ],
    [
      'an unsubstituted placeholder',
      (u: string) => tamper(u, 'token', '[%%token%%]'),
      400,
      'token is an unsubstituted placeholder',
    ],
    [
      'a conflicting duplicate pid',
      (u: string) => `${u}&pid=someone-else`,
      400,
      'pid is given twice with different values (query)',
    ],
  ])('with %s: 4xx naming the problem', async (_, forge, status, message) => {
    const start = proxy.operations.length;
    const result = await invoke(handler, apiEvent('GET', forge(successUrl())));
    expect(result.statusCode).toBe(status);
    expect(jsonBody(result)).toEqual({ error: 'bad_request', message });
    expect(proxy.operations.slice(start)).toEqual(['UpdateItem']);
  });

  it('with an unknown outcome or malformed survey id: 400', async () => {
    for (const url of [
      successUrl().replace('/success?', '/overquota?'),
      successUrl().replace('/1001/', '/10x1/'),
    ]) {
      const result = await invoke(handler, apiEvent('GET', url));
      expect(result.statusCode).toBe(400);
      expect(jsonBody(result).error).toBe('bad_request');
    }
  });

  it('with a body it cannot read: 415 when the ids must come from it, and 413 when oversized', async () => {
    const withoutToken = new URL(successUrl());
    withoutToken.searchParams.delete('token');
    const xml = await invoke(
      handler,
      apiEvent('POST', withoutToken.toString(), {
        body: '<x/>',
        headers: { 'content-type': 'application/xml' },
      }),
    );
    expect(xml.statusCode).toBe(415);
    const big = await invoke(
      handler,
      apiEvent('POST', withoutToken.toString(), {
        body: `{"x":"${'y'.repeat(9000)}"}`,
        headers: { 'content-type': 'application/json' },
      }),
    );
    expect(big.statusCode).toBe(413);
    expect(await store.attemptsOf('1001', ids.pid)).toEqual([]);
  });

  it('with an oversized body but both ids in the signed query: recorded from the query', async () => {
    const result = await invoke(
      handler,
      apiEvent('POST', successUrl(), {
        body: `{"x":"${'y'.repeat(9000)}"}`,
        headers: { 'content-type': 'application/json' },
      }),
    );
    expect(result.statusCode).toBe(200);
    expect((await only()).postback).toMatchObject({ outcome: 'success', source: 'query' });
  });

  it('with a body it cannot read but both ids in the signed query: recorded from the query', async () => {
    const result = await invoke(
      handler,
      apiEvent('POST', successUrl(), { body: '<x/>', headers: { 'content-type': 'application/xml' } }),
    );
    expect(result.statusCode).toBe(200);
    expect((await only()).postback).toMatchObject({ outcome: 'success', source: 'query' });
  });

  it('with a Latin-1 form body its content type declares, ids only in the body: recorded as the body spells them', async () => {
    const bare = new URL(successUrl());
    bare.searchParams.delete('pid');
    bare.searchParams.delete('token');
    ids = { pid: 'Jos\u00e9', token: randomUUID() };
    // A form body reaches the function base64 (API Gateway passes only text types as text): its bytes intact.
    const event = apiEvent('POST', bare.toString(), {
      body: Buffer.from(`pid=Jos\u00e9&token=${ids.token}`, 'latin1'),
      headers: { 'content-type': 'application/x-www-form-urlencoded; charset=ISO-8859-1' },
    });
    expect(event.isBase64Encoded).toBe(true);
    const result = await invoke(handler, event);
    expect(result.statusCode).toBe(200);
    expect(await only()).toMatchObject({ pid: 'José', complete: 'postback-confirmed' });
  });

  it('with a Windows-1252 form body its content type declares, ids only in the body: recorded with its letters, not refused as controls', async () => {
    const bare = new URL(successUrl());
    bare.searchParams.delete('pid');
    bare.searchParams.delete('token');
    ids = { pid: 'Du\u0161an \u20ac\u0152', token: randomUUID() };
    // `Dušan €Œ`: 0x9A, 0x80 and 0x8C are letters in Windows-1252, controls in ISO-8859-1.
    const event = apiEvent('POST', bare.toString(), {
      body: Buffer.concat([
        Buffer.from('pid=Du'),
        Buffer.from([0x9a]),
        Buffer.from('an '),
        Buffer.from([0x80, 0x8c]),
        Buffer.from(`&token=${ids.token}`),
      ]),
      headers: { 'content-type': 'application/x-www-form-urlencoded; charset=windows-1252' },
    });
    const result = await invoke(handler, event);
    expect(result.statusCode).toBe(200);
    expect(await only()).toMatchObject({ pid: 'Dušan €Œ', complete: 'postback-confirmed' });
  });

  it('with a Latin-1 JSON body, ids only in the body: 400, nothing stored (its bytes arrive replaced, two pids one)', async () => {
    const bare = new URL(successUrl());
    bare.searchParams.delete('pid');
    bare.searchParams.delete('token');
    ids = { pid: 'Jos\u00e8', token: randomUUID() };
    // JSON is a text type: API Gateway hands it over as text, the byte 0xE9 replaced by U+FFFD.
    const event = apiEvent('POST', bare.toString(), {
      body: Buffer.from(JSON.stringify(ids), 'latin1'),
      headers: { 'content-type': 'application/json; charset=ISO-8859-1' },
    });
    expect(event).toMatchObject({ isBase64Encoded: false, body: expect.stringContaining('Jos\uFFFD') });
    const result = await invoke(handler, event);
    expect(result.statusCode).toBe(400);
    expect(jsonBody(result)).toMatchObject({ message: 'pid in the body is not well-formed UTF-8' });
    expect(await store.attemptsOf('1001', ids.pid)).toEqual([]);
    expect(await store.attemptsOf('1001', 'Jos\uFFFD')).toEqual([]);
  });

  it('with a Latin-1 JSON body whose ids read whole (another field does not): recorded', async () => {
    const bare = new URL(successUrl());
    bare.searchParams.delete('pid');
    bare.searchParams.delete('token');
    const event = apiEvent('POST', bare.toString(), {
      body: Buffer.from(JSON.stringify({ ...ids, name: 'Ren\u00e9e' }), 'latin1'),
      headers: { 'content-type': 'application/json; charset=ISO-8859-1' },
    });
    const result = await invoke(handler, event);
    expect(result.statusCode).toBe(200);
    expect(await only()).toMatchObject({ complete: 'postback-confirmed' });
  });

  it('with parameters its sender appended after the signature with a second `?`: recorded', async () => {
    const result = await invoke(handler, apiEvent('GET', `${successUrl()}?status=Completed&cpi=1.25`));
    expect(result.statusCode).toBe(200);
    expect(await only()).toMatchObject({ complete: 'postback-confirmed' });
  });

  it.each([
    ['a sig of its own', '&sig=Zm9vYmFy'],
    ['an empty sig', '&sig='],
    ['a kid of its own', '&kid=mk1'],
    ['both, with a hash', '&kid=mk1&sig=Zm9vYmFy&hash=abc'],
  ])('with %s its sender appended after the signature: recorded', async (_, appended) => {
    const result = await invoke(handler, apiEvent('GET', `${successUrl()}${appended}`));
    expect(result.statusCode).toBe(200);
    expect(await only()).toMatchObject({ complete: 'postback-confirmed' });
  });

  it('with signatures appended, none of them genuine: 403, nothing stored', async () => {
    const forged = successUrl().replace(/sig=[^&]*/, 'sig=Zm9vYmFy');
    const result = await invoke(handler, apiEvent('GET', `${forged}&sig=YmFyYmF6&kid=other`));
    expect(result.statusCode).toBe(403);
    expect(await store.attemptsOf('1001', ids.pid)).toEqual([]);
  });

  it('with the pid left as the placeholder: recorded by its token under the empty pid', async () => {
    const url = filledUrl(TEST_KEY_RING, 'postback', '1001', 'success', {
      pid: '[%%pid%%]',
      token: ids.token,
    });
    const result = await invoke(handler, apiEvent('GET', url));
    expect(result.statusCode).toBe(200);
    const recorded = (await store.attemptsOf('1001', '')).filter((a) => a.token === ids.token);
    expect(recorded).toEqual([expect.objectContaining({ pid: '', complete: 'postback-confirmed' })]);
  });

  it('with body bytes that are not UTF-8 and ids only in the body: 400, nothing stored', async () => {
    const bare = new URL(successUrl());
    bare.searchParams.delete('pid');
    bare.searchParams.delete('token');
    const event = apiEvent('POST', bare.toString(), {
      body: Buffer.from([...Buffer.from(`pid=${ids.pid}&token=`), 0xff, 0xfe]),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(event.isBase64Encoded).toBe(true);
    const result = await invoke(handler, event);
    expect(result.statusCode).toBe(400);
    expect(JSON.parse(result.body ?? '{}')).toMatchObject({ message: 'body is not well-formed UTF-8' });
    expect(await store.attemptsOf('1001', ids.pid)).toEqual([]);
  });
});

function url1002(forge: (u: string) => string): boolean {
  return forge('https://x/postback/1001/success?').includes('/1002/');
}

describe('refused postbacks are counted per source, code, claimed survey and UTC minute', () => {
  // The middle of a minute, so a slow run cannot split the flood across two.
  const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 30_000);
  const retiredRing = JSON.stringify({
    ...JSON.parse(TEST_KEY_RING),
    retire: { k1: '2020-01-01T00:00:00Z' },
  });
  let retiring: Handler;
  beforeAll(async () => {
    ({ postback: retiring } = await receivers({
      endpoint: proxy.endpoint,
      tableName,
      keyRing: retiredRing,
    }));
  });
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'], now: minute });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const source = () => `192.0.2.${Math.floor(Math.random() * 250) + 1}-${randomUUID().slice(0, 4)}`;
  const oldKeyUrl = (surveyId: string) =>
    filledUrl(
      TEST_KEY_RING,
      'postback',
      surveyId,
      'success',
      { pid: `p-${randomUUID()}`, token: randomUUID() },
      'k1',
    );
  const refusedFrom = async (sourceIp: string) =>
    (await store.rejectedHitsBetween(minute, new Date(minute.getTime() + 60_000))).filter(
      (hit) => hit.sourceIp === sourceIp,
    );

  it('a flood of postbacks signed with a retired key from one source in one minute makes one item', async () => {
    const sourceIp = source();
    const start = proxy.operations.length;
    for (let i = 0; i < 30; i++) {
      const result = await invoke(retiring, apiEvent('GET', oldKeyUrl('1001'), { sourceIp }));
      expect(result.statusCode).toBe(403);
    }
    // One write per refusal, never a read.
    expect(proxy.operations.slice(start)).toEqual(Array(30).fill('UpdateItem'));
    expect(await refusedFrom(sourceIp)).toEqual([
      expect.objectContaining({
        channel: 'postback',
        code: 'signature_retired_key',
        surveyId: '1001',
        outcome: 'success',
        at: minute.toISOString(),
        hits: 30,
      }),
    ]);
  });

  it("the minute's sample is its first hit's alone: a later hit does not fill in what the first one lacked", async () => {
    const sourceIp = source();
    const url = successUrl();
    const unreadable = await invoke(
      handler,
      apiEvent('POST', url.replace(/pid=[^&]*&token=[^&]*&/, ''), {
        sourceIp,
        body: '{"pid":',
        headers: { 'content-type': 'application/json' },
      }),
    );
    expect(unreadable.statusCode).toBe(400);
    // Signed too, and refused for what its body carries (its token left the placeholder), with a pid.
    const placeholder = await invoke(
      handler,
      apiEvent('POST', url.replace(/pid=[^&]*&token=[^&]*&/, ''), {
        sourceIp,
        body: '{"pid":"innocent-bystander","token":"[%%token%%]"}',
        headers: { 'content-type': 'application/json' },
      }),
    );
    expect(placeholder.statusCode).toBe(400);
    const [sample] = await refusedFrom(sourceIp);
    expect(sample).toMatchObject({ hits: 2, reason: expect.stringMatching(/not valid JSON/) });
    expect(sample?.pid).toBeUndefined();
    expect(sample?.token).toBeUndefined();
  });

  it("names API Gateway's id for the request in its refusal record", async () => {
    const sourceIp = source();
    const event = apiEvent('GET', successUrl().replace(/sig=[^&]+/, `sig=${'B'.repeat(43)}`), { sourceIp });
    expect((await invoke(handler, event)).statusCode).toBe(403);
    expect((await refusedFrom(sourceIp))[0]).toMatchObject({ requestId: event.requestContext.requestId });
  });

  it('a signature quoted in a refused identifier (separators sent encoded) is stored concealed', async () => {
    const sourceIp = source();
    const genuine = new URL(successUrl());
    const sig = genuine.searchParams.get('sig') as string;
    // The whole query as one pid: `&` and `=` percent-encoded by a sender that encodes twice.
    const oneParameter = `${genuine.origin}${genuine.pathname}?pid=${encodeURIComponent(
      `${ids.pid}&token=${ids.token}&kid=${genuine.searchParams.get('kid')}&sig=${sig}`,
    )}`;
    const result = await invoke(handler, apiEvent('GET', oneParameter, { sourceIp }));
    expect(result.statusCode).toBe(403);
    const [sample] = await refusedFrom(sourceIp);
    expect(sample?.pid).toBe(
      `${ids.pid}&token=${ids.token}&kid=${genuine.searchParams.get('kid')}&sig=[concealed]`,
    );
    expect(JSON.stringify(sample)).not.toContain(sig.slice(0, 12));
  });

  it('another claimed survey makes another item, so refusals count per survey', async () => {
    const sourceIp = source();
    for (let i = 0; i < 3; i++) await invoke(retiring, apiEvent('GET', oldKeyUrl('1001'), { sourceIp }));
    await invoke(retiring, apiEvent('GET', oldKeyUrl('1002'), { sourceIp }));
    const counts = (await refusedFrom(sourceIp)).map((hit) => [hit.surveyId, hit.hits]).sort();
    expect(counts).toEqual([
      ['1001', 3],
      ['1002', 1],
    ]);
  });

  it('a malformed survey id is counted apart from every survey', async () => {
    const sourceIp = source();
    await invoke(handler, apiEvent('GET', successUrl().replace('/1001/', '/10x1/'), { sourceIp }));
    const [refused] = await refusedFrom(sourceIp);
    expect(refused).toMatchObject({ code: 'bad_request', surveyId: '10x1', hits: 1 });
  });
});
