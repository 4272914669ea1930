/**
 * Fuzzing the receivers with fast-check over paths, query strings, headers and bodies: never a 5xx, every
 * refusal a clear 4xx JSON error (postbacks) or the respondent's page (redirects), and nothing stored from input
 * that is not valid.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LedgerStore } from '../../functions/ledger/ledger-store';
import { identifierProblem, isBlank, isPlaceholder } from '../../functions/receiving/identifiers';
import { buildEvent, type RouteMatch } from '../../infra/local/api-gateway';
import { ROUTES } from '../../infra/routes';
import { filledUrl, type Handler, invoke } from '../support/api-events';
import { type EngineProxy, startEngineProxy } from '../support/engine-proxy';
import { receivers } from '../support/handlers';
import { freshTable, TEST_KEY_RING } from '../support/ledger';

let postback: Handler;
let redirect: Handler;
let store: LedgerStore;
let proxy: EngineProxy;
const RUNS = Number(process.env.FUZZ_RUNS ?? 300);

beforeAll(async () => {
  const { endpoint, tableName } = await freshTable();
  proxy = await startEngineProxy(endpoint);
  ({ postback, redirect, store } = await receivers({ endpoint: proxy.endpoint, tableName }));
});
afterAll(() => proxy.stop());

const route = (method: 'GET' | 'POST', channel: 'postback' | 'redirect') =>
  ROUTES.find((r) => r.method === method && r.path.startsWith(`/${channel}/`)) as RouteMatch['route'];

/** Anything a sender could put in a URL component, including the characters that break naive parsers. */
const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.constantFrom(
    '',
    '1001',
    '[%%pid%%]',
    '[%%token%%]',
    '%',
    '%ZZ',
    '../',
    'success',
    'fail',
    'k1',
    'A'.repeat(43),
    '0'.repeat(13),
  ),
);
const query = fc.array(fc.tuple(fc.constantFrom('pid', 'token', 'kid', 'sig', 'PID', 'x', ''), text), {
  maxLength: 8,
});
const encode = (pairs: [string, string][]) =>
  pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
const body = fc.oneof(
  fc.constant(''),
  text,
  fc.json({ maxDepth: 3 }),
  fc
    .dictionary(
      fc.constantFrom('pid', 'PID', 'token', 'Token'),
      fc.oneof(text, fc.integer(), fc.boolean(), fc.constant(null)),
    )
    .map((o) => JSON.stringify(o)),
  fc.string({ minLength: 8100, maxLength: 9000 }),
);
const contentType = fc.constantFrom(
  undefined,
  'application/json',
  'application/x-www-form-urlencoded',
  'text/plain',
  'application/xml',
  'application/json; charset=utf-8',
  'multipart/form-data; boundary=x',
);

function event(
  method: 'GET' | 'POST',
  channel: 'postback' | 'redirect',
  surveyId: string,
  outcome: string,
  rawQuery: string,
  payload: string,
  type?: string,
) {
  const r = route(method, channel);
  const url = new URL(
    `https://hits.test/${channel}/${encodeURIComponent(surveyId)}/${encodeURIComponent(outcome)}?${rawQuery}`,
  );
  return buildEvent(
    {
      url,
      headers: { host: 'hits.test', ...(type ? { 'content-type': type } : {}) },
      body: Buffer.from(payload),
      sourceIp: '198.51.100.9',
    },
    { route: r, pathParameters: { surveyId, outcome } },
  );
}

describe('fuzzed postbacks', () => {
  it('never answer 5xx, answer every refusal with a 4xx JSON error, and store nothing unsigned but its refusal count', async () => {
    const writesBefore = proxy.operations.filter((op) => op === 'UpdateItem').length;
    const started = new Date();
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST'),
        text,
        text,
        query,
        body,
        contentType,
        async (method, surveyId, outcome, pairs, payload, type) => {
          const result = await invoke(
            postback,
            event(
              method as 'GET' | 'POST',
              'postback',
              surveyId,
              outcome,
              encode(pairs),
              method === 'POST' ? payload : '',
              type,
            ),
          );
          expect(result.statusCode).toBeGreaterThanOrEqual(400);
          expect(result.statusCode).toBeLessThan(500);
          const answer = JSON.parse(String(result.body)) as { error: string; message: string };
          expect(answer.error).toMatch(/^[a-z_]+$/);
          expect(answer.message.length).toBeGreaterThan(0);
          expect(String(result.body)).not.toMatch(/at .*\.ts:\d+|Error:|stack/i);
          refused++;
        },
      ),
      { numRuns: RUNS },
    );
    // One write per refusal, and each of them counted a refusal: none made an attempt.
    expect(proxy.operations.filter((op) => op === 'UpdateItem').length - writesBefore).toBe(refused);
    const counted = (await store.rejectedHitsBetween(started, new Date(Date.now() + 60_000)))
      .filter((hit) => hit.channel === 'postback')
      .reduce((sum, hit) => sum + hit.hits, 0);
    expect(counted).toBe(refused);
  });

  it('with a valid signature and fuzzed identifiers and bodies: stored only when the identifiers are valid', async () => {
    const signed = new URL(filledUrl(TEST_KEY_RING, 'postback', '4242', 'success', { pid: 'x', token: 'y' }));
    const kid = signed.searchParams.get('kid') ?? '';
    const sig = signed.searchParams.get('sig') ?? '';
    await fc.assert(
      fc.asyncProperty(text, text, body, contentType, async (pid, token, payload, type) => {
        const rawQuery = encode([
          ['pid', pid],
          ['token', token],
          ['kid', kid],
          ['sig', sig],
        ]);
        const result = await invoke(
          postback,
          event('POST', 'postback', '4242', 'success', rawQuery, payload, type),
        );
        expect(result.statusCode).toBeLessThan(500);
        if (result.statusCode === 200) {
          // Each id from the query is valid, or the query said nothing and the body (checked alike) gave it; a pid
          // given empty is one (a panel's entry link that carried none), and so is one left the placeholder.
          for (const [field, value] of [
            ['pid', pid],
            ['token', token],
          ] as const) {
            if (field === 'pid' && (value === '' || isPlaceholder(value))) continue;
            if (isBlank(value)) expect(payload.trim()).not.toBe('');
            else expect(identifierProblem(field, value)).toBeUndefined();
          }
        } else {
          expect([400, 413, 415]).toContain(result.statusCode);
        }
      }),
      { numRuns: RUNS },
    );
  });
});

describe('fuzzed redirects', () => {
  it('always send the respondent on: a redirect or the plain page, never an error or JSON', async () => {
    await fc.assert(
      fc.asyncProperty(text, text, query, async (surveyId, outcome, pairs) => {
        const result = await invoke(redirect, event('GET', 'redirect', surveyId, outcome, encode(pairs), ''));
        expect([200, 302]).toContain(result.statusCode);
        if (result.statusCode === 200) {
          expect(result.headers?.['content-type']).toBe('text/html; charset=utf-8');
          expect(String(result.body)).toContain('This survey is over');
        }
      }),
      { numRuns: RUNS },
    );
  });
});
