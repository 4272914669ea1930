/**
 * The day index left off the hit path where the attempt feed covers it (ledger/feed-coverage.ts), against the
 * engine: when the receivers find the feed covering, what a hit writes then, what reconciliation's verdict keeps, and
 * the look-ups that go through the index (ledger/attempt-lookup.ts) finding such attempts in the feed.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { finance } from '../../functions/finance/finance-queries';
import { DEFAULT_HEALTH_SETTINGS } from '../../functions/health/health-rules';
import { feedWindow, readSurveyWindow } from '../../functions/health/health-window';
import { type AttemptFeed, createAttemptFeed } from '../../functions/ledger/attempt-feed';
import { feedAwareLookups } from '../../functions/ledger/attempt-lookup';
import { createAttemptReindex } from '../../functions/ledger/attempt-reindex';
import { feedCoverage } from '../../functions/ledger/feed-coverage';
import { FEED_ONLY_AFTER_MS } from '../../functions/ledger/feed-keys';
import { attemptDayKey, attemptKey } from '../../functions/ledger/ledger-schema';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import type { Attempt } from '../../functions/receiving/attempt';
import type { Hit } from '../../functions/receiving/hit-request';
import { appendAsItStands, freshTable } from '../support/ledger';

const STREAM = 'arn:aws:dynamodb:us-east-1:123456789012:table/ledger/stream/1';
const STARTED = '2026-11-20T06:00:00.000Z';
/** An hour after the start: attempts first seen from then on may be in the feed alone. */
const COVERED = '2026-11-20T07:00:00.000Z';

let client: ReturnType<typeof createDocumentClient>;
let tableName: string;
let feed: AttemptFeed;
/** The hit path of a container that indexes every attempt, and of one that found the feed covering. */
let indexing: LedgerStore;
let covered: LedgerStore;

beforeEach(async () => {
  const table = await freshTable();
  tableName = table.tableName;
  client = createDocumentClient({ endpoint: table.endpoint });
  feed = createAttemptFeed(client, tableName);
  indexing = createLedgerStore(client, tableName);
  covered = createLedgerStore(client, tableName, undefined, {
    indexFree: (at) => at.getTime() >= Date.parse(COVERED),
  });
});

/** A receiver container with the feed on that has not found it covering yet. */
const unknowing = () => createLedgerStore(client, tableName, undefined, { indexFree: () => false });

const hit = (token: string, channel: Hit['channel'] = 'postback', surveyId = '8801'): Hit => ({
  channel,
  surveyId,
  outcome: 'success',
  pid: `p-${token}`,
  token,
  source: 'query',
});

const itemOf = async (token: string, surveyId = '8801') =>
  (
    await client.send(
      new GetCommand({
        TableName: tableName,
        Key: attemptKey(surveyId, `p-${token}`, token),
        ConsistentRead: true,
      }),
    )
  ).Item;

/** The feed as its consumer would write it: each attempt's item as it stands now, under its filing day. */
async function fedAsItStands(tokens: readonly string[], surveyId = '8801') {
  for (const token of tokens) await appendAsItStands(feed, (await itemOf(token, surveyId)) ?? {});
}

const day = (iso: string) => [new Date(`${iso}T00:00:00.000Z`), new Date(`${iso}T23:59:59.999Z`)] as const;

