/**
 * What `redirects show` tells an operator about a marketplace that keeps no per-survey `tUrl` or postback methods
 * (it reports none of them, or the supplier's global values): said so, not shown as set, and no difference. The
 * real CLI against a small marketplace of the test's own and the run's engine.
 */
import { execFile, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
} from '../../functions/ledger/ledger-store';
import { MARKETPLACE_DOWN_SURVEYS } from '../../functions/marketplace/marketplace-client';
import { formatPacificTime, pacificDay, pacificDayRange } from '../../functions/marketplace/pacific-time';
import { nextDay } from '../../functions/reconciliation/verdict-rules';
import { runCli } from '../support/cli';
import { daySummary, freshTable, judgedPostback } from '../support/ledger';

const run = promisify(execFile);
const TSX = join(process.cwd(), 'node_modules', '.bin', 'tsx');
const RING = JSON.stringify({ current: 'k1', k1: 'first-signing-key-for-cli-picture-00000' });
const GLOBAL_TERMINATION = 'https://panel.example/global-termination';
let server: Server;
let url: string;
let table: { endpoint: string; tableName: string };
/** Survey-level settings as this marketplace keeps them: never tUrl nor the methods. */
const stored = new Map<string, Record<string, string>>();
/** The transactions this marketplace lists, by the Pacific day they were created on. */
const listedRows: { created: string; row: Record<string, unknown> }[] = [];
/** While set, a listing of this day alone fails. */
let failingDay: string | undefined;
/** While set, every listing is refused with this Retry-After (seconds). */
let refusingFor: number | undefined;
/** While set, what the listings of surveys answer. */
let surveyRows: unknown[] | undefined;

