/**
 * Reconciliation's reads from the attempt feed (reconciliation/feed-attempts.ts), against the engine behind the
 * stream stand-in: every write of the real stores becomes a stream record, delivered to the real consumer. A survey's
 * window read from the feed is what the day index and the items give, verdicts and reconciliation's own items
 * included; each bucket-day is read once for all its surveys; before the feed's start the items are read.
 */
import { randomUUID } from 'node:crypto';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStreamConsumer } from '../../functions/feed/stream-consumer';
import {
  type AttemptFeed,
  createAttemptFeed,
  feedBucket,
  feedPartition,
} from '../../functions/ledger/attempt-feed';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  type LedgerStore,
  type ReconciliationStore,
} from '../../functions/ledger/ledger-store';
import type { Attempt } from '../../functions/receiving/attempt';
import type { Hit } from '../../functions/receiving/hit-request';
import { feedAttempts } from '../../functions/reconciliation/feed-attempts';
import type { AttemptVerdict } from '../../functions/reconciliation/verdict-rules';
import { startTableStream, type TableStream } from '../../infra/local/table-stream';
import { asFeedHolds, freshTable } from '../support/ledger';

let stream: TableStream;
let ledger: LedgerStore;
let results: ReconciliationStore;
let feed: AttemptFeed;
let tableName: string;
let clock = new Date('2026-11-20T10:00:00.000Z');
let delivered = 0;
const consume = () => createStreamConsumer({ feed });

beforeAll(async () => {
  const table = await freshTable();
  tableName = table.tableName;
  stream = await startTableStream({ engineEndpoint: table.endpoint, tableName: table.tableName });
  const client = createDocumentClient({ endpoint: stream.endpoint });
  ledger = createLedgerStore(client, table.tableName, () => clock);
  results = createReconciliationStore(client, table.tableName);
  feed = createAttemptFeed(createDocumentClient({ endpoint: table.endpoint }), table.tableName);
  await feed.markStart('2026-11-01T00:00:00.000Z', stream.arn);
  // The consumer has noted the feed's probe: readers trust it.
  await createAttemptFeed(client, table.tableName).touchProbe(new Date().toISOString());
});
afterAll(() => stream.stop());

/** The stream records of a new attempt's first hit (not yet delivered). */
async function hitChange() {
  await ledger.recordHit(
    hit(first as string, { pid: `p-${randomUUID().slice(0, 6)}`, token: randomUUID() }, 'redirect'),
    at('2026-11-20T14:00:00.000Z'),
  );
  const records = stream.records.slice(delivered);
  delivered = stream.records.length;
  return records;
}

/** Delivers every change so far to the consumer, as Lambda would (one batch). */
async function deliver() {
  const batch = stream.records.slice(delivered);
  delivered = stream.records.length;
  const result = await consume()({ Records: batch });
  expect(result.batchItemFailures).toEqual([]);
}

const hit = (surveyId: string, ids: { pid: string; token: string }, channel: Hit['channel']): Hit => ({
  channel,
  surveyId,
  outcome: 'success',
  ...ids,
  source: 'query',
});

const at = (iso: string) => {
  clock = new Date(iso);
  return clock;
};

const byToken = (attempts: readonly Attempt[]) =>
  [...attempts].map(asFeedHolds).sort((a, b) => a.token.localeCompare(b.token));

/** Surveys of one bucket, and one of another. */
const candidates = Array.from({ length: 200 }, (_, n) => String(8_600 + n));
const [first, second] = candidates.filter((s) => feedBucket(s) === feedBucket(candidates[0] as string));
const other = candidates.find((s) => feedBucket(s) !== feedBucket(candidates[0] as string)) as string;
const SURVEYS = [first, second, other] as string[];

const verdict = (
  surveyId: string,
  ids: { pid: string; token: string },
  kind: AttemptVerdict['verdict']['kind'],
  attempt?: Attempt,
  clickedAt?: string,
): AttemptVerdict => ({
  surveyId,
  ...ids,
  ...(attempt ? { attempt } : {}),
  verdict: {
    kind,
    day: '2026-11-19',
    detail: { status: 'Completed' },
    ...(clickedAt ? { marketplace: { status: 'Completed', cpi: '1.50', clickedAt } } : {}),
  },
});