describe('whether the attempt feed covers a hit', () => {
  it('not before the feed has a start mark and its consumer has noted the probe; then from an hour after the start', async () => {
    let now = Date.parse('2026-11-20T08:00:00.000Z');
    const coverage = feedCoverage(client, tableName, { now: () => new Date(now), recheckMs: 60_000 });
    await coverage.settled();
    expect(coverage.covers(new Date(now))).toBe(false);
    await feed.markStart(STARTED, STREAM);
    now += 30_000;
    expect(coverage.covers(new Date(now))).toBe(false);
    await coverage.settled();
    // Read again only after `recheckMs`: still without the probe's note.
    now += 60_000;
    expect(coverage.covers(new Date(now))).toBe(false);
    await coverage.settled();
    expect(coverage.covers(new Date(now))).toBe(false);
    await feed.probeSeen('2026-11-20T07:50:00.000Z');
    now += 60_000;
    expect(coverage.covers(new Date(now))).toBe(false);
    await coverage.settled();
    expect(coverage.covers(new Date(now))).toBe(true);
    expect(coverage.covers(new Date(Date.parse(STARTED) + FEED_ONLY_AFTER_MS))).toBe(true);
    expect(coverage.covers(new Date(Date.parse(STARTED) + FEED_ONLY_AFTER_MS - 1))).toBe(false);
  });

  it("not on a start and note an earlier stream left (the feed turned off and on again) until this stream's own", async () => {
    const OLD = STREAM;
    const NEW = 'arn:aws:dynamodb:us-east-1:123456789012:table/ledger/stream/2';
    await feed.markStart(STARTED, OLD);
    await feed.probeSeen('2026-11-20T07:50:00.000Z', OLD);
    const at = new Date('2026-11-22T12:00:00.000Z');
    const coverageOf = async (stream?: string) => {
      const coverage = feedCoverage(client, tableName, stream ? { stream } : {});
      await coverage.settled();
      return coverage.covers(at);
    };
    // Deployed again with the stream on: the earlier stream's mark and note are still there.
    expect(await coverageOf(NEW)).toBe(false);
    expect(await coverageOf(OLD)).toBe(true);
    // This stream's consumer marks its start: the earlier note is not this feed's, for readers too.
    await feed.markStart('2026-11-22T09:00:00.000Z', NEW);
    expect((await feed.state()).seenAt).toBeUndefined();
    expect(await coverageOf(NEW)).toBe(false);
    expect(await coverageOf()).toBe(false);
    // Noted by this stream's consumer (its touch earlier than the earlier stream's note): covered from its start.
    await feed.probeSeen('2026-11-20T07:00:00.000Z', NEW);
    expect((await feed.state()).seenAt).toBe('2026-11-20T07:00:00.000Z');
    expect(await coverageOf(NEW)).toBe(true);
    const coverage = feedCoverage(client, tableName, { stream: NEW });
    await coverage.settled();
    expect(coverage.covers(new Date('2026-11-22T09:59:59.999Z'))).toBe(false);
    expect(coverage.covers(new Date('2026-11-22T10:00:00.000Z'))).toBe(true);
  });

  it('indexes every attempt while the read fails, and reads again after `recheckMs`', async () => {
    await feed.markStart(STARTED, STREAM);
    await feed.probeSeen('2026-11-20T07:50:00.000Z');
    const failing = createDocumentClient({ endpoint: 'http://127.0.0.1:9' });
    const mock = mockClient(failing);
    mock
      .on(GetCommand)
      .rejectsOnce(new Error('injected'))
      .callsFake((input) => client.send(new GetCommand(input)));
    let now = Date.parse('2026-11-20T09:00:00.000Z');
    const coverage = feedCoverage(failing, tableName, { now: () => new Date(now), recheckMs: 60_000 });
    await coverage.settled();
    expect(coverage.covers(new Date(now))).toBe(false);
    now += 61_000;
    coverage.covers(new Date(now));
    await coverage.settled();
    expect(coverage.covers(new Date(now))).toBe(true);
    mock.restore();
  });
});

