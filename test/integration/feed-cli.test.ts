/**
 * The operator CLI on a table whose receivers leave the attempts the attempt feed covers out of the day index
 * (ledger/feed-coverage.ts): `attempts` lists them, `reconcile` judges them, as the scheduled runs would, and
 * `ledger index-attempts` puts them back for a feed turned off. The real CLI in processes of its own, against the
 * engine and a marketplace stand-in.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AttemptFeed, createAttemptFeed } from '../../functions/ledger/attempt-feed';
import { DEFAULT_FEED_LAG_SECONDS } from '../../functions/ledger/feed-keys';
import { attemptKey, utcDay } from '../../functions/ledger/ledger-schema';
import {
  createDocumentClient,
  createLedgerStore,
  createSurveyRegistry,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { formatPacificTime, pacificDay } from '../../functions/marketplace/pacific-time';
import type { Hit } from '../../functions/receiving/hit-request';
import { runCli } from '../support/cli';
import { appendAsItStands, freshTable } from '../support/ledger';

const SURVEY = '9201';
const HOUR = 3_600_000;
/** The attempts' first sightings: three hours ago, the feed begun two days before. */
const seenAt = new Date(Math.floor((Date.now() - 3 * HOUR) / 1000) * 1000);

let server: Server;
let url: string;
let table: { endpoint: string; tableName: string };
let client: ReturnType<typeof createDocumentClient>;
let feed: AttemptFeed;
let indexing: LedgerStore;

/** The marketplace lists one of the two attempts as a paid complete. */
const listed = () => ({
  ip: '203.0.113.9',
  verifyToken: 'Pending',
  termReason: '',
  CPI: '1.50',
  PID: 'p-paid',
  token: 'paid',
  st_date_time: formatPacificTime(new Date(seenAt.getTime() - 10 * 60_000)),
  clkDateTime: formatPacificTime(new Date(seenAt.getTime() - 10 * 60_000)),
  completeDateTime: formatPacificTime(seenAt),
  status: 'Completed',
  trackId: '00000000-0000-4000-8000-000000000001',
});

beforeAll(async () => {
  table = await freshTable();
  client = createDocumentClient({ endpoint: table.endpoint });
  feed = createAttemptFeed(client, table.tableName);
  indexing = createLedgerStore(client, table.tableName);
  server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://marketplace').pathname;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify(
        path.endsWith(`/getSurveyTransactions/${SURVEY}`)
          ? { apiStatus: 'success', msg: '1 transactions', result: [listed()] }
          : { apiStatus: 'Failure', msg: `No data found for survey: ${SURVEY}` },
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await createSurveyRegistry(client, table.tableName).put({
    surveyId: SURVEY,
    state: 'active',
    verified: true,
    failures: 0,
    expectedCpi: '1.50',
    cpiHistory: [{ cpi: '1.50', since: '' }],
    updatedAt: new Date().toISOString(),
  });
  // The feed began two days ago and its consumer has noted the probe; the receivers' hits since are in it alone.
  await feed.markStart(
    new Date(seenAt.getTime() - 48 * HOUR).toISOString(),
    'arn:aws:dynamodb:us-east-1:123456789012:table/l/stream/1',
  );
  const noted = new Date(Date.now() - 60_000).toISOString();
  await feed.touchProbe(noted);
  await feed.probeSeen(noted);
  const covered = createLedgerStore(client, table.tableName, undefined, { indexFree: () => true });
  for (const [pid, token] of [
    ['p-paid', 'paid'],
    ['p-unpaid', 'unpaid'],
  ] as const) {
    const hit: Hit = {
      channel: 'postback',
      surveyId: SURVEY,
      outcome: 'success',
      pid,
      token,
      source: 'query',
    };
    await covered.recordHit(hit, seenAt);
    // As the consumer writes it.
    const { Item } = await client.send(
      new GetCommand({ TableName: table.tableName, Key: attemptKey(SURVEY, pid, token) }),
    );
    expect(Item?.gsi1pk).toBeUndefined();
    await appendAsItStands(feed, Item ?? {}, `${seenAt.getTime()}${token.length}`);
  }
}, 60_000);
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const cliEnv = () => ({
  ...process.env,
  DYNAMODB_ENDPOINT: table.endpoint,
  TABLE_NAME: table.tableName,
  MARKETPLACE_BASE_URL: url,
  MARKETPLACE_ACCESS_TOKEN: 'feed-cli-token',
  SIGNING_KEYS: JSON.stringify({ current: 'k1', k1: 'first-signing-key-for-feed-cli-00000' }),
  PUBLIC_BASE_URL: 'https://hits.test',
  POWERTOOLS_LOG_LEVEL: 'ERROR',
  // As a deployed stack's readers are given it (the local stack's default is 5 s: its stream delivers every second).
  ATTEMPT_FEED_LAG_SECONDS: String(DEFAULT_FEED_LAG_SECONDS),
});
const cli = (...args: string[]) => runCli(args, cliEnv());

