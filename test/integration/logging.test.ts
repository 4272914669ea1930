/**
 * Refusals are logged and counted; nothing secret ever reaches a log line or a metric: not the key ring, not a
 * presented signature, not the query string.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { inCatalogue } from '../../functions/runtime/metric-catalogue';
import { apiEvent, filledUrl, type Handler, invoke } from '../support/api-events';
import { TEST_KEY_RING } from '../support/ledger';

let postback: Handler;
let redirect: Handler;
let logger: typeof import('../../functions/runtime/observability')['logger'];
let written: string[] = [];

beforeAll(async () => {
  // Powertools reads its own settings when the logger and metrics are created, so they are set before the
  // handlers' modules load; the handlers themselves are built from their dependencies.
  // Powertools' switch to log every event, as an operator may turn it on: the handlers never log theirs (the
  // event's query parameters hold the signature by name).
  Object.assign(process.env, {
    POWERTOOLS_LOG_LEVEL: 'DEBUG',
    POWERTOOLS_METRICS_DISABLED: 'false',
    POWERTOOLS_LOGGER_LOG_EVENT: 'true',
  });
  const { receivers } = await import('../support/handlers');
  ({ postback, redirect } = await receivers());
  ({ logger } = await import('../../functions/runtime/observability'));
});

function capture() {
  written = [];
  const record = (chunk: unknown) => {
    written.push(String(chunk));
    return true;
  };
  vi.spyOn(process.stdout, 'write').mockImplementation(record);
  vi.spyOn(process.stderr, 'write').mockImplementation(record);
}
afterEach(() => vi.restoreAllMocks());

const secrets = Object.entries(JSON.parse(TEST_KEY_RING) as Record<string, string>)
  .filter(([name]) => name !== 'current')
  .map(([, secret]) => secret);

/** The first line written since `capture()` that holds `marker` ('' when none). */
const loggedLine = (marker: string) =>
  written
    .join('')
    .split('\n')
    .find((l) => l.includes(marker)) ?? '';