describe('a hit the feed covers', () => {
  it('leaves its attempt out of the day index; one before the feed covers is indexed as always', async () => {
    await covered.recordHit(hit('early'), new Date('2026-11-20T06:30:00.000Z'));
    await covered.recordHit(hit('late'), new Date('2026-11-20T07:30:00.000Z'));
    expect(await itemOf('early')).toMatchObject({ gsi1sk: '2026-11-20T06:30:00.000Z' });
    const late = await itemOf('late');
    expect(late).toMatchObject({ firstSeenAt: '2026-11-20T07:30:00.000Z' });
    expect(late?.gsi1pk).toBeUndefined();
    expect(late?.gsi1sk).toBeUndefined();
    expect((await indexing.attemptsOfSurvey('8801', ...day('2026-11-20'))).map((a) => a.token)).toEqual([
      'early',
    ]);
  });

  it('stays out when a later hit comes through a container that does not know yet', async () => {
    await covered.recordHit(hit('late'), new Date('2026-11-20T07:30:00.000Z'));
    const recorded = await unknowing().recordHit(
      hit('late', 'redirect'),
      new Date('2026-11-20T07:40:00.000Z'),
    );
    expect(recorded.attempt.redirect?.outcome).toBe('success');
    const item = await itemOf('late');
    expect(item?.gsi1sk).toBeUndefined();
    expect(item).toMatchObject({ firstSeenAt: '2026-11-20T07:30:00.000Z', redirectOutcome: 'success' });
  });

  it('enters the index when a hit drained from the buffer moves its first sighting to before the feed covered', async () => {
    await covered.recordHit(hit('drained', 'redirect'), new Date('2026-11-20T07:30:00.000Z'));
    expect((await itemOf('drained'))?.gsi1sk).toBeUndefined();
    // Its postback, made during an outage that began before the feed covered, drained later.
    expect(
      await covered.recordBufferedHit(hit('drained'), new Date('2026-11-20T06:40:00.000Z'), 'buffered-1'),
    ).toBe(true);
    expect(await itemOf('drained')).toMatchObject({
      firstSeenAt: '2026-11-20T06:40:00.000Z',
      gsi1sk: '2026-11-20T06:40:00.000Z',
    });
    expect((await indexing.attemptsOfSurvey('8801', ...day('2026-11-20'))).map((a) => a.token)).toEqual([
      'drained',
    ]);
    // One a later hit indexed by its own time (a container that did not know yet; caught before it took the
    // entry out again): the drained hit moves the entry with the first sighting.
    await covered.recordHit(hit('caught', 'redirect'), new Date('2026-11-20T07:30:00.000Z'));
    await client.send(
      new UpdateCommand({
        TableName: tableName,
        Key: attemptKey('8801', 'p-caught', 'caught'),
        UpdateExpression: 'SET gsi1pk = :pk, gsi1sk = :sk',
        ExpressionAttributeValues: {
          ':pk': attemptDayKey('8801', 'TOKEN#caught', '2026-11-20T07:40:00.000Z').gsi1pk,
          ':sk': '2026-11-20T07:40:00.000Z',
        },
      }),
    );
    await covered.recordBufferedHit(hit('caught'), new Date('2026-11-20T06:45:00.000Z'), 'buffered-3');
    expect(await itemOf('caught')).toMatchObject({
      firstSeenAt: '2026-11-20T06:45:00.000Z',
      gsi1sk: '2026-11-20T06:45:00.000Z',
    });
    // One made after the feed covered, drained through a container that does not know yet: left out.
    await covered.recordHit(hit('drained-late', 'redirect'), new Date('2026-11-20T07:30:00.000Z'));
    expect(
      await unknowing().recordBufferedHit(
        hit('drained-late'),
        new Date('2026-11-20T07:35:00.000Z'),
        'buffered-2',
      ),
    ).toBe(true);
    expect((await itemOf('drained-late'))?.gsi1sk).toBeUndefined();
  });

  it('keeps it out when reconciliation judges it; an item reconciliation makes goes in by its click', async () => {
    const results = createReconciliationStore(client, tableName);
    const { attempt } = await covered.recordHit(hit('late'), new Date('2026-11-20T07:30:00.000Z'));
    const judged = (ids: { pid: string; token: string }, read?: Attempt) => ({
      surveyId: '8801',
      ...ids,
      ...(read ? { attempt: read } : {}),
      verdict: {
        kind: read ? ('matched' as const) : ('complete_not_received' as const),
        day: '2026-11-19',
        detail: { status: 'Completed' },
        marketplace: { status: 'Completed', cpi: '1.50', clickedAt: '2026-11-20T07:20:00.000Z' },
      },
    });
    expect(await results.recordVerdict(judged(attempt, attempt), new Date('2026-11-20T09:00:00.000Z'))).toBe(
      'new',
    );
    const item = await itemOf('late');
    expect(item).toMatchObject({ verdict: 'matched' });
    expect(item?.gsi1sk).toBeUndefined();
    expect(
      await results.recordVerdict(
        judged({ pid: 'p-made', token: 'made' }),
        new Date('2026-11-20T09:00:00.000Z'),
      ),
    ).toBe('new');
    expect(await itemOf('made')).toMatchObject({ gsi1sk: '2026-11-20T07:20:00.000Z' });
  });
});