/** A reader of the feed that lists each bucket-day it reads. */
function countingReader(
  options: Pick<Parameters<typeof feedAttempts>[0], 'feedLagMs' | 'now' | 'keptBucketDays'>,
) {
  const reads: string[] = [];
  const reader = feedAttempts({
    feed: {
      state: () => feed.state(),
      touchProbe: (at) => feed.touchProbe(at),
      recordsOfBucketDay: (day, bucket) => {
        reads.push(`${day}#${bucket}`);
        return feed.recordsOfBucketDay(day, bucket);
      },
    },
    items: ledger,
    ...options,
  });
  return { reader, reads };
}

describe("reconciliation's reads from the attempt feed", () => {
  const from = new Date('2026-11-19T08:00:00.000Z');
  const to = new Date('2026-11-21T08:00:00.000Z');

  beforeAll(async () => {
    for (const surveyId of SURVEYS) {
      // Two UTC days: an evening's attempts and the next morning's.
      for (const time of ['2026-11-19T22:00:00.000Z', '2026-11-20T09:00:00.000Z']) {
        const ids = { pid: `p-${randomUUID().slice(0, 6)}`, token: randomUUID() };
        await ledger.recordHit(hit(surveyId, ids, 'redirect'), at(time));
        await ledger.recordHit(hit(surveyId, ids, 'postback'), at(time));
      }
      const [judged, cleared] = await ledger.attemptsOfSurvey(surveyId, from, to);
      // A verdict on one attempt; another judged, then its verdict cleared (collapsed into another spelling).
      await results.recordVerdict(
        verdict(surveyId, judged as Attempt, 'matched', judged),
        at('2026-11-20T10:00:00Z'),
      );
      await results.recordVerdict(
        verdict(surveyId, cleared as Attempt, 'unverified_claim', cleared),
        at('2026-11-20T10:00:00Z'),
      );
      const [, clearedNow] = await ledger.attemptsOfSurvey(surveyId, from, to);
      expect(await results.clearVerdict(clearedNow as Attempt, at('2026-11-20T11:00:00Z'))).toBe(true);
      // Items reconciliation made for transactions nothing arrived for (filed by their click): one kept, one
      // retired since (matched with an attempt under another key).
      const made = { pid: 'p-made', token: `made-${surveyId}` };
      await results.recordVerdict(
        verdict(surveyId, made, 'complete_not_received', undefined, '2026-11-19T20:00:00.000Z'),
        at('2026-11-20T10:00:00Z'),
      );
      const gone = { pid: 'p-gone', token: `gone-${surveyId}` };
      await results.recordVerdict(
        verdict(surveyId, gone, 'complete_not_received', undefined, '2026-11-19T21:00:00.000Z'),
        at('2026-11-20T10:00:00Z'),
      );
      const [goneNow] = (await ledger.attemptsOfSurvey(surveyId, from, to)).filter(
        (a) => a.token === gone.token,
      );
      expect(await results.retireItem(goneNow as Attempt, at('2026-11-20T11:00:00Z'), 'superseded')).toBe(
        true,
      );
    }
    await deliver();
  });

  it('gives each survey its window as the day index and the items do, verdicts and made items included', async () => {
    const reader = feedAttempts({ feed, items: ledger, feedLagMs: 0 });
    for (const surveyId of SURVEYS) {
      const fromItems = await ledger.attemptsOfSurvey(surveyId, from, to);
      // Two attempts, the made item; not the retired one.
      expect(fromItems.map((a) => a.token).filter((t) => t.startsWith('gone-'))).toEqual([]);
      expect(fromItems).toHaveLength(3);
      expect(byToken(await reader.attemptsOfSurvey(surveyId, from, to))).toEqual(byToken(fromItems));
    }
    // A span inside a day: only what is filed in it.
    const evening = [new Date('2026-11-19T21:30:00.000Z'), new Date('2026-11-19T23:00:00.000Z')] as const;
    expect(byToken(await reader.attemptsOfSurvey(first as string, ...evening))).toEqual(
      byToken(await ledger.attemptsOfSurvey(first as string, ...evening)),
    );
  });

  it("reads each bucket's day once for all its surveys while fresh, again once older than the longest kept", async () => {
    let now = Date.parse('2026-11-20T12:00:00.000Z');
    const { reader, reads } = countingReader({ feedLagMs: 420_000, now: () => new Date(now) });
    expect(reader.lagMs).toBe(420_000 + 120_000);
    expect(reader.inReadOrder([other, first, second] as string[])).toEqual(
      feedBucket(other) < feedBucket(first as string) ? [other, first, second] : [first, second, other],
    );
    await reader.attemptsOfSurvey(first as string, from, to);
    await reader.attemptsOfSurvey(second as string, from, to);
    // The three UTC days the two Pacific days touch, of one bucket, each read once.
    expect(reads).toHaveLength(3);
    await reader.attemptsOfSurvey(other, from, to);
    expect(reads).toHaveLength(6);
    now += 121_000;
    await reader.attemptsOfSurvey(first as string, from, to);
    expect(reads).toHaveLength(9);
  });

  it("keeps two buckets' windows: every survey of a bucket reading a week's nine UTC days reads them once", async () => {
    const { reader, reads } = countingReader({
      feedLagMs: 0,
      now: () => new Date('2026-11-20T12:00:00.000Z'),
    });
    // Seven Pacific days and the hours around them, as a run's whole window is read.
    const week = [new Date('2026-11-14T06:00:00.000Z'), new Date('2026-11-22T08:00:00.000Z')] as const;
    for (const surveyId of [first, other, second, first, second] as string[])
      await reader.attemptsOfSurvey(surveyId, ...week);
    expect(reads).toHaveLength(18);
    expect(new Set(reads).size).toBe(18);
    // Room for one window only: the other bucket's reads push the first's out, which is read again.
    const bounded = countingReader({
      feedLagMs: 0,
      now: () => new Date('2026-11-20T12:00:00.000Z'),
      keptBucketDays: 9,
    });
    for (const surveyId of [first, other, second] as string[])
      await bounded.reader.attemptsOfSurvey(surveyId, ...week);
    expect(bounded.reads).toHaveLength(27);
  });

  it('reads a feed of the format before this one (no verdicts) as no feed: its start mark and items are not this format', async () => {
    const client = createDocumentClient({ endpoint: stream.endpoint });
    const table = (await freshTable()).tableName;
    await createLedgerStore(client, table).recordHit(
      hit('8700', { pid: 'p-old', token: 'old' }, 'postback'),
      new Date('2026-11-20T10:00:00.000Z'),
    );
    // The first release's start mark and one of its items.
    await client.send(
      new PutCommand({
        TableName: table,
        Item: { pk: 'FEED#START', sk: 'START', at: '2026-11-01T00:00:00.000Z', stream: stream.arn },
      }),
    );
    const older = createAttemptFeed(client, table);
    expect(await older.startedAt()).toBeUndefined();
    const reader = feedAttempts({ feed: older, items: createLedgerStore(client, table), feedLagMs: 0 });
    expect((await reader.attemptsOfSurvey('8700', from, to)).map((a) => a.token)).toEqual(['old']);
    expect(feedPartition('2026-11-20', 3)).toBe('FEED#v2#2026-11-20#3');
  });

  it("refreshes a verdict's facts only onto the verdict as read: one written since keeps its own", async () => {
    const ids = { pid: 'p-refresh', token: randomUUID() };
    await ledger.recordHit(hit(first as string, ids, 'postback'), at('2026-11-20T09:30:00.000Z'));
    const [read] = (await ledger.attemptsOf(first as string, ids.pid)) as Attempt[];
    const judged = verdict(first as string, ids, 'matched', read, '2026-11-20T09:20:00.000Z');
    expect(await results.recordVerdict(judged, at('2026-11-20T10:00:00.000Z'))).toBe('new');
    const [once] = (await ledger.attemptsOf(first as string, ids.pid)) as Attempt[];
    // Two runs read it judged; the later refreshes it first, the earlier one's refresh then finds it changed.
    // A fact a matched verdict keeps and writes when it changes: the row's completion time, filed anew.
    const facts = (completedAt: string) => ({
      ...judged,
      attempt: once,
      verdict: { ...judged.verdict, detail: { status: 'Completed', completedAt } },
    });
    expect(
      await results.recordVerdict(facts('2026-11-20T09:40:00.000Z'), at('2026-11-20T11:00:00.000Z')),
    ).toBe('refreshed');
    expect(
      await results.recordVerdict(facts('2026-11-20T09:35:00.000Z'), at('2026-11-20T11:00:01.000Z')),
    ).toBe('unchanged');
    const [now] = (await ledger.attemptsOf(first as string, ids.pid)) as Attempt[];
    expect(now?.reconciliation).toMatchObject({
      detail: { completedAt: '2026-11-20T09:40:00.000Z' },
      at: '2026-11-20T11:00:00.000Z',
    });
    // The feed has it too, for the tests after this one.
    await deliver();
  });

  it('reads the feed once the consumer has noted its probe, the items while a touch goes unseen for half an hour', async () => {
    let now = Date.parse('2026-11-20T12:00:00.000Z');
    const probe: { touchedAt?: string; seenAt?: string } = {};
    const touches: string[] = [];
    const behind: string[] = [];
    let feedReads = 0;
    const reader = feedAttempts({
      feed: {
        state: async () => ({ startedAt: '2026-11-01T00:00:00.000Z', ...probe }),
        touchProbe: async (at) => {
          touches.push(at);
          probe.touchedAt = at;
        },
        recordsOfBucketDay: (...args) => {
          feedReads++;
          return feed.recordsOfBucketDay(...args);
        },
      },
      items: ledger,
      feedLagMs: 0,
      now: () => new Date(now),
      onBehind: (touchedAt) => behind.push(touchedAt),
    });
    const read = async () => {
      feedReads = 0;
      const attempts = await reader.attemptsOfSurvey(first as string, from, to);
      expect(byToken(attempts)).toEqual(byToken(await ledger.attemptsOfSurvey(first as string, from, to)));
      return feedReads;
    };
    const hour = 3_600_000 + 120_000;
    // No touch noted yet: touched, and the items read; judged as of the tolerated lag.
    expect(await read()).toBe(0);
    expect(touches).toEqual(['2026-11-20T12:00:00.000Z']);
    expect((await reader.asOf(new Date(now))).getTime()).toBe(now - hour);
    // Noted: the feed is read, and touched again ten minutes on.
    probe.seenAt = probe.touchedAt;
    now += 11 * 60_000;
    expect(await read()).toBeGreaterThan(0);
    expect(touches).toEqual(['2026-11-20T12:00:00.000Z', '2026-11-20T12:11:00.000Z']);
    // Twenty minutes unseen: still the feed; the run judges as of the tolerated lag (the noted touch is later).
    now += 20 * 60_000;
    expect(await read()).toBeGreaterThan(0);
    expect((await reader.asOf(new Date(now))).getTime()).toBe(now - hour);
    // Forty minutes unseen: the consumer is behind. The attempts since the feed covers them are in it alone (the
    // receivers leave them out of the day index): not read, the survey's run fails; a span the items hold whole is
    // read from them.
    now += 20 * 60_000;
    await expect(reader.attemptsOfSurvey(first as string, from, to)).rejects.toThrow(
      /attempt feed is behind \(its probe, touched at 2026-11-20T12:11:00.000Z.*since 2026-11-01T01:00:00.000Z/,
    );
    expect(behind).toEqual(['2026-11-20T12:11:00.000Z']);
    feedReads = 0;
    const early = [new Date('2026-11-01T00:00:00.000Z'), new Date('2026-11-01T01:00:00.000Z')] as const;
    expect(await reader.attemptsOfSurvey(first as string, ...early)).toEqual([]);
    expect(feedReads).toBe(0);
    // A day on, still unseen (lost with a batch set aside): still not read, no touch until one is noted, and a run
    // judges as of the last touch noted.
    now += 25 * 3_600_000;
    await expect(reader.attemptsOfSurvey(first as string, from, to)).rejects.toThrow(
      /attempt feed is behind/,
    );
    expect(touches).toHaveLength(2);
    expect((await reader.asOf(new Date(now))).toISOString()).toBe('2026-11-20T12:00:00.000Z');
  });

  it("notes the probe's touch once the changes before it in the batch are written, never moving the note back", async () => {
    const readersFeed = createAttemptFeed(createDocumentClient({ endpoint: stream.endpoint }), tableName);
    const base = Date.now();
    const later = (minutes: number) => new Date(base + minutes * 60_000).toISOString();
    await readersFeed.touchProbe(later(60));
    await deliver();
    expect(await feed.state()).toMatchObject({ touchedAt: later(60), seenAt: later(60) });
    const seen = later(60);
    await feed.probeSeen(later(-60));
    expect((await feed.state()).seenAt).toBe(seen);
    const failing = createStreamConsumer({
      feed: {
        markStart: async () => {},
        append: async () => {
          throw new Error('injected');
        },
        probeSeen: (at) => feed.probeSeen(at),
      },
    });
    // A touch after a change whose group is not written: not noted (the batch is sent again from that change).
    const hitFirst = await hitChange();
    await readersFeed.touchProbe(later(120));
    const touchAfter = stream.records.slice(delivered);
    delivered = stream.records.length;
    expect((await failing({ Records: [...hitFirst, ...touchAfter] })).batchItemFailures).toHaveLength(1);
    expect((await feed.state()).seenAt).toBe(seen);
    // A touch before it: noted, since Lambda keeps everything before the batch's first failure as done.
    await readersFeed.touchProbe(later(180));
    const touchBefore = stream.records.slice(delivered);
    delivered = stream.records.length;
    const hitAfter = await hitChange();
    const failed = await failing({ Records: [...touchBefore, ...hitAfter] });
    expect(failed.batchItemFailures).toEqual([{ itemIdentifier: hitAfter[0]?.dynamodb?.SequenceNumber }]);
    expect((await feed.state()).seenAt).toBe(later(180));
  });

  it('reads the items for a span the feed does not hold whole, until its probe is noted', async () => {
    let read = 0;
    const reader = feedAttempts({
      feed: {
        state: async () => ({ startedAt: '2026-11-20T00:00:00.000Z', touchedAt: '2026-11-20T10:00:00.000Z' }),
        touchProbe: async () => {},
        recordsOfBucketDay: (...args) => {
          read++;
          return feed.recordsOfBucketDay(...args);
        },
      },
      items: ledger,
      feedLagMs: 0,
    });
    // (Attempts first seen in the same millisecond come in either order.)
    expect(byToken(await reader.attemptsOfSurvey(first as string, from, to))).toEqual(
      byToken(await ledger.attemptsOfSurvey(first as string, from, to)),
    );
    expect(read).toBe(0);
  });

  it('reads a span that starts before the feed did from the items up to when the feed covers it, the feed after', async () => {
    const reads: string[] = [];
    const startedAt = '2026-11-20T00:00:00.000Z';
    const feedOf = (client: ReturnType<typeof createDocumentClient>) => createAttemptFeed(client, tableName);
    const reader = feedAttempts({
      feed: {
        state: async () => ({ ...(await feed.state()), startedAt }),
        touchProbe: async () => {},
        recordsOfBucketDay: (...args) => {
          reads.push(args[0]);
          return feed.recordsOfBucketDay(...args);
        },
      },
      items: ledger,
      feedLagMs: 0,
    });
    // An attempt first seen after the feed covered it, which its hit left out of the day index (of a survey whose
    // changes the tests before all delivered).
    const client = createDocumentClient({ endpoint: stream.endpoint });
    const covered = createLedgerStore(client, tableName, () => clock, { indexFree: () => true });
    const ids = { pid: 'p-covered', token: randomUUID() };
    await covered.recordHit(hit(second as string, ids, 'postback'), at('2026-11-20T09:30:00.000Z'));
    await deliver();
    expect((await feedOf(client).state()).seenAt).toBeDefined();
    const fromItems = await ledger.attemptsOfSurvey(second as string, from, to);
    expect(fromItems.map((a) => a.token)).not.toContain(ids.token);
    const read = await reader.attemptsOfSurvey(second as string, from, to);
    // What the items list, and the attempt the feed alone holds.
    expect(byToken(read)).toEqual(
      byToken([...fromItems, ...(await ledger.attemptsOf(second as string, ids.pid))]),
    );
    // The feed read for the days from its start's hour on only.
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.every((day) => day >= '2026-11-20')).toBe(true);
  });
});
