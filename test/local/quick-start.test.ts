/**
 * The quick start as a new user runs it: `npm start` (here on free ports), the printed sample postback URL,
 * the CLI showing the stored attempt, a repeat changing only counters, a tampered signature refused.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchDirectory } from '../support/scratch';

const run = promisify(execFile);
const TSX = 'node_modules/.bin/tsx';
let server: ChildProcess;
let output = '';
const env = {
  ...process.env,
  PORT: '0',
  DYNAMODB_PORT: '0',
  MARKETPLACE_PORT: '0',
  SQS_PORT: '0',
  RESPONDENT_INTERVAL_MS: '100',
  REDIRECT_SYNC_INTERVAL_MS: '500',
  // A key ring of its own, so the test never touches a developer's .local/ ring.
  SIGNING_KEYS_FILE: join(scratchDirectory('receiver-keys-'), 'signing-keys.json'),
  // The local stack must not inherit the test run's table or keys.
  TABLE_NAME: undefined,
  DYNAMODB_ENDPOINT: undefined,
  SIGNING_KEYS: undefined,
  PUBLIC_BASE_URL: undefined,
  SQS_ENDPOINT: undefined,
  HIT_BUFFER_QUEUE_URL: undefined,
  MARKETPLACE_BASE_URL: undefined,
  MARKETPLACE_ACCESS_TOKEN: undefined,
};

/** The UTC day the stack started on: its simulated respondents are first seen from then on. */
const startedDay = new Date().toISOString().slice(0, 10);
/** The UTC days respondents may have been first seen on since: a run over midnight spans two. */
const daysSinceStart = () => [...new Set([startedDay, new Date().toISOString().slice(0, 10)])];