describe('logs and metrics', () => {
  it('a forged postback is logged with its reason and counted, without the signature or any key', async () => {
    const ids = { pid: 'p-log', token: randomUUID() };
    const forgedSig = 'Q'.repeat(43);
    const url = filledUrl(TEST_KEY_RING, 'postback', '5005', 'success', ids).replace(
      /sig=[\w-]+/,
      `sig=${forgedSig}`,
    );
    capture();
    const result = await invoke(postback, apiEvent('GET', url));
    vi.restoreAllMocks();
    expect(result.statusCode).toBe(403);
    const output = written.join('');
    expect(output).toContain('postback refused: signature');
    expect(output).toContain('"reason":"mismatch"');
    expect(output).toMatch(/"RejectedPostback"/);
    expect(output).not.toContain(forgedSig);
    for (const secret of secrets) expect(output).not.toContain(secret);
  });

  it("every line of a request names API Gateway's id for it (its access log's), apart from Lambda's", async () => {
    const url = filledUrl(TEST_KEY_RING, 'postback', '5005', 'success', { pid: 'p-id', token: randomUUID() });
    const event = apiEvent('GET', url.replace(/sig=[\w-]+/, `sig=${'Q'.repeat(43)}`));
    capture();
    await invoke(postback, event);
    vi.restoreAllMocks();
    const line = JSON.parse(loggedLine('postback refused: signature'));
    expect(line).toMatchObject({ request_id: event.requestContext.requestId });
    expect(line.function_request_id).not.toBe(event.requestContext.requestId);
  });

  it('a signature quoted in a refused identifier (separators sent encoded) reaches no log line', async () => {
    const genuine = new URL(
      filledUrl(TEST_KEY_RING, 'postback', '5005', 'success', { pid: 'p-one', token: randomUUID() }),
    );
    const sig = genuine.searchParams.get('sig') as string;
    // The whole query as one pid: `&` and `=` percent-encoded by a sender that encodes twice.
    const oneParameter = `${genuine.origin}${genuine.pathname}?pid=${encodeURIComponent(
      `p-one&kid=${genuine.searchParams.get('kid')}&sig=${sig}`,
    )}`;
    capture();
    expect((await invoke(postback, apiEvent('GET', oneParameter))).statusCode).toBe(403);
    vi.restoreAllMocks();
    expect(loggedLine('postback refused')).not.toBe('');
    expect(written.join('')).not.toContain(sig.slice(0, 12));
  });

  it('a refused key id of any length is logged cut short', async () => {
    const url = filledUrl(TEST_KEY_RING, 'postback', '5005', 'success', {
      pid: 'p-kid',
      token: randomUUID(),
    });
    capture();
    const result = await invoke(
      postback,
      apiEvent('GET', url.replace(/kid=[\w-]+/, `kid=${'k'.repeat(12_000)}`)),
    );
    vi.restoreAllMocks();
    expect(result.statusCode).toBe(403);
    const line = loggedLine('postback refused: signature');
    expect(line).toContain('"kid":"(12000 characters, not a key id)"');
    expect(line.length).toBeLessThan(1000);
  });

  it('a signature sent as the key id (parameters swapped) is not logged, not even in part', async () => {
    const url = new URL(
      filledUrl(TEST_KEY_RING, 'postback', '5005', 'success', { pid: 'p-swap', token: randomUUID() }),
    );
    const sig = url.searchParams.get('sig') as string;
    url.searchParams.set('kid', sig);
    capture();
    expect((await invoke(postback, apiEvent('GET', url.toString()))).statusCode).toBe(403);
    vi.restoreAllMocks();
    const line = loggedLine('postback refused: signature');
    expect(line).toContain('"kid":"(43 characters, not a key id)"');
    expect(written.join('')).not.toContain(sig.slice(0, 12));
  });

  it('a postback refused for its input is logged with the reason, on one line', async () => {
    const url = filledUrl(TEST_KEY_RING, 'postback', '5005', 'success', {
      pid: randomUUID(),
      token: '[%%token%%]',
    });
    capture();
    const result = await invoke(postback, apiEvent('GET', url));
    vi.restoreAllMocks();
    expect(result.statusCode).toBe(400);
    const line = loggedLine('postback refused: input');
    const entry = JSON.parse(line) as Record<string, unknown>;
    expect(entry.reason).toBe(JSON.parse(result.body as string).message);
    expect(String(entry.reason)).toMatch(/token/);
    expect(written.join('')).not.toMatch(/reserved key|message.*overwrite|cannot be used/i);
  });

  it('a recorded postback and a rejected redirect log no signature, no key and no query string', async () => {
    const ids = { pid: 'p-log2', token: randomUUID() };
    const good = filledUrl(TEST_KEY_RING, 'postback', '5005', 'success', ids);
    const goodSig = new URL(good).searchParams.get('sig') ?? '';
    const badRedirect = filledUrl(TEST_KEY_RING, 'redirect', '5005', 'success', ids).replace(
      /sig=[\w-]+/,
      'sig=x',
    );
    capture();
    await invoke(postback, apiEvent('GET', good));
    await invoke(redirect, apiEvent('GET', badRedirect));
    vi.restoreAllMocks();
    const output = written.join('');
    expect(output).toContain('postback recorded');
    expect(output).toContain('redirect hit rejected');
    expect(output).not.toContain(goodSig);
    expect(output).not.toContain('sig=');
    expect(output).not.toContain('Lambda invocation event');
    for (const secret of secrets) expect(output).not.toContain(secret);
  });

  it('a field named sig is concealed whatever logs it', () => {
    capture();
    logger.info('an event, logged by hand', { queryStringParameters: { pid: 'p', sig: 'S'.repeat(43) } });
    vi.restoreAllMocks();
    const line = loggedLine('an event, logged by hand');
    expect(line).toContain('"sig":"[concealed]"');
    expect(line).not.toContain('S'.repeat(43));
  });
});