describe('the CLI on a table whose feed covers its attempts', () => {
  // Four CLI processes, each starting through tsx: seconds each on a loaded two-core machine.
  it('lists and reconciles the attempts the day index does not hold, and puts them back into it', {
    timeout: 120_000,
  }, async () => {
    const day = utcDay(seenAt.toISOString());
    const shown = await cli('attempts', '--survey', SURVEY, '--day', day, '--json');
    expect(shown.code).toBe(0);
    expect((JSON.parse(shown.stdout) as { token: string }[]).map((a) => a.token).sort()).toEqual([
      'paid',
      'unpaid',
    ]);
    // The health check as the scheduled one reads the feed: judged as of its lag ago.
    const health = await cli('health', '--survey', SURVEY, '--json');
    expect(health.code).toBe(0);
    const judged = JSON.parse(health.stdout) as { generatedAt: string; surveys: { surveyId: string }[] };
    expect(judged.surveys.map((s) => s.surveyId)).toEqual([SURVEY]);
    expect(Date.now() - Date.parse(judged.generatedAt)).toBeGreaterThan(400_000);
    // The Pacific day the attempts were seen on (three hours ago: yesterday's, in the first hours of a Pacific day).
    const reconciled = await cli(
      'reconcile',
      '--survey',
      SURVEY,
      '--from',
      pacificDay(seenAt),
      '--settle-seconds',
      '0',
      '--json',
    );
    expect(reconciled.code).toBe(0);
    const verdictOf = async (pid: string) =>
      (await indexing.attemptsOf(SURVEY, pid))[0]?.reconciliation?.verdict;
    expect(await verdictOf('p-paid')).toBe('matched');
    // The postback the marketplace does not list: judged only by a reader that sees it.
    expect(await verdictOf('p-unpaid')).toBe('complete_not_paid');
    expect(
      (await indexing.attemptsOfSurvey(SURVEY, new Date(`${day}T00:00:00.000Z`), new Date(Date.now() + HOUR)))
        .length,
    ).toBe(0);
    const reindexed = await cli('ledger', 'index-attempts', '--from', day, '--json');
    expect(JSON.parse(reindexed.stdout)).toEqual({ unindexed: 2, indexed: 2, replaced: 0 });
    expect(
      (await indexing.attemptsOfSurvey(SURVEY, new Date(`${day}T00:00:00.000Z`), new Date(Date.now() + HOUR)))
        .map((a) => a.token)
        .sort(),
    ).toEqual(['paid', 'unpaid']);
  });

  it('turned off (the table keeps no stream; its start mark stays): reconcile reads the attempt items, which the receivers index again', {
    timeout: 120_000,
  }, async () => {
    // A postback since the feed was turned off: indexed, in no feed. The marketplace does not list it.
    const late: Hit = {
      channel: 'postback',
      surveyId: SURVEY,
      outcome: 'success',
      pid: 'p-late',
      token: 'late',
      source: 'query',
    };
    await indexing.recordHit(late, new Date(seenAt.getTime() + 60_000));
    expect((await feed.state()).startedAt).toBeDefined();
    // Against AWS the CLI asks the table for its stream (the engine's table keeps none, as a table whose feed was
    // turned off): the start mark is then no feed's.
    const reconciled = await runCli(
      ['reconcile', '--survey', SURVEY, '--from', pacificDay(seenAt), '--settle-seconds', '0', '--json'],
      { ...cliEnv(), RECEIVER_TARGET: 'aws', AWS_REGION: 'us-east-1' },
    );
    expect(reconciled.code).toBe(0);
    expect((await indexing.attemptsOf(SURVEY, 'p-late'))[0]?.reconciliation?.verdict).toBe(
      'complete_not_paid',
    );
  });
});