describe('look-ups through the day index, on a table whose feed covers', () => {
  let lookups: ReturnType<typeof feedAwareLookups>;
  beforeEach(async () => {
    lookups = feedAwareLookups(indexing, feed);
    await covered.recordHit(hit('early'), new Date('2026-11-20T06:30:00.000Z'));
    await covered.recordHit(hit('late'), new Date('2026-11-20T07:30:00.000Z'));
    await covered.recordHit(hit('next-day'), new Date('2026-11-21T10:00:00.000Z'));
    await covered.recordHit(hit('other', 'postback', '8802'), new Date('2026-11-21T10:00:00.000Z'));
  });

  it('reads the index alone while the feed has not started (or its probe was never noted)', async () => {
    await fedAsItStands(['late', 'next-day']);
    expect((await lookups.attemptsOfSurvey('8801', ...day('2026-11-20'))).map((a) => a.token)).toEqual([
      'early',
    ]);
    await feed.markStart(STARTED, STREAM);
    expect((await lookups.attemptsByToken('8801', 'late', ...day('2026-11-20')))[0]).toBeUndefined();
  });

  it("lists a day's attempts from both, and finds them by token in the feed too", async () => {
    await feed.markStart(STARTED, STREAM);
    await feed.probeSeen('2026-11-20T07:50:00.000Z');
    await fedAsItStands(['early', 'late', 'next-day']);
    await fedAsItStands(['other'], '8802');
    expect((await lookups.attemptsOfSurvey('8801', ...day('2026-11-20'))).map((a) => a.token).sort()).toEqual(
      ['early', 'late'],
    );
    // A span before the feed covers: the index alone.
    expect(
      (await lookups.attemptsOfSurvey('8801', new Date('2026-11-20T00:00:00.000Z'), new Date(COVERED))).map(
        (a) => a.token,
      ),
    ).toEqual(['early']);
    const week = [new Date('2026-11-15T00:00:00.000Z'), new Date('2026-11-22T00:00:00.000Z')] as const;
    // Read from its item as it stands (more than the feed may have held).
    await covered.recordHit(hit('late', 'redirect'), new Date('2026-11-21T11:00:00.000Z'));
    expect((await lookups.attemptsByToken('8801', 'late', ...week))[0]).toMatchObject({
      token: 'late',
      redirect: { outcome: 'success' },
      postback: { outcome: 'success' },
    });
    expect((await lookups.attemptsByToken('8801', 'early', ...week))[0]).toMatchObject({ token: 'early' });
    expect((await lookups.attemptsByToken('8801', 'other', ...week))[0]).toBeUndefined();
    expect((await lookups.attemptsByToken('8802', 'other', ...week))[0]).toMatchObject({ surveyId: '8802' });
    expect((await lookups.attemptsByToken('8801', 'next-day', ...day('2026-11-20')))[0]).toBeUndefined();
    // Every attempt of a token, from the index and from the feed alike.
    expect((await lookups.attemptsByToken('8801', 'late', ...week)).map((a) => a.token)).toEqual(['late']);
    expect((await lookups.attemptsByToken('8801', 'early', ...week)).map((a) => a.token)).toEqual(['early']);
    expect(await lookups.attemptsByToken('8801', 'other', ...week)).toEqual([]);
  });
  it('say when the feed is behind: an attempt first seen since is in neither, and finance says why it finds none', async () => {
    await feed.markStart(STARTED, STREAM);
    await feed.touchProbe('2026-11-20T07:50:00.000Z');
    await feed.probeSeen('2026-11-20T07:50:00.000Z');
    expect(await lookups.feedBehindSince()).toBeUndefined();
    // The consumer stops: the probe touched 40 minutes ago goes unseen.
    await feed.touchProbe(new Date(Date.now() - 40 * 60_000).toISOString());
    expect(await lookups.feedBehindSince()).toBe('2026-11-20T07:50:00.000Z');
    await covered.recordHit(hit('stalled'), new Date(Date.now() - 20 * 60_000));
    const recent = [new Date(Date.now() - 86_400_000), new Date(Date.now() + 60_000)] as const;
    expect(await lookups.attemptsByToken('8801', 'stalled', ...recent)).toEqual([]);
    const queries = finance({
      attempts: { ...indexing, ...lookups },
      results: createReconciliationStore(client, tableName),
    });
    await expect(queries.attempts('8801', { token: 'stalled' })).rejects.toMatchObject({
      status: 404,
      message: expect.stringContaining(
        'the attempt feed is behind (its consumer has noted nothing since 2026-11-20T07:50:00.000Z)',
      ),
    });
    // By pid it is found; a token nothing holds while the feed keeps up is simply not found.
    expect((await queries.attempts('8801', { pid: 'p-stalled' })).map((a) => a.token)).toEqual(['stalled']);
    await feed.probeSeen(new Date(Date.now() - 40 * 60_000).toISOString());
    expect(await lookups.feedBehindSince()).toBeUndefined();
  });
});