beforeAll(async () => {
  // As `npm start` runs it: one node process (no wrapper between the signal and start.ts's handler).
  server = spawn(process.execPath, ['--import', 'tsx', 'infra/local/start.ts'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  server.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const deadline = Date.now() + 20_000;
  while (!output.includes('Ctrl-C stops.')) {
    if (Date.now() > deadline || server.exitCode !== null)
      throw new Error(`npm start did not come up:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}, 30_000);

afterAll(async () => {
  if (server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
  }
});

const printed = (pattern: RegExp) => {
  const match = pattern.exec(output);
  if (!match?.[1]) throw new Error(`not printed: ${pattern}\n${output}`);
  return match[1];
};

async function cli(...args: string[]) {
  const local = {
    DYNAMODB_ENDPOINT: printed(/DynamoDB\s+(http:\/\/\S+)/),
    MARKETPLACE_BASE_URL: printed(/Marketplace\s+(http:\/\/\S+)/),
    PUBLIC_BASE_URL: printed(/API\s+(http:\/\/\S+)/),
    SQS_ENDPOINT: printed(/Hit buffer\s+(http:\/\/\S+)/),
  };
  try {
    const { stdout, stderr } = await run(TSX, ['functions/cli/main.ts', ...args], {
      env: { ...env, ...local },
    });
    return { stdout, stderr, code: 0 };
  } catch (error) {
    const failed = error as { stdout: string; stderr: string; code: number };
    return { stdout: failed.stdout, stderr: failed.stderr, code: failed.code };
  }
}

describe('npm start', () => {
  it('prints the API, the engine and a sample signed postback URL that stores an outcome', async () => {
    const sample = printed(/curl -i '([^']+)'/);
    expect(sample).toMatch(
      /^http:\/\/127\.0\.0\.1:\d+\/postback\/1001\/success\?pid=demo-pid&token=[\w-]+&kid=dev1&sig=[\w-]{43}$/,
    );

    const first = await fetch(sample);
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({ ok: true, effect: 'recorded' });

    const token = new URL(sample).searchParams.get('token') ?? '';
    const shown = await cli('attempt', '--survey', '1001', '--pid', 'demo-pid', '--token', token, '--json');
    expect(shown.code).toBe(0);
    const [attempt] = JSON.parse(shown.stdout);
    expect(attempt).toMatchObject({
      token,
      complete: 'postback-confirmed',
      postback: { outcome: 'success', hits: 1 },
    });

    const again = await fetch(sample);
    expect(await again.json()).toMatchObject({ effect: 'duplicate' });
    const [after] = JSON.parse(
      (await cli('attempt', '--survey', '1001', '--pid', 'demo-pid', '--token', token, '--json')).stdout,
    );
    expect(after.postback.hits).toBe(2);
    expect({ ...after, lastSeenAt: '', postback: { ...after.postback, hits: 0, sightings: [] } }).toEqual({
      ...attempt,
      lastSeenAt: '',
      postback: { ...attempt.postback, hits: 0, sightings: [] },
    });
  });

  it('prints one respondent for every sample URL, and hints a CLI on these ports follows to this stack', async () => {
    const postback = new URL(printed(/success postback\s+(\S+)/));
    const redirect = new URL(printed(/success redirect\s+(\S+)/));
    expect(redirect.searchParams.get('token')).toBe(postback.searchParams.get('token'));
    expect(printed(/curl -i '([^']+)'/)).toBe(postback.href);
    await fetch(postback);
    // The stack runs on free ports: run as printed, the hint reaches it, not a stack on the default ports. Its
    // key ring file is its own too, so the hint names it (a CLI would sign with the default file's key).
    const hint = printed(/^\s+((?:[A-Z_]+=\S+ )+)npm run cli -- attempt --survey 1001 --pid demo-pid$/m);
    const ports = Object.fromEntries(
      hint
        .trim()
        .split(' ')
        .map((pair) => pair.split('=')),
    );
    expect(Object.keys(ports).sort()).toEqual([
      'DYNAMODB_PORT',
      'MARKETPLACE_PORT',
      'PORT',
      'SIGNING_KEYS_FILE',
      'SQS_PORT',
    ]);
    expect(ports.SIGNING_KEYS_FILE).toBe(env.SIGNING_KEYS_FILE);
    const { stdout } = await run(
      TSX,
      ['functions/cli/main.ts', 'attempt', '--survey', '1001', '--pid', 'demo-pid', '--json'],
      { env: { ...env, ...ports } },
    );
    expect(JSON.parse(stdout)).toEqual([
      expect.objectContaining({ token: postback.searchParams.get('token') }),
    ]);
  });

  it('refuses a tampered signature with 403', async () => {
    const sample = printed(/curl -i '([^']+)'/);
    const tampered = sample.replace(/sig=([\w-])/, (_, c: string) => `sig=${c === 'A' ? 'B' : 'A'}`);
    const response = await fetch(tampered);
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({ error: 'forbidden', message: 'signature is not valid' });
  });

  it('sends a respondent on from the sample redirect URL', async () => {
    const response = await fetch(printed(/success redirect\s+(\S+)/), { redirect: 'manual' });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('This survey is over');
  });

  it('prints where its hit buffer listens, and the CLI finds the dead-letter queue there', async () => {
    const endpoint = printed(/Hit buffer\s+(http:\/\/\S+)/);
    const counted = await cli('buffer', 'redrive', '--dry-run', '--json');
    expect(counted.code).toBe(0);
    expect(JSON.parse(counted.stdout)).toEqual({
      dryRun: true,
      deadLetterQueueUrl: `${endpoint}/000000000000/hits-dlq`,
      queueUrl: `${endpoint}/000000000000/hits`,
      waiting: 0,
      inFlight: 0,
    });
    const moved = await cli('buffer', 'redrive');
    expect(moved.code).toBe(0);
    expect(moved.stdout).toContain('moved 0 hits');
  });

  it('answers 404 JSON for an unknown route, as API Gateway does', async () => {
    const base = printed(/API\s+(http:\/\/\S+)/);
    const response = await fetch(`${base}/nowhere`);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ message: 'Not Found' });
  });

  it('the CLI prints the seven URLs and two methods of a survey, and says so when an attempt is unknown', async () => {
    const urls = await cli('urls', '--survey', '77', '--json', '--success-method', 'post');
    // All nine fields setRedirectionForSurvey takes.
    expect(Object.keys(JSON.parse(urls.stdout)).sort()).toEqual([
      'fUrl',
      'oUrl',
      'pstBckFailMethod',
      'pstBckSuccessMethod',
      'pstbck',
      'pstbck_fail',
      'qTUrl',
      'sUrl',
      'tUrl',
    ]);
    // A method in lower case reads as the variable's would.
    expect(JSON.parse(urls.stdout).pstBckSuccessMethod).toBe('POST');
    // With a postback host of their own, the postbacks are built on it and the redirects are not.
    const apart = await cli(
      'urls',
      '--survey',
      '1001',
      '--postback-base-url',
      'https://pb.example.net/',
      '--json',
    );
    expect(JSON.parse(apart.stdout).pstbck).toMatch(/^https:\/\/pb\.example\.net\/postback\/1001\/success\?/);
    expect(JSON.parse(apart.stdout).sUrl).not.toContain('pb.example.net');
    // 77 is no survey of the local marketplace: signed all the same, and said to be unregistered.
    expect(urls.stderr).toContain('survey 77 is not registered here');
    const registered = await cli('urls', '--survey', '1001');
    expect(registered.stdout).toContain('sUrl');
    expect(registered.stderr).not.toContain('not registered');
    const missing = await cli('attempt', '--survey', '77', '--pid', 'nobody');
    expect(missing.code).toBe(1);
    expect(missing.stdout).toContain('no attempt of pid nobody at survey 77');
  });

  it('points the local marketplace at the receiver and its simulated respondents land in the ledger', async () => {
    const marketplace = printed(/Marketplace\s+(http:\/\/\S+)/);
    expect(output).toContain('redirect sync: 3 applied');
    const transactionsOf = async (surveyId: number) => {
      const response = await fetch(`${marketplace}/_sim/transactions/${surveyId}`);
      return ((await response.json()) as { result: { token: string; PID: string; status: string }[] }).result;
    };
    const deadline = Date.now() + 15_000;
    let sent: { token: string; PID: string; status: string }[] = [];
    while (Date.now() < deadline) {
      sent = (await Promise.all([1001, 1002, 1003].map(transactionsOf))).flat();
      if (sent.length >= 6) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(sent.length).toBeGreaterThanOrEqual(6);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const days = daysSinceStart();
    const recorded = (
      await Promise.all(
        ['1001', '1002', '1003'].flatMap((survey) =>
          days.map(async (day) =>
            JSON.parse((await cli('attempts', '--survey', survey, '--day', day, '--json')).stdout),
          ),
        ),
      )
    ).flat() as { token: string; pid: string; postback?: { outcome: string } }[];
    const byToken = new Map(recorded.map((a) => [a.token, a]));
    for (const transaction of sent.slice(0, 6)) {
      const attempt = byToken.get(transaction.token);
      expect(attempt, transaction.token).toBeDefined();
      expect(attempt?.pid).toBe(transaction.PID);
      expect(attempt?.postback?.outcome).toBe(transaction.status === 'Completed' ? 'success' : 'fail');
    }
  });

  it('configures a new live survey by the next sync, with no manual step, and its respondents land in the ledger', async () => {
    const marketplace = printed(/Marketplace\s+(http:\/\/\S+)/);
    const created = await fetch(`${marketplace}/_sim/surveys`, {
      method: 'POST',
      body: JSON.stringify({ surveyId: 2001, cpi: '2.40' }),
    });
    expect(created.status).toBe(201);
    let shown: { differences: unknown[]; registration?: { verified: boolean } } | undefined;
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const result = await cli('redirects', 'show', '--survey', '2001', '--json');
      if (!result.stdout)
        throw new Error(`redirects show printed nothing: ${'stderr' in result ? result.stderr : ''}`);
      shown = JSON.parse(result.stdout);
      if (result.code === 0 && shown?.registration?.verified) break;
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    expect(shown?.differences).toEqual([]);
    expect(shown?.registration?.verified).toBe(true);

    const sent = await fetch(`${marketplace}/_sim/respondents`, {
      method: 'POST',
      body: JSON.stringify({ surveyId: 2001, count: 3 }),
    });
    const { attempts } = (await sent.json()) as { attempts: { token: string; pid: string }[] };
    const days = daysSinceStart();
    const recorded = (
      await Promise.all(
        days.map(async (day) =>
          JSON.parse((await cli('attempts', '--survey', '2001', '--day', day, '--json')).stdout),
        ),
      )
    ).flat() as { token: string }[];
    // The background stream sends respondents to the new survey too; ours must all be there.
    expect(recorded.map((a) => a.token)).toEqual(expect.arrayContaining(attempts.map((a) => a.token)));
    expect(attempts).toHaveLength(3);
  });

  it('redirects apply exits non-zero and names the surveys that failed and why', async () => {
    const result = await cli('redirects', 'apply', '--survey', '1001', '--survey', '9999');
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^1001\s+unchanged/m);
    expect(result.stdout).toMatch(
      /^9999\s+failed\s+PUT \/supply\/setRedirectionForSurvey\/9999: HTTP 404: Survey 9999 not found/m,
    );
    expect('stderr' in result && result.stderr).toContain('1 of 2 surveys failed: 9999');
  });

  it('reconcile summarises verdicts, and exits non-zero naming a survey it could not reconcile', async () => {
    const marketplace = printed(/Marketplace\s+(http:\/\/\S+)/);
    const clean = await cli('reconcile', '--survey', '1001', '--settle-seconds', '0');
    expect(clean.code).toBe(0);
    expect(clean.stdout).toMatch(
      /reconciled \d{4}-\d{2}-\d{2}\.\.\d{4}-\d{2}-\d{2} \(Pacific days\): 1 surveys/,
    );
    expect(clean.stdout).toMatch(/^ {2}matched\s+\d+/m);
    // A survey named twice is reconciled once; a period of years is refused before anything is listed.
    const twice = await cli(
      'reconcile',
      '--survey',
      '1001',
      '--survey',
      '1001',
      '--settle-seconds',
      '0',
      '--json',
    );
    expect(twice.code).toBe(0);
    expect(JSON.parse(twice.stdout).outcomes.map((o: { surveyId: string }) => o.surveyId)).toEqual(['1001']);
    const years = await cli('reconcile', '--from', '2019-01-01', '--to', '2026-11-26', '--survey', '1001');
    expect(years.code).toBe(1);
    expect('stderr' in years && years.stderr).toMatch(/at most 92 days at a time \(asked for 2887/);

    await fetch(`${marketplace}/_sim/faults`, {
      method: 'PUT',
      body: JSON.stringify({ api: { serverError: 1 } }),
    });
    try {
      const failed = await cli('reconcile', '--survey', '1002');
      expect(failed.code).toBe(1);
      expect('stderr' in failed && failed.stderr).toMatch(
        /1 of 1 surveys could not be reconciled: 1002 \(.*HTTP 503/,
      );
      // A CSV summary, which has no list of them, says on stderr that its figures are stale.
      const csv = await cli('report', '--format', 'csv', '--survey', '1002');
      expect(csv.code).toBe(0);
      expect('stderr' in csv && csv.stderr).toContain(
        '1 survey(s) failing reconciliation in this period, their figures as of their last good run: 1002',
      );
    } finally {
      await fetch(`${marketplace}/_sim/faults`, { method: 'PUT', body: JSON.stringify({ api: {} }) });
    }
  });

  it('a port already in use is named, with the variables that choose others, and nothing half-started stays', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as AddressInfo).port;
    try {
      // The API's port, and the hit buffer's (an ElasticMQ's usual 9324 is often taken).
      for (const name of ['PORT', 'SQS_PORT']) {
        const second = await run(process.execPath, ['--import', 'tsx', 'infra/local/start.ts'], {
          env: { ...env, [name]: String(port) },
        }).then(
          () => ({ code: 0, stderr: '' }),
          (error: { code?: number; stderr?: string }) => ({ code: error.code, stderr: error.stderr ?? '' }),
        );
        expect(second.code).toBe(1);
        expect(second.stderr).toContain(`127.0.0.1:${port} is already in use`);
        expect(second.stderr).toContain('PORT, DYNAMODB_PORT, MARKETPLACE_PORT, SQS_PORT');
        expect(second.stderr).not.toContain('Unhandled');
      }
    } finally {
      holder.close();
    }
  });

  it('refuses an interval or a port that is not a whole number, naming it, rather than turning the job off', async () => {
    const refused = await run(process.execPath, ['--import', 'tsx', 'infra/local/start.ts'], {
      env: { ...env, RECONCILE_INTERVAL_MS: '1m', HEALTH_INTERVAL_MS: '30s', PORT: '70000' },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code?: number; stderr?: string }) => ({ code: error.code, stderr: error.stderr ?? '' }),
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'RECONCILE_INTERVAL_MS is "1m", HEALTH_INTERVAL_MS is "30s", PORT is "70000"',
    );
  });

  it('stops on SIGTERM', async () => {
    server.kill('SIGTERM');
    const code = await new Promise((resolve) => server.once('exit', resolve));
    expect(code).toBe(0);
  });
});