beforeAll(async () => {
  table = await freshTable();
  server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => {
      body += chunk;
    });
    request.on('end', () => {
      const path = new URL(request.url ?? '/', 'http://marketplace').pathname;
      const id = path.split('/').pop() as string;
      const send = (answer: unknown) => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(answer));
      };
      if (path.includes('/setRedirectionForSurvey/')) {
        // Surveys 9201-9220: the marketplace does not answer their settings.
        if (/^92(0[1-9]|1[0-9]|20)$/.test(id)) {
          response.writeHead(503, { 'content-type': 'application/json' });
          return response.end('{"apiStatus":"Failure","msg":"Service unavailable"}');
        }
        const { tUrl: _t, pstBckSuccessMethod: _s, pstBckFailMethod: _f, ...kept } = JSON.parse(body);
        stored.set(id, { ...stored.get(id), ...kept });
        return send({ apiStatus: 'success', msg: 'ok' });
      }
      if (path.includes('/surveySpecificRedirects/')) {
        // Survey 9102's read-back reports the supplier's global tUrl and methods.
        const globals = id === '9102' ? { tUrl: GLOBAL_TERMINATION, pstBckFailMethod: 'GET' } : {};
        const kept = { ...stored.get(id) };
        // Survey 9103's read-back writes its success postback HTML-escaped.
        if (id === '9103' && kept.pstbck) kept.pstbck = kept.pstbck.replaceAll('&', '&amp;');
        return send({ apiStatus: 'success', msg: 'ok', redirectURL: { ...globals, ...kept } });
      }
      if (surveyRows && path.includes('/getAllocatedSurveys'))
        return send({ apiStatus: 'success', result: surveyRows });
      if (path.includes('/getSurveyTransactions/')) {
        const query = new URL(request.url ?? '/', 'http://marketplace').searchParams;
        const [from, to] = [query.get('startDate') ?? '', query.get('endDate') ?? ''];
        if (refusingFor !== undefined) {
          response.writeHead(429, { 'content-type': 'application/json', 'retry-after': String(refusingFor) });
          return response.end('{"apiStatus":"Failure","msg":"Too many requests"}');
        }
        if (from === to && from === failingDay) {
          response.writeHead(500, { 'content-type': 'application/json' });
          return response.end('{"apiStatus":"Failure","msg":"injected"}');
        }
        const result = listedRows.filter((r) => r.created >= from && r.created <= to).map((r) => r.row);
        if (result.length > 0) return send({ apiStatus: 'success', result });
        response.writeHead(400, { 'content-type': 'application/json' });
        return response.end(JSON.stringify({ apiStatus: 'Failure', msg: `No data found for survey: ${id}` }));
      }
      return send({ apiStatus: 'success', msg: `Survey ${id} is Paused/Closed` });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const cliEnv = () => ({
  ...process.env,
  DYNAMODB_ENDPOINT: table.endpoint,
  TABLE_NAME: table.tableName,
  MARKETPLACE_BASE_URL: url,
  MARKETPLACE_ACCESS_TOKEN: 'cli-picture-token',
  SIGNING_KEYS: RING,
  PUBLIC_BASE_URL: 'https://hits.test',
  POWERTOOLS_LOG_LEVEL: 'ERROR',
});

const cli = (...args: string[]) => runCli(args, cliEnv());

describe('redirects show', () => {
  // Six CLI processes, each starting through tsx: a loaded two-core machine takes seconds for each.
  it('says which fields the marketplace does not report, or reads back as global values, and counts none as a difference', {
    timeout: 90_000,
  }, async () => {
    for (const survey of ['9101', '9102'])
      expect((await cli('redirects', 'apply', '--survey', survey, '--fail-method', 'POST')).code).toBe(0);
    const unreported = await cli('redirects', 'show', '--survey', '9101', '--fail-method', 'POST');
    expect(unreported.code).toBe(0);
    expect(unreported.stdout).toMatch(
      /^ {2}tUrl +https:\/\/hits\.test\/\S+ {2}\(not reported by the marketplace\)$/m,
    );
    expect(unreported.stdout).toMatch(/^ {2}pstBckFailMethod +POST {2}\(not reported by the marketplace\)$/m);
    expect(unreported.stdout).toMatch(/^ {2}pstbck +https:\/\/hits\.test\/\S+$/m);
    // A postback URL is a credential: its signature shown as a mark of it, never itself.
    expect(unreported.stdout).toMatch(/&sig=\[concealed:[0-9a-f]{6}\]/);
    expect(unreported.stdout).not.toMatch(/sig=[\w-]{43}/);
    expect(unreported.stdout).toContain('the marketplace agrees');
    const globals = await cli('redirects', 'show', '--survey', '9102', '--fail-method', 'POST');
    expect(globals.code).toBe(0);
    expect(globals.stdout).toContain(
      `reads back ${GLOBAL_TERMINATION} (not kept per survey by the marketplace; not compared)`,
    );
    expect(globals.stdout).toContain('reads back GET (not kept per survey by the marketplace; not compared)');
    // A URL read back spelled otherwise (HTML-escaped) is the same URL, and says so.
    expect((await cli('redirects', 'apply', '--survey', '9103')).code).toBe(0);
    const escaped = await cli('redirects', 'show', '--survey', '9103');
    expect(escaped.code).toBe(0);
    expect(escaped.stdout).toMatch(
      /^ {2}pstbck +https:\/\/hits\.test\/\S+\n +reads back \S+&amp;\S+ \(the same URL, spelled otherwise\)$/m,
    );
  });
});

describe('redirects show, drifted', () => {
  it('a survey changed at the marketplace since its read-back: the verification is dated, and the command that sets it again named', {
    timeout: 60_000,
  }, async () => {
    expect((await cli('redirects', 'apply', '--survey', '9222')).code).toBe(0);
    // Its postbacks pointed elsewhere from the marketplace's console: the registry still says verified.
    stored.set('9222', { ...stored.get('9222'), pstbck: 'https://elsewhere.example/pb' });
    const drifted = await cli('redirects', 'show', '--survey', '9222');
    expect(drifted.code).toBe(1);
    expect(drifted.stdout).toMatch(/verified \d{4}-\d\d-\d\dT[\d:.]+Z \(as of its last read-back\)/);
    expect(drifted.stdout).toContain(
      '1 fields differ: set them again now with npm run cli -- redirects apply --force --survey 9222',
    );
  });
});

describe('output for other programs', () => {
  it('--json is JSON alone on standard output, a rotation included', async () => {
    expect((await cli('redirects', 'apply', '--survey', '9104')).code).toBe(0);
    const { stdout } = await run(
      TSX,
      ['functions/cli/main.ts', 'redirects', 'rotate', '--dry-run', '--json'],
      {
        env: cliEnv(),
      },
    );
    expect(() => JSON.parse(stdout)).not.toThrow();
  });

  it('a reader that stops early (`| head -1`) ends the output without an error', async () => {
    const child = spawn(TSX, ['functions/cli/main.ts', 'redirects', 'show', '--survey', '9104'], {
      env: cliEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    // The first chunk read, the pipe is closed, as head does.
    child.stdout.once('data', () => child.stdout.destroy());
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).not.toMatch(/EPIPE|Error:/);
    expect(code).toBe(0);
  });

  it('against the local stack when nothing answers, says to start it', async () => {
    const { DYNAMODB_ENDPOINT: _endpoint, TABLE_NAME: _table, ...env } = cliEnv();
    const failed = await run(TSX, ['functions/cli/main.ts', 'attempts', '--survey', '9104'], {
      env: { ...env, DYNAMODB_PORT: '1' },
    }).catch((error: { stderr: string; code: number }) => error);
    expect(failed).toMatchObject({ code: 1 });
    expect((failed as { stderr: string }).stderr).toContain('is the local stack running? npm start');
  });

  it('against AWS when the ledger cannot be reached, says why (the cause), not only that it is unavailable', async () => {
    const failed = await run(TSX, ['functions/cli/main.ts', 'attempts', '--survey', '9104'], {
      env: {
        ...cliEnv(),
        RECEIVER_TARGET: 'aws',
        AWS_REGION: 'us-east-1',
        DYNAMODB_ENDPOINT: 'http://127.0.0.1:1',
      },
    }).catch((error: { stderr: string; code: number }) => error);
    expect(failed).toMatchObject({ code: 1 });
    expect((failed as { stderr: string }).stderr).toMatch(
      /error: the ledger store is unavailable \(\w+: .*(ECONNREFUSED|127\.0\.0\.1:1)/,
    );
  });

  it('attempt and attempts show an item kept for a transaction never seen here, and its verdict, in words', async () => {
    const client = createDocumentClient({ endpoint: table.endpoint });
    const clickedAt = new Date().toISOString();
    /** An item reconciliation keeps for a complete the marketplace lists (nothing seen here), judged `kind`. */
    const listed = (pid: string, kind: 'complete_not_received' | 'matched', verifyToken?: string) =>
      createReconciliationStore(client, table.tableName).recordVerdict(
        {
          surveyId: '9105',
          pid,
          token: pid.replace('p-', 't-'),
          verdict: {
            kind,
            day: clickedAt.slice(0, 10),
            detail: {},
            marketplace: {
              status: 'Completed',
              ...(verifyToken ? { verifyToken } : {}),
              cpi: '1.25',
              clickedAt,
            },
          },
        },
        new Date(),
      );
    await listed('p-listed', 'complete_not_received', 'Valid');
    const one = await cli('attempt', '--survey', '9105', '--pid', 'p-listed');
    expect(one.stdout).not.toContain('undefined');
    expect(one.stdout).toContain('never seen here');
    expect(one.stdout).toMatch(/reconciled: complete_not_received on \d{4}-\d\d-\d\d \(Pacific day\)/);
    expect(one.stdout).toContain('(marketplace: Completed, Valid, cpi 1.25)');
    // A matched complete judged while its review was pending: an acceptance since is not written back, and it says so.
    await listed('p-matched', 'matched', 'Pending');
    const matched = await cli('attempt', '--survey', '9105', '--pid', 'p-matched');
    expect(matched.stdout).toContain('(marketplace: Completed, Pending, cpi 1.25)');
    expect(matched.stdout).toContain('an acceptance since then is counted in the day, not here');
    expect(one.stdout).not.toContain('an acceptance since');
    // Listed before the marketplace gave it a review at all: the same.
    await listed('p-unreviewed', 'matched');
    const unreviewed = await cli('attempt', '--survey', '9105', '--pid', 'p-unreviewed');
    expect(unreviewed.stdout).toContain('an acceptance since then is counted in the day, not here');
    // An attempt without a verdict: not judged yet, or an agreement left unwritten (matchedVerdicts implied).
    await createLedgerStore(client, table.tableName).recordHit(
      {
        channel: 'postback',
        surveyId: '9105',
        outcome: 'fail',
        pid: 'p-plain',
        token: 't-plain',
        source: 'query',
      },
      new Date(clickedAt),
    );
    const plain = await cli('attempt', '--survey', '9105', '--pid', 'p-plain');
    expect(plain.stdout).toContain(
      `reconciled: no verdict on it: not judged yet, or it agrees with the marketplace (with the matchedVerdicts setting implied, such an attempt is counted in the figures of ${pacificDay(new Date(clickedAt))} only)`,
    );
    const day = await cli('attempts', '--survey', '9105', '--day', clickedAt.slice(0, 10));
    expect(day.stdout).not.toContain('undefined');
    expect(day.stdout).toContain(`(not seen here; clicked ${clickedAt})  pid p-listed`);
  });

  it('redirects sync says a listing the marketplace refused, and fails, rather than report nothing new', async () => {
    // This marketplace answers the listings with a success that carries no list.
    const result = await cli('redirects', 'sync');
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('the listing of surveys changed since the checkpoint failed:');
    expect(result.stdout).toContain('no result list');
  });

  it('attempt finds a pid typed as a listing printed it (its escapes, a backslash doubled), and says so', async () => {
    const ledger = createLedgerStore(createDocumentClient({ endpoint: table.endpoint }), table.tableName);
    for (const pid of ['tab\there', 'lit\\u0009eral'])
      await ledger.recordHit(
        {
          channel: 'postback',
          surveyId: '9225',
          outcome: 'success',
          pid,
          token: `t-${pid.length}`,
          source: 'query',
        },
        new Date(),
      );
    const listed = await cli('attempts', '--survey', '9225');
    expect(listed.stdout).toContain('pid tab\\u0009here');
    expect(listed.stdout).toContain('pid lit\\\\u0009eral');
    const printed = await cli('attempt', '--survey', '9225', '--pid', 'tab\\u0009here');
    expect(printed.code).toBe(0);
    // Said as typed: its backslash not doubled.
    expect(printed.stdout).toContain('pid tab\\u0009here read as printed in a listing');
    const json = await run(
      TSX,
      ['functions/cli/main.ts', 'attempt', '--survey', '9225', '--pid', 'tab\\u0009here', '--json'],
      {
        env: cliEnv(),
      },
    );
    expect((JSON.parse(json.stdout) as { pid: string }[]).map((a) => a.pid)).toEqual(['tab\there']);
    expect(json.stderr).toContain('read as printed in a listing');
    expect(printed.stdout).toContain('survey 9225  pid tab\\u0009here');
    // The pid that holds the escape's text is found by it as typed, and by its printed form.
    expect((await cli('attempt', '--survey', '9225', '--pid', 'lit\\u0009eral')).stdout).toContain(
      'pid lit\\\\u0009eral',
    );
    expect((await cli('attempt', '--survey', '9225', '--pid', 'lit\\\\u0009eral')).code).toBe(0);
    // Not found, the pid is said as typed, escaped as a listing would show it.
    const missing = await cli('attempt', '--survey', '9225', '--pid', 'nobody\u200b');
    expect(missing.stdout).toContain('no attempt of pid nobody\\u200b at survey 9225');
  });

  it('redirects sync names a survey whose row does not read by its id, once though both listings show it', async () => {
    surveyRows = [{ surveyId: 9223, CPI: '1,50' }];
    try {
      const result = await cli('redirects', 'sync');
      const said = result.stdout.split('\n').filter((line) => line.includes('unreadable survey'));
      expect(said).toEqual([expect.stringMatching(/^ {2}unreadable survey 9223: .*CPI/)]);
    } finally {
      surveyRows = undefined;
    }
  });

  it('redirects apply stops after ten surveys in a row meet the marketplace down, names those not taken up, and fails', async () => {
    const ids = Array.from({ length: 20 }, (_, i) => String(9201 + i));
    const result = await runCli(['redirects', 'apply', ...ids.flatMap((id) => ['--survey', id])], {
      ...cliEnv(),
      MARKETPLACE_RETRIES: '0',
    });
    expect(result.code).toBe(1);
    // Ten failed in a row, and the few already under way (four at a time); the rest not taken up.
    const [, notTaken] =
      result.stdout.match(
        /(\d+) of 20 surveys were not taken up \(the marketplace is not answering; next run\)/,
      ) ?? [];
    expect(Number(notTaken)).toBeGreaterThanOrEqual(20 - MARKETPLACE_DOWN_SURVEYS - 3);
  });

  it('warns of a key ring edited by hand that the receivers accept all the same (a note kept in it), and goes on', async () => {
    const ring = JSON.parse(RING) as Record<string, unknown>;
    const noted = JSON.stringify({ ...ring, note: 'rotated after the laptop was lost, ask Alice' });
    const printed = await run(TSX, ['functions/cli/main.ts', 'urls', '--survey', '9998'], {
      env: { ...cliEnv(), SIGNING_KEYS: noted },
    });
    expect(printed.stdout).toContain('https://hits.test/redirect/9998/success');
    expect(printed.stderr).toContain("signing key ring's member note holds words, not key material");
    expect(printed.stderr).not.toContain('ask Alice');
    const quiet = await run(TSX, ['functions/cli/main.ts', 'urls', '--survey', '9998'], { env: cliEnv() });
    expect(quiet.stderr).not.toContain('warning:');
  });

  it('against AWS, applying or printing URLs without POSTBACK_BASE_URL is refused (postbacks would go to the public host), and nothing is sent', async () => {
    const aws = { ...cliEnv(), RECEIVER_TARGET: 'aws', AWS_REGION: 'us-east-1' };
    for (const args of [
      ['redirects', 'apply', '--survey', '9997'],
      ['urls', '--survey', '9997'],
      // A base URL given for the redirects is not one for the postbacks against AWS.
      ['urls', '--survey', '9997', '--json', '--base-url', 'https://public.test'],
    ]) {
      const refused = await runCli(args, aws);
      expect(refused.code).toBe(1);
      expect(refused.stdout).toMatch(/set POSTBACK_BASE_URL \(the stack's PostbackApiUrl output\)/);
    }
    const registry = createSurveyRegistry(
      createDocumentClient({ endpoint: table.endpoint }),
      table.tableName,
    );
    expect(await registry.get('9997')).toBeUndefined();
    const given = await runCli(['urls', '--survey', '9997', '--json'], {
      ...aws,
      POSTBACK_BASE_URL: 'https://postbacks.test',
    });
    expect(given.code).toBe(0);
    expect(given.stdout).toContain('https://postbacks.test/postback/9997/');
    // Removing builds no URL: it needs none (a migration removes surveys from the syncing stack).
    const removed = await runCli(['redirects', 'remove', '--survey', '9997', '--dry-run'], aws);
    expect(removed.code).toBe(0);
    expect(removed.stdout).toContain('DELETE /supply/surveySpecificRedirects/9997');
  });

  it('redirects rotate refuses a retirement it cannot date, naming the bound', async () => {
    const result = await cli('redirects', 'rotate', '--retire-in-hours', '1e10');
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('must be a positive number of hours, at most 8760 (a year)');
  });

  it('attempts names a survey without attempts that has no registration here (a mistyped id)', async () => {
    const result = await run(TSX, ['functions/cli/main.ts', 'attempts', '--survey', '9996'], {
      env: cliEnv(),
    });
    expect(result.stdout).toMatch(/no attempts at survey 9996 first seen on \d{4}-\d\d-\d\d \(UTC day\)/);
    expect(result.stderr).toContain('survey 9996 has no redirects registered here; check the id');
  });

  it('report takes --json as every command does, and names a survey it is asked for that has no registration here', async () => {
    const result = await run(TSX, ['functions/cli/main.ts', 'report', '--json', '--survey', '9997'], {
      env: cliEnv(),
    });
    expect(JSON.parse(result.stdout)).toMatchObject({ surveys: [] });
    expect(result.stderr).toContain('survey 9997 has no redirects registered here; its figures are zero');
  });

  it('report refuses a table or detail its output would not show, rather than ignore it', async () => {
    for (const [args, message] of [
      [
        ['--table', 'discrepancies'],
        '--table and --detail choose a CSV table: they go with --format csv, not json',
      ],
      [['--format', 'html', '--detail', 'totals'], 'they go with --format csv, not html'],
      [
        ['--format', 'csv', '--table', 'claims', '--detail', 'surveys'],
        '--detail is for the summary table, not --table claims',
      ],
    ] as const) {
      const failed = await run(TSX, ['functions/cli/main.ts', 'report', ...args], { env: cliEnv() }).then(
        () => undefined,
        (error: { stderr: string; code: number }) => error,
      );
      expect(failed?.code, args.join(' ')).toBe(1);
      expect(failed?.stderr).toContain(message);
    }
  });

  it('report lists the discrepancies found in other days than those filed (--found-from/--found-to), in CSV only', {
    timeout: 60_000,
  }, async () => {
    const documents = createDocumentClient({ endpoint: table.endpoint });
    const ledger = createLedgerStore(documents, table.tableName);
    const results = createReconciliationStore(documents, table.tableName);
    const day = '2026-10-20';
    for (const [token, recordedAt] of [
      ['f1', `${day}T23:00:00Z`],
      ['f2', '2026-11-10T20:00:00Z'],
    ] as const)
      await judgedPostback(
        { attempts: ledger, results },
        {
          surveyId: '9108',
          token,
          day,
          kind: 'invalidated',
          seenAt: new Date(`${day}T20:00:00Z`),
          recordedAt: new Date(recordedAt),
        },
      );
    const report = (...args: string[]) =>
      run(TSX, ['functions/cli/main.ts', 'report', '--from', day, '--to', day, ...args], { env: cliEnv() });
    const csv = (...extra: string[]) =>
      report('--survey', '9108', '--format', 'csv', '--table', 'discrepancies', ...extra);
    const all = await csv();
    expect(all.stdout).toContain(',f1,');
    expect(all.stdout).toContain(',f2,');
    const november = await csv('--found-from', '2026-11-01', '--found-to', '2026-11-30');
    expect(november.stdout).not.toContain(',f1,');
    expect(november.stdout).toContain(',f2,');
    for (const [args, message] of [
      [['--found-from', '2026-11-01'], '--found-to is missing'],
      [
        ['--found-from', '2026-11-30', '--found-to', '2026-11-01'],
        '--found-from must not be after --found-to',
      ],
    ] as const) {
      const failed = await csv(...args).then(
        () => undefined,
        (error: { stderr: string; code: number }) => error,
      );
      expect(failed?.code, args.join(' ')).toBe(1);
      expect(failed?.stderr).toContain(message);
    }
    const json = await report('--found-from', '2026-11-01', '--found-to', '2026-11-30').then(
      () => undefined,
      (error: { stderr: string; code: number }) => error,
    );
    expect(json?.stderr).toContain('--found-from and --found-to go with --format csv --table discrepancies');
  });

  it('report adds the CSV summary up by survey or in all as the days add up, each survey named once', {
    timeout: 60_000,
  }, async () => {
    const results = createReconciliationStore(
      createDocumentClient({ endpoint: table.endpoint }),
      table.tableName,
    );
    for (const [surveyId, day, owed] of [
      ['9111', '2026-10-21', '1.25'],
      ['9111', '2026-10-22', '0.005'],
      ['9112', '2026-10-22', '7.50'],
    ] as const)
      await results.putDaySummary(
        daySummary(surveyId, day, owed, '0.00', { matched: 2, invalidated: 1 }),
        new Date(`${day}T23:00:00Z`),
        'run-cli',
      );
    const csv = async (...detail: string[]) =>
      parse(
        (
          await run(
            TSX,
            [
              'functions/cli/main.ts',
              'report',
              '--from',
              '2026-10-21',
              '--to',
              '2026-10-22',
              '--survey',
              '9111',
              '--survey',
              '9112',
              '--survey',
              '9111',
              '--format',
              'csv',
              ...detail,
            ],
            { env: cliEnv() },
          )
        ).stdout,
        { columns: true },
      ) as Record<string, string>[];
    const days = await csv();
    expect(days.map((r) => [r.survey_id, r.day, r.owed])).toEqual([
      ['9111', '2026-10-21', '1.25'],
      ['9111', '2026-10-22', '0.005'],
      ['9112', '2026-10-22', '7.50'],
    ]);
    const surveys = await csv('--detail', 'surveys');
    expect(
      surveys.map((r) => [r.survey_id, r.day, r.owed, r.survey_days, r.discrepancies_invalidated]),
    ).toEqual([
      ['9111', '2026-10-21/2026-10-22', '1.255', '2', '2'],
      ['9112', '2026-10-21/2026-10-22', '7.50', '1', '1'],
    ]);
    const totals = await csv('--detail', 'totals');
    expect(totals.map((r) => [r.survey_id, r.owed, r.survey_days, r.valid_completes])).toEqual([
      ['all', '8.755', '3', '12'],
    ]);
  });

  it('health names a survey it is asked for that has no registration here, rather than calling it ok', async () => {
    const result = await run(TSX, ['functions/cli/main.ts', 'health', '--survey', '9998'], {
      env: cliEnv(),
    }).catch((error: { stdout: string; stderr: string }) => error);
    expect(result.stdout).toContain('9998         not watched: no redirects registered here');
    expect(result.stdout).not.toMatch(/9998\s+ok/);
    expect(result.stdout).toContain('0 ok, 0 warning, 0 failing');
    const json = await run(TSX, ['functions/cli/main.ts', 'health', '--survey', '9998', '--json'], {
      env: cliEnv(),
    });
    expect(JSON.parse(json.stdout)).toMatchObject({ surveys: [], notWatched: ['9998'] });
  });

  it('health counts a survey removed here in no state: shown as removed, not among the ok ones', async () => {
    const registry = createSurveyRegistry(
      createDocumentClient({ endpoint: table.endpoint }),
      table.tableName,
    );
    const at = new Date().toISOString();
    await registry.put({
      surveyId: '9221',
      state: 'removed',
      removedAt: at,
      verified: false,
      failures: 0,
      updatedAt: at,
    });
    const result = await run(TSX, ['functions/cli/main.ts', 'health', '--survey', '9221'], { env: cliEnv() });
    expect(result.stdout).toMatch(/9221\s+ok\s+since .*\(removed: no longer watched\)/);
    expect(result.stdout).toContain('0 ok, 0 warning, 0 failing; 1 removed, not watched');
  });

  it('reconcile refuses a survey it is asked for that has no registration here, unless forced (a mistyped id would show in finance)', async () => {
    const refused = await run(
      TSX,
      ['functions/cli/main.ts', 'reconcile', '--survey', '9999', '--survey', '9104', '--json'],
      { env: cliEnv() },
    ).catch((error: { stdout: string; stderr: string; code: number }) => error);
    expect(refused).toMatchObject({ code: 1 });
    expect(refused.stderr).toContain('survey 9999 has no redirects registered here (check the id; --force');
    expect(refused.stderr).not.toContain('9104');
    // Nothing was reconciled: no summary for the mistyped id.
    const results = createReconciliationStore(
      createDocumentClient({ endpoint: table.endpoint }),
      table.tableName,
    );
    expect(await results.summariesOf('9999', [pacificDay(new Date())])).toEqual([]);
    const forced = await run(
      TSX,
      ['functions/cli/main.ts', 'reconcile', '--survey', '9999', '--json', '--force'],
      { env: cliEnv() },
    ).catch((error: { stdout: string; stderr: string }) => error);
    expect(forced.stderr).toContain('survey 9999 has no redirects registered here; reconciling it anyway');
  });
});

describe('reconcile', () => {
  it('says when a day outside those asked for could not be read, and counts a token listed twice once', {
    timeout: 90_000,
  }, async () => {
    expect((await cli('redirects', 'apply', '--survey', '9105')).code).toBe(0);
    const today = pacificDay(new Date());
    const [earlier, later] = [nextDay(today, -6), nextDay(today, -3)];
    const clicked = (day: string) => new Date(pacificDayRange(day).start.getTime() + 10 * 3_600_000);
    const row = (day: string) => ({
      token: 'twice',
      PID: 'p-twice',
      status: 'Completed',
      CPI: '1.50',
      verifyToken: 'Valid',
      clkDateTime: formatPacificTime(clicked(day)),
    });
    const ledger = createLedgerStore(createDocumentClient({ endpoint: table.endpoint }), table.tableName);
    await ledger.recordHit(
      {
        channel: 'postback',
        surveyId: '9105',
        outcome: 'success',
        pid: 'p-twice',
        token: 'twice',
        source: 'query',
      },
      new Date(clicked(later).getTime() + 3_600_000),
    );
    listedRows.push({ created: earlier, row: row(earlier) });
    expect((await cli('reconcile', '--from', earlier, '--to', earlier, '--survey', '9105')).code).toBe(0);
    listedRows.push({ created: later, row: row(later) });
    failingDay = earlier;
    try {
      // A success: the day asked for is reconciled; what failed is said on standard error.
      const alone = await run(
        TSX,
        ['functions/cli/main.ts', 'reconcile', '--from', later, '--to', later, '--survey', '9105'],
        { env: cliEnv() },
      );
      expect(alone.stdout).toContain('survey 9105: 1 rows of a token listed twice counted once');
      expect(alone.stderr).toContain(
        `survey 9105: 1 listings of days outside ${later}..${later} failed (listing ${earlier} alone: `,
      );
    } finally {
      failingDay = undefined;
    }
  });

  it('says how many changed verdicts it does not show, and where they are', { timeout: 90_000 }, async () => {
    expect((await cli('redirects', 'apply', '--survey', '9224')).code).toBe(0);
    const day = nextDay(pacificDay(new Date()), -2);
    const clickedAt = new Date(pacificDayRange(day).start.getTime() + 10 * 3_600_000);
    const ledger = createLedgerStore(createDocumentClient({ endpoint: table.endpoint }), table.tableName);
    const rows = Array.from({ length: 25 }, (_, i) => ({
      created: day,
      row: {
        token: `batch-${i}`,
        PID: `p-batch-${i}`,
        status: 'Completed',
        CPI: '1.50',
        verifyToken: 'Valid',
        clkDateTime: formatPacificTime(clickedAt),
      },
    }));
    for (const { row } of rows)
      await ledger.recordHit(
        {
          channel: 'postback',
          surveyId: '9224',
          outcome: 'success',
          pid: row.PID,
          token: row.token,
          source: 'query',
        },
        new Date(clickedAt.getTime() + 600_000),
      );
    listedRows.push(...rows);
    try {
      expect((await cli('reconcile', '--from', day, '--to', day, '--survey', '9224')).code).toBe(0);
      // The buyer invalidates the batch.
      for (const { row } of rows) row.verifyToken = 'Invalid';
      const again = await cli('reconcile', '--from', day, '--to', day, '--survey', '9224');
      expect(again.stdout.match(/survey 9224 token batch-\d+: matched -> invalidated/g)).toHaveLength(20);
      expect(again.stdout).toContain(
        `survey 9224: 5 more changed verdicts not shown; its discrepancies as they stand: npm run cli -- report --from ${day} --to ${day} --survey 9224 --format csv --table discrepancies`,
      );
    } finally {
      for (const row of rows) listedRows.splice(listedRows.indexOf(row), 1);
    }
  });

  it('says which surveys it did not take up when the marketplace asks for no calls for a while, and fails', {
    timeout: 90_000,
  }, async () => {
    expect((await cli('redirects', 'apply', '--survey', '9106', '--survey', '9107')).code).toBe(0);
    refusingFor = 600;
    try {
      const refused = await cli('reconcile', '--survey', '9106', '--survey', '9107');
      expect(refused.code).toBe(1);
      expect(refused.stdout).toMatch(
        /2 of 2 surveys were not taken up \(the marketplace is refusing calls \(429\): none is made until \d{4}-\d\d-\d\dT[\d:.]+Z\): run the command again for them after then \(9106, 9107\)/,
      );
      expect(refused.stdout).not.toContain('could not be reconciled');
    } finally {
      refusingFor = undefined;
    }
  });
});