describe("the health check's window read from the items the first hours after the feed began", () => {
  it('takes the attempts the feed alone holds from it, each attempt once', async () => {
    await covered.recordHit(hit('early'), new Date('2026-11-20T06:30:00.000Z'));
    await covered.recordHit(hit('late'), new Date('2026-11-20T07:30:00.000Z'));
    // Indexed though the feed covered it (a container that did not know yet): in both.
    await unknowing().recordHit(hit('both'), new Date('2026-11-20T07:20:00.000Z'));
    await fedAsItStands(['early', 'late', 'both']);
    const now = new Date('2026-11-20T07:45:00.000Z');
    const read = (feedAfter?: ReturnType<typeof feedWindow>) =>
      readSurveyWindow(indexing, {
        surveyId: '8801',
        // A window of an hour and a half: it starts before the feed did, so the items are read.
        settings: { ...DEFAULT_HEALTH_SETTINGS, windowMinutes: 90 },
        now,
        refused: new Map(),
        ...(feedAfter ? { feedAfter } : {}),
      });
    expect((await read()).attempts.map((a) => a.pid).sort()).toEqual(['p-both', 'p-early']);
    const window = await read(feedWindow(feed, new Date(COVERED), now));
    expect(window.attempts.map((a) => a.pid).sort()).toEqual(['p-both', 'p-early', 'p-late']);
  });
});

describe('turning the feed off: `ledger index-attempts`', () => {
  it('puts the attempts the receivers left out back into the day index, by their first sighting', async () => {
    await covered.recordHit(hit('early'), new Date('2026-11-20T06:30:00.000Z'));
    await covered.recordHit(hit('late'), new Date('2026-11-20T07:30:00.000Z'));
    await covered.recordHit(hit('next-day', 'redirect'), new Date('2026-11-21T10:00:00.000Z'));
    await covered.recordHit(hit('before', 'redirect'), new Date('2026-11-19T23:30:00.000Z'));
    const reindex = createAttemptReindex(client, tableName);
    const listed = async () =>
      (
        await indexing.attemptsOfSurvey(
          '8801',
          new Date('2026-11-19T00:00:00.000Z'),
          new Date('2026-11-22T00:00:00.000Z'),
        )
      ).map((a) => a.token);
    expect(await listed()).toEqual(['before', 'early']);
    expect(await reindex.run({ from: '2026-11-20', dryRun: true, pageSize: 2 })).toEqual({
      unindexed: 2,
      indexed: 0,
      replaced: 0,
    });
    expect(await listed()).toEqual(['before', 'early']);
    expect(await reindex.run({ from: '2026-11-20', pageSize: 2 })).toEqual({
      unindexed: 2,
      indexed: 2,
      replaced: 0,
    });
    expect(await listed()).toEqual(['before', 'early', 'late', 'next-day']);
    expect(await itemOf('next-day')).toMatchObject({ gsi1sk: '2026-11-21T10:00:00.000Z' });
    expect(await reindex.run({ from: '2026-11-20' })).toEqual({ unindexed: 0, indexed: 0, replaced: 0 });
  });

  it('a hit after the feed is off indexes an attempt left out by its own time; index-attempts moves it to its first sighting', async () => {
    await covered.recordHit(hit('late'), new Date('2026-11-20T07:30:00.000Z'));
    await indexing.recordHit(hit('late', 'redirect'), new Date('2026-11-21T08:00:00.000Z'));
    expect(await itemOf('late')).toMatchObject({ gsi1sk: '2026-11-21T08:00:00.000Z' });
    // An item reconciliation made, placed by its click, later than a hit's first sighting (clocks apart): left.
    const results = createReconciliationStore(client, tableName);
    await results.recordVerdict(
      {
        surveyId: '8801',
        pid: 'p-made',
        token: 'made',
        verdict: {
          kind: 'complete_not_received',
          day: '2026-11-20',
          detail: { status: 'Completed' },
          marketplace: { status: 'Completed', cpi: '1.50', clickedAt: '2026-11-20T09:00:00.000Z' },
        },
      },
      new Date('2026-11-20T10:00:00.000Z'),
    );
    await indexing.recordHit(hit('made'), new Date('2026-11-20T08:59:00.000Z'));
    const reindex = createAttemptReindex(client, tableName);
    expect(await reindex.run({})).toEqual({ unindexed: 0, indexed: 0, replaced: 1 });
    expect(await itemOf('late')).toMatchObject({
      gsi1sk: '2026-11-20T07:30:00.000Z',
      gsi1pk: attemptDayKey('8801', 'TOKEN#late', '2026-11-20T07:30:00.000Z').gsi1pk,
    });
    expect(await itemOf('made')).toMatchObject({ gsi1sk: '2026-11-20T09:00:00.000Z' });
  });
});