describe('published metrics', () => {
  /** The metrics in the embedded-metric-format lines written: name and full dimension map. */
  function publishedMetrics(output: string) {
    type Emf = { _aws: { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] } };
    return output
      .split('\n')
      .filter((line) => line.includes('"_aws"'))
      .flatMap((line) => {
        const entry = JSON.parse(line) as Emf & Record<string, unknown>;
        return entry._aws.CloudWatchMetrics.flatMap((directive) =>
          directive.Metrics.flatMap((metric) =>
            directive.Dimensions.map((set) => ({
              name: metric.Name,
              dimensions: Object.fromEntries(set.map((d) => [d, String(entry[d])])),
            })),
          ),
        );
      });
  }

  it('every metric the receivers publish is in the catalogue the dashboard and alarms are built from', async () => {
    const ids = { pid: 'p-metric', token: randomUUID() };
    const good = filledUrl(TEST_KEY_RING, 'postback', '5005', 'success', ids);
    const forged = good.replace(/sig=[\w-]+/, `sig=${'Q'.repeat(43)}`);
    const badInput = filledUrl(TEST_KEY_RING, 'postback', '5005', 'success', {
      pid: 'x',
      token: '[%%token%%]',
    });
    const badRedirect = filledUrl(TEST_KEY_RING, 'redirect', '5005', 'success', ids).replace(
      /sig=[\w-]+/,
      'sig=x',
    );
    const conflicting = filledUrl(TEST_KEY_RING, 'postback', '5005', 'fail', ids);
    capture();
    await invoke(postback, apiEvent('GET', good));
    await invoke(postback, apiEvent('GET', forged));
    await invoke(postback, apiEvent('GET', badInput));
    await invoke(redirect, apiEvent('GET', badRedirect));
    await invoke(postback, apiEvent('GET', conflicting));
    vi.restoreAllMocks();
    const published = publishedMetrics(written.join(''));
    expect(published.map((m) => m.name).sort()).toEqual([
      'ConflictingHit',
      'RejectedPostback',
      'RejectedPostback',
      'RejectedRedirect',
    ]);
    for (const metric of published)
      expect(inCatalogue(metric.name, metric.dimensions), JSON.stringify(metric)).toBe(true);
  });
});

describe('published metrics of the scheduled runs', () => {
  const context = {
    functionName: 'scheduled',
    awsRequestId: 'request-1',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:210987654321:function:scheduled',
    getRemainingTimeInMillis: () => 300_000,
  } as unknown as import('aws-lambda').Context;
  const metricValues = (output: string, name: string) =>
    output
      .split('\n')
      .filter((line) => line.includes('"_aws"') && line.includes(`"${name}"`))
      .map((line) => (JSON.parse(line) as Record<string, unknown>)[name]);

  it('a redirect sync run says every time whether its survey listing was refused (the alarm reads two in a row)', async () => {
    const { createRedirectSyncHandler } = await import('../../functions/marketplace/redirect-sync-handler');
    const run = (report: Record<string, unknown>) =>
      createRedirectSyncHandler({
        configuration: {
          sync: async () =>
            ({ results: [], malformed: [], ...report }) as unknown as Awaited<
              ReturnType<Parameters<typeof createRedirectSyncHandler>[0]['configuration']['sync']>
            >,
        },
      })({}, context);
    capture();
    await run({ listingError: 'GET /surveys/allocated/by-date: HTTP 401: invalid token' });
    await run({ fullListingError: 'GET /surveys/allocated: no answer within 10000 ms' });
    await run({});
    // A listed row whose survey id reads (its price does not) is configured by that id: no warning.
    await run({
      malformed: [{ endpoint: 'GET /surveys', index: 2, problem: 'CPI is not an amount', reference: '7' }],
    });
    expect(written.join('')).not.toContain('name no survey id that reads');
    // Rows naming no survey that reads: a warning naming how many.
    await run({ malformed: [{ endpoint: 'GET /surveys', index: 3, problem: 'surveyId is missing' }] });
    vi.restoreAllMocks();
    expect(metricValues(written.join(''), 'RedirectListingRefused')).toEqual([1, 1, 0, 0, 0]);
    const unread = JSON.parse(loggedLine('name no survey id that reads')) as Record<string, unknown>;
    expect(unread).toMatchObject({ level: 'WARN', unnamedRows: 1 });
  });

  it('a redirect sync that re-applied drifted surveys says so in the line the runbook searches for, whatever else failed', async () => {
    const { createRedirectSyncHandler } = await import('../../functions/marketplace/redirect-sync-handler');
    capture();
    await createRedirectSyncHandler({
      configuration: {
        sync: async () =>
          ({
            malformed: [],
            results: [
              { surveyId: '11', status: 'applied', kid: 'k1', drifted: ['pstbck'] },
              { surveyId: '12', status: 'failed', error: 'HTTP 500' },
            ],
          }) as unknown as Awaited<
            ReturnType<Parameters<typeof createRedirectSyncHandler>[0]['configuration']['sync']>
          >,
      },
    })({}, context);
    vi.restoreAllMocks();
    expect(written.join('')).toContain('redirect sync finished with failures');
    const drifted = JSON.parse(
      loggedLine('redirects changed at the marketplace were applied again'),
    ) as Record<string, unknown>;
    expect(drifted).toMatchObject({ level: 'WARN', drifted: [{ surveyId: '11', fields: ['pstbck'] }] });
  });

  it('a redirect sync whose public host does not resolve touches no survey and fails, naming the host', async () => {
    const { createRedirectSyncHandler } = await import('../../functions/marketplace/redirect-sync-handler');
    const { publicHostCheck, PublicHostUnresolved } = await import('../../functions/marketplace/public-host');
    let synced = 0;
    const sync = async () => {
      synced++;
      return { results: [], malformed: [] } as unknown as Awaited<
        ReturnType<Parameters<typeof createRedirectSyncHandler>[0]['configuration']['sync']>
      >;
    };
    const unresolved = publicHostCheck('https://surveys.acme-research.net/', async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
    });
    capture();
    const run = createRedirectSyncHandler({ configuration: { sync }, publicHost: unresolved })({}, context);
    await expect(run).rejects.toBeInstanceOf(PublicHostUnresolved);
    vi.restoreAllMocks();
    expect(synced).toBe(0);
    expect(loggedLine('redirect sync not run')).toContain(
      "the receiver's public host surveys.acme-research.net does not resolve (ENOTFOUND)",
    );
    // A host that resolves (the loopback address here) lets the run go on.
    await createRedirectSyncHandler({
      configuration: { sync },
      publicHost: publicHostCheck('http://127.0.0.1:3000/'),
    })({}, context);
    expect(synced).toBe(1);
  });

  it('a reconciliation run counts the surveys that have failed for six hours or more apart', async () => {
    const { createReconcileHandler } = await import('../../functions/reconciliation/reconcile-handler');
    const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000).toISOString();
    const failed = (surveyId: string, failingSince: string) => ({
      surveyId,
      status: 'failed',
      days: [],
      error: 'GET /surveys/transactions: HTTP 500',
      failingSince,
    });
    const outcomes = [
      // Fifty-five that failed this last hour (a marketplace hiccup), then the six failing for hours.
      ...Array.from({ length: 55 }, (_, i) => failed(String(100 + i), hoursAgo(1))),
      failed('1', hoursAgo(7)),
      ...Array.from({ length: 5 }, (_, i) => failed(String(200 + i), hoursAgo(30))),
    ].map((o) => ({ ...o, transactions: 0, attempts: 0, verdicts: {}, changes: {}, changed: [] }));
    capture();
    const summary = (await createReconcileHandler({
      windowDays: 7,
      engine: {
        scheduled: async () =>
          ({ runId: 'r', days: [], outcomes, complete: true }) as unknown as Awaited<
            ReturnType<Parameters<typeof createReconcileHandler>[0]['engine']['scheduled']>
          >,
      },
    })({}, context)) as {
      failingLong: number;
      failures: { surveyId: string }[];
      failuresNotListed: number;
    };
    vi.restoreAllMocks();
    expect(metricValues(written.join(''), 'SurveysFailingLong')).toEqual([6]);
    // The log line names fifty, the longest failing first (those the alarm is about), and counts the rest.
    expect(summary.failures).toHaveLength(50);
    expect(summary.failures.slice(0, 6).map((f) => f.surveyId)).toEqual([
      '200',
      '201',
      '202',
      '203',
      '204',
      '1',
    ]);
    expect(summary.failuresNotListed).toBe(11);
    expect(metricValues(written.join(''), 'ReconcileHeldOff')).toEqual([0]);
  });

  it('a reconciliation run the marketplace held off says so in a metric of its own: it fails no survey', async () => {
    const { createReconcileHandler } = await import('../../functions/reconciliation/reconcile-handler');
    const deferred = ['1', '2'].map((surveyId) => ({
      surveyId,
      status: 'deferred',
      days: [],
      transactions: 0,
      attempts: 0,
      verdicts: {},
      changes: {},
      changed: [],
    }));
    capture();
    await createReconcileHandler({
      windowDays: 7,
      engine: {
        scheduled: async () =>
          ({
            runId: 'r',
            days: [],
            outcomes: deferred,
            complete: false,
            // Past what the invocation can wait: it returns at once.
            marketplaceRefusedUntil: new Date(Date.now() + 3 * 3_600_000).toISOString(),
          }) as unknown as Awaited<
            ReturnType<Parameters<typeof createReconcileHandler>[0]['engine']['scheduled']>
          >,
      },
    })({}, context);
    vi.restoreAllMocks();
    const output = written.join('');
    expect(metricValues(output, 'ReconcileHeldOff')).toEqual([1]);
    expect(metricValues(output, 'ReconcileFailedSurveys')).toEqual([0]);
    // A pause the invocation waits out, its run then finished: not held off.
    let call = 0;
    capture();
    await createReconcileHandler({
      windowDays: 7,
      sleep: async () => undefined,
      engine: {
        scheduled: async () =>
          (++call === 1
            ? {
                runId: 'r',
                days: [],
                outcomes: deferred,
                complete: false,
                marketplaceRefusedUntil: new Date(Date.now() + 2_000).toISOString(),
              }
            : { runId: 'r', days: [], outcomes: [], complete: true }) as unknown as Awaited<
            ReturnType<Parameters<typeof createReconcileHandler>[0]['engine']['scheduled']>
          >,
      },
    })({}, context);
    vi.restoreAllMocks();
    expect(metricValues(written.join(''), 'ReconcileHeldOff')).toEqual([0]);
  });
});

describe('text from outside in the log', () => {
  it('control characters in any logged field are written as \\u escapes: none reaches the log raw', async () => {
    const hostile = 'a\u001b[2Jb\u009b2Jc\u007fd\re';
    capture();
    logger.warn('probe', { field: hostile, nested: { list: [hostile] } });
    const badRedirect = filledUrl(TEST_KEY_RING, 'redirect', '5005', 'success', {
      pid: hostile,
      token: 't',
    }).replace(/sig=[\w-]+/, 'sig=x');
    await invoke(redirect, apiEvent('GET', badRedirect));
    vi.restoreAllMocks();
    const output = written.join('');
    expect(output).toContain('redirect hit rejected');
    expect(output.replace(/\n/g, '')).not.toMatch(/\p{Cc}/u);
    const probe = JSON.parse(output.split('\n').find((l) => l.includes('"probe"')) ?? '{}');
    expect(probe.field).toBe('a\\u001b[2Jb\\u009b2Jc\\u007fd\\u000de');
    expect(probe.nested.list[0]).toBe(probe.field);
  });
});
