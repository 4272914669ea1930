/**
 * Reading the ledger back through the day index, across UTC day boundaries, without scans.
 */
import { createHash } from 'node:crypto';
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  firstHitItem,
  MAX_BUFFERED_IDS,
  POSTBACK_ID_SLOTS,
  REDIRECT_ID_SLOTS,
} from '../../functions/ledger/attempt-store';
import {
  attemptDayPartition,
  attemptDayShard,
  attemptKey,
  DAY_FLAG_PREFIX,
  DAY_INDEX_SHARDS,
  dayFlagsKey,
  outsidersKey,
} from '../../functions/ledger/ledger-schema';
import {
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { pacificDayRange } from '../../functions/marketplace/pacific-time';
import { type EngineProxy, startEngineProxy } from '../support/engine-proxy';
import { freshTable } from '../support/ledger';

let store: LedgerStore;
let proxy: EngineProxy;
let documents: ReturnType<typeof createDocumentClient>;
let table: string;

beforeAll(async () => {
  const { endpoint, tableName } = await freshTable();
  proxy = await startEngineProxy(endpoint);
  documents = createDocumentClient({ endpoint });
  table = tableName;
  store = createLedgerStore(createDocumentClient({ endpoint: proxy.endpoint }), tableName);
  const hit = (surveyId: string, token: string, at: string) =>
    store.recordHit(
      { channel: 'postback', surveyId, outcome: 'success', pid: `p-${token}`, token, source: 'query' },
      new Date(at),
    );
  await hit('700', 'a', '2026-11-21T07:59:59.000Z'); // Pacific Nov 20
  await hit('700', 'b', '2026-11-21T08:00:00.000Z'); // Pacific Nov 21 begins
  await hit('700', 'c', '2026-11-21T23:59:59.999Z');
  await hit('700', 'd', '2026-11-22T07:59:59.999Z'); // Pacific Nov 21 ends
  await hit('700', 'e', '2026-11-22T08:00:00.000Z'); // Pacific Nov 22
  await hit('7000', 'f', '2026-11-21T12:00:00.000Z'); // another survey whose id shares the prefix
  await hit('70', 'g', '2026-11-21T12:00:00.000Z');
});

describe('attempts of a survey over a window', () => {
  it('a Pacific day spans two UTC day partitions and returns exactly its attempts, oldest first', async () => {
    const { start, end } = pacificDayRange('2026-11-21');
    const attempts = await store.attemptsOfSurvey('700', start, end);
    expect(attempts.map((a) => a.token)).toEqual(['b', 'c', 'd']);
  });

  it('never mixes in surveys whose ids share a prefix', async () => {
    const attempts = await store.attemptsOfSurvey(
      '700',
      new Date('2026-11-21T00:00:00Z'),
      new Date('2026-11-23T00:00:00Z'),
    );
    expect(attempts.map((a) => a.surveyId)).toEqual(['700', '700', '700', '700', '700']);
  });

  it('uses the index and batch reads, never a scan', async () => {
    const start = proxy.operations.length;
    await store.attemptsOfSurvey('700', new Date('2026-11-21T00:00:00Z'), new Date('2026-11-23T00:00:00Z'));
    const used = new Set(proxy.operations.slice(start));
    expect(used).toEqual(new Set(['Query', 'BatchGetItem']));
  });

  it('an empty window reads nothing back', async () => {
    expect(
      await store.attemptsOfSurvey('700', new Date('2026-12-01T00:00:00Z'), new Date('2026-12-02T00:00:00Z')),
    ).toEqual([]);
  });
});

describe('buffered hits', () => {
  it('remember at most MAX_BUFFERED_IDS digests, every distinct one counted, each repeat refused', async () => {
    const hit = {
      channel: 'redirect',
      surveyId: '701',
      outcome: 'success',
      pid: 'p-buffered',
      token: 't-buffered',
      source: 'query',
    } as const;
    const at = new Date('2026-11-21T12:00:00.000Z');
    const ids = Array.from({ length: MAX_BUFFERED_IDS + 4 }, (_, i) => `buffer-message-${i}`);
    for (const id of ids) expect(await store.recordBufferedHit(hit, at, id)).toBe(true);
    // Replays of remembered ids change nothing.
    for (const id of ids.slice(0, MAX_BUFFERED_IDS))
      expect(await store.recordBufferedHit(hit, at, id)).toBe(false);
    const { Item } = await documents.send(
      new GetCommand({ TableName: table, Key: attemptKey('701', 'p-buffered', 't-buffered') }),
    );
    expect((Item?.bufferedIds as Set<string> | undefined)?.size).toBe(MAX_BUFFERED_IDS);
    expect((await store.attemptsOf('701', 'p-buffered'))[0]?.redirect?.hits).toBe(ids.length);
  });

  it('a buffered hit made before the outcome standing takes its place: the first outcome by when it was made stands', async () => {
    const postback = (outcome: 'success' | 'fail') =>
      ({
        channel: 'postback',
        surveyId: '702',
        outcome,
        pid: 'p-order',
        token: 't-order',
        source: 'query',
      }) as const;
    // The fail postback was acknowledged into the buffer during an outage; a success for the same attempt was
    // written live before the buffer drained.
    const failMade = new Date('2026-11-21T12:00:00.000Z');
    await store.recordHit(postback('success'), new Date('2026-11-21T12:05:00.000Z'), 'live-request');
    expect(await store.recordBufferedHit(postback('fail'), failMade, 'buffered-request')).toBe(true);
    const [attempt] = await store.attemptsOf('702', 'p-order');
    expect(attempt?.postback).toMatchObject({
      outcome: 'fail',
      conflict: true,
      firstAt: failMade.toISOString(),
    });
    expect(attempt?.complete).not.toBe('postback-confirmed');
    // A buffered hit made after the standing one changes nothing but its sighting.
    await store.recordHit(postback('fail'), new Date('2026-11-21T13:00:00.000Z'), 'live-2');
    expect(
      await store.recordBufferedHit(postback('success'), new Date('2026-11-21T14:00:00.000Z'), 'buffered-2'),
    ).toBe(true);
    expect((await store.attemptsOf('702', 'p-order'))[0]?.postback?.outcome).toBe('fail');
  });

  it('a drained hit records when the ledger learned of it; a repeat after it does not move that', async () => {
    const hit = {
      channel: 'postback',
      surveyId: '704',
      outcome: 'success',
      pid: 'p-drained',
      token: 'drained',
      source: 'query',
    } as const;
    const made = new Date(Date.UTC(2026, 10, 21, 12, 0));
    const before = Date.now();
    expect(await store.recordBufferedHit(hit, made, 'buffer-drained')).toBe(true);
    const [drained] = await store.attemptsOf('704', 'p-drained');
    expect(drained?.postback?.firstAt).toBe(made.toISOString());
    expect(Date.parse(drained?.drainedAt ?? '')).toBeGreaterThanOrEqual(before - 1000);
    await store.recordHit(hit, new Date(), 'live-repeat');
    expect((await store.attemptsOf('704', 'p-drained'))[0]?.drainedAt).toBe(drained?.drainedAt);
  });

  it('a drained hit made before the attempt was first seen takes it back to then, day index and all', async () => {
    const hit = (channel: 'redirect' | 'postback', token: string) =>
      ({ channel, surveyId: '705', outcome: 'success', pid: `p-${token}`, token, source: 'query' }) as const;
    const firstDay = { from: new Date('2026-06-10T00:00:00Z'), to: new Date('2026-06-11T00:00:00Z') };
    const nextDay = { from: new Date('2026-06-11T00:00:00Z'), to: new Date('2026-06-12T00:00:00Z') };
    const tokensOn = async (day: { from: Date; to: Date }) =>
      (await store.attemptsOfSurvey('705', day.from, day.to)).map((a) => a.token).sort();
    // The redirect, made at 23:59:30, waits out an outage in the buffer; the postback is written live after midnight.
    const made = new Date('2026-06-10T23:59:30.000Z');
    await store.recordHit(hit('postback', 'across'), new Date('2026-06-11T00:00:30.000Z'), 'live');
    expect(await store.recordBufferedHit(hit('redirect', 'across'), made, 'drained')).toBe(true);
    // Another attempt's postback drained after its retry was written live: the retry's time is not its first.
    await store.recordHit(hit('postback', 'retried'), new Date('2026-06-11T00:02:00.000Z'), 'retry');
    expect(await store.recordBufferedHit(hit('postback', 'retried'), made, 'first-copy')).toBe(true);
    for (const token of ['across', 'retried']) {
      const [attempt] = await store.attemptsOf('705', `p-${token}`);
      expect(attempt?.firstSeenAt, token).toBe(made.toISOString());
    }
    expect(await tokensOn(firstDay)).toEqual(['across', 'retried']);
    expect(await tokensOn(nextDay)).toEqual([]);
    // A drained hit made after the first sighting moves nothing.
    expect(
      await store.recordBufferedHit(hit('postback', 'across'), new Date('2026-06-11T01:00:00Z'), 'later'),
    ).toBe(true);
    expect((await store.attemptsOf('705', 'p-across'))[0]?.firstSeenAt).toBe(made.toISOString());
  });

  it('an attempt judged on the day it was first seen, moved back a day by a drained hit: the day it moved to is flagged', async () => {
    const hit = (channel: 'redirect' | 'postback') =>
      ({
        channel,
        surveyId: '706',
        outcome: 'success',
        pid: 'p-moved',
        token: 't-moved',
        source: 'query',
      }) as const;
    // The redirect written live at 02:05 PDT on 06-11 and judged there; the postback made at 23:55 PDT on 06-10
    // drains after the outage.
    const { attempt } = await store.recordHit(hit('redirect'), new Date('2026-06-11T09:05:00.000Z'), 'live');
    await createReconciliationStore(documents, table).recordVerdict(
      {
        surveyId: '706',
        pid: 'p-moved',
        token: 't-moved',
        verdict: { kind: 'unverified_claim', day: '2026-06-11', detail: {} },
        attempt,
      },
      new Date('2026-06-12T00:00:00.000Z'),
    );
    expect(
      await store.recordBufferedHit(hit('postback'), new Date('2026-06-11T06:55:00.000Z'), 'drained'),
    ).toBe(true);
    const { Item } = await documents.send(new GetCommand({ TableName: table, Key: dayFlagsKey('706') }));
    // The day its verdict stands on (left), and the day it now belongs to, for their next runs.
    expect(
      Object.keys(Item ?? {})
        .filter((name) => name.startsWith(DAY_FLAG_PREFIX))
        .sort(),
    ).toEqual([`${DAY_FLAG_PREFIX}2026-06-10`, `${DAY_FLAG_PREFIX}2026-06-11`]);
  });

  it('two buffered hits made before the standing one, drained in either order: the first made stands', async () => {
    const postback = (outcome: 'success' | 'fail', token: string) =>
      ({ channel: 'postback', surveyId: '703', outcome, pid: `p-${token}`, token, source: 'query' }) as const;
    const at = (minute: number) => new Date(Date.UTC(2026, 10, 21, 12, minute));
    // A success made at 12:00 and a fail at 12:02, both buffered in an outage; a success written live at 12:05.
    for (const [token, order] of [
      ['success-first', ['success', 'fail']],
      ['fail-first', ['fail', 'success']],
    ] as const) {
      await store.recordHit(postback('success', token), at(5), `${token}-live`);
      for (const outcome of order)
        expect(
          await store.recordBufferedHit(
            postback(outcome, token),
            at(outcome === 'success' ? 0 : 2),
            `${token}-${outcome}`,
          ),
        ).toBe(true);
      const [attempt] = await store.attemptsOf('703', `p-${token}`);
      expect(attempt?.postback, token).toMatchObject({ outcome: 'success', firstAt: at(0).toISOString() });
      expect(attempt?.complete, token).toBe('postback-confirmed');
    }
  });
});

describe('index writes', () => {
  // dynalite reports no index write units, so the product's side is checked instead: DynamoDB writes a
  // keys-only index only when an item's index key attributes change, and a later hit never changes them.
  it('a later hit on an attempt leaves its index keys exactly as the first hit wrote them', async () => {
    const hit = {
      channel: 'postback',
      surveyId: '702',
      outcome: 'success',
      pid: 'p-index #%',
      token: 't-index',
      source: 'query',
    } as const;
    const indexKeys = async () => {
      const { Item = {} } = await documents.send(
        new GetCommand({ TableName: table, Key: attemptKey('702', hit.pid, hit.token) }),
      );
      return { gsi1pk: Item.gsi1pk, gsi1sk: Item.gsi1sk, gsi2pk: Item.gsi2pk, gsi2sk: Item.gsi2sk };
    };
    await store.recordHit(hit, new Date('2026-11-21T12:00:00.000Z'));
    const first = await indexKeys();
    const shard = attemptDayShard(attemptKey('702', hit.pid, hit.token).sk);
    expect(first).toMatchObject({
      gsi1pk: attemptDayPartition('702', '2026-11-21', shard),
      gsi1sk: '2026-11-21T12:00:00.000Z',
    });
    await store.recordHit(hit, new Date('2026-11-23T12:00:00.000Z'));
    await store.recordHit({ ...hit, channel: 'redirect' }, new Date('2026-11-23T12:00:01.000Z'));
    expect(await indexKeys()).toEqual(first);
  });
});

describe('day index spread and the layout before it', () => {
  it('new attempts of many surveys spread over one index partition per survey and day', async () => {
    const written = new Map<string, number>();
    const write = async (i: number) => {
      const surveyId = String(800 + (i % 50));
      await store.recordHit(
        {
          channel: 'redirect',
          surveyId,
          outcome: 'success',
          pid: `p-spread-${i}`,
          token: `s-${i}`,
          source: 'query',
        },
        new Date('2026-11-21T12:00:00.000Z'),
      );
      const { Item = {} } = await documents.send(
        new GetCommand({ TableName: table, Key: attemptKey(surveyId, `p-spread-${i}`, `s-${i}`) }),
      );
      written.set(String(Item.gsi1pk), (written.get(String(Item.gsi1pk)) ?? 0) + 1);
    };
    // Twenty at a time: a loaded machine took longer than a test may for 2,000 requests one after another.
    for (let i = 0; i < 1000; i += 20) {
      await Promise.all(Array.from({ length: 20 }, (_, k) => write(i + k)));
    }
    // Before, all 1,000 went to ATTEMPTS#2026-11-21: one partition took every new attempt of the day; then one
    // per survey and day (50 of 20); now up to four per survey and day.
    expect(written.size).toBeGreaterThan(150);
    expect(written.size).toBeLessThanOrEqual(50 * DAY_INDEX_SHARDS);
    expect(Math.max(...written.values())).toBeLessThan(20);
    for (const partition of written.keys()) expect(partition).toMatch(/^ATTEMPTS#2026-11-21#8\d\d(#[123])?$/);
    // Each survey's reader still finds exactly its own attempts.
    const window = { from: new Date('2026-11-21T00:00:00.000Z'), to: new Date('2026-11-22T00:00:00.000Z') };
    expect(await store.attemptsOfSurvey('807', window.from, window.to)).toHaveLength(20);
  }, 60_000);

  it("one survey's launch spreads its new attempts over its day's four partitions", async () => {
    const shares = new Array<number>(DAY_INDEX_SHARDS).fill(0);
    for (let i = 0; i < 10_000; i++) {
      const token = `${(i * 2654435761) % 2 ** 32}`.padStart(10, '0');
      const shard = attemptDayShard(attemptKey('900', `p-${i}`, token).sk);
      shares[shard] = (shares[shard] ?? 0) + 1;
    }
    // A partition takes about 1,000 index writes a second: the survey's day now takes about four times that.
    for (const share of shares) expect(share / 10_000).toBeLessThan(0.3);
    for (const share of shares) expect(share / 10_000).toBeGreaterThan(0.2);
  });

  it('attempts indexed under the day-wide partition of an earlier release are still found by every reader', async () => {
    const at = '2026-11-19T10:00:00.000Z';
    // An attempt as the earlier release wrote it: gsi1pk ATTEMPTS#<day>, gsi1sk <survey>#<first seen>.
    await documents.send(
      new PutCommand({
        TableName: table,
        Item: {
          ...firstHitItem(
            {
              channel: 'postback',
              surveyId: '703',
              outcome: 'success',
              pid: 'p-old',
              token: 't-old',
              source: 'query',
            },
            new Date(at),
          ),
          gsi1pk: 'ATTEMPTS#2026-11-19',
          gsi1sk: `703#${at}`,
        },
      }),
    );
    await store.recordHit(
      {
        channel: 'postback',
        surveyId: '703',
        outcome: 'success',
        pid: 'p-new',
        token: 't-new',
        source: 'query',
      },
      new Date('2026-11-19T11:00:00.000Z'),
    );
    const from = new Date('2026-11-19T00:00:00.000Z');
    const to = new Date('2026-11-20T00:00:00.000Z');
    expect((await store.attemptsOfSurvey('703', from, to)).map((a) => a.token)).toEqual(['t-old', 't-new']);
    expect((await store.attemptsByToken('703', 't-old', from, to))[0]?.pid).toBe('p-old');
    expect((await store.attemptsByToken('703', 't-new', from, to))[0]?.pid).toBe('p-new');
    // A later hit on the old attempt keeps its old index keys (they never change) and it stays found.
    await store.recordHit(
      {
        channel: 'redirect',
        surveyId: '703',
        outcome: 'success',
        pid: 'p-old',
        token: 't-old',
        source: 'query',
      },
      new Date('2026-11-19T12:00:00.000Z'),
    );
    expect((await store.attemptsOfSurvey('703', from, to)).map((a) => a.token)).toEqual(['t-old', 't-new']);
  });
});

describe('redirect request ids', () => {
  const redirectHit = (token: string) =>
    ({
      channel: 'redirect',
      surveyId: '701',
      outcome: 'success',
      pid: `p-${token}`,
      token,
      source: 'query',
    }) as const;
  const slotOf = (id: string) =>
    (createHash('sha256').update(id).digest('base64url').codePointAt(0) as number) % REDIRECT_ID_SLOTS;
  /** Request ids whose digests fall in distinct slots (or in the same slot). */
  function ids(sameSlot: boolean): [string, string] {
    const first = 'req-a';
    for (let i = 0; ; i++) {
      const other = `req-b${i}`;
      if ((slotOf(other) === slotOf(first)) === sameSlot) return [first, other];
    }
  }
  const read = async (token: string) =>
    (await documents.send(new GetCommand({ TableName: table, Key: attemptKey('701', `p-${token}`, token) })))
      .Item ?? {};
  const at = new Date('2026-11-21T12:00:00.000Z');

  it('a retried redirect whose answer was lost is not counted again after another request of it came between', async () => {
    const [a, b] = ids(false);
    const hit = redirectHit('slots');
    await store.recordHit(hit, at, a); // applied, its answer lost
    await store.recordHit(hit, at, b); // the respondent reloads
    await store.recordHit(hit, at, a); // the SDK retries the first
    await store.recordHit(hit, at, b);
    expect((await read('slots')).redirect_success_hits).toBe(2);
    // The item stays bounded: one remembered id per slot, however often the URL is repeated.
    for (let i = 0; i < 20; i++) await store.recordHit(hit, at, `reload-${i}`);
    const after = await read('slots');
    expect(after.redirect_success_hits).toBe(22);
    expect(Object.keys(after).filter((k) => k.startsWith('redirectId')).length).toBeLessThanOrEqual(
      REDIRECT_ID_SLOTS,
    );
  });

  it('a postback repeated without end leaves its item bounded, and a retried write is still counted once', async () => {
    const hit = { ...redirectHit('postback-flood'), channel: 'postback' } as const;
    await store.recordHit(hit, at, 'pb-a');
    await store.recordHit(hit, at, 'pb-a');
    for (let i = 0; i < 200; i++) await store.recordHit(hit, at, `pb-retry-${i}`);
    const item = await read('postback-flood');
    expect(item.postback_success_hits).toBe(201);
    expect(Object.keys(item).filter((k) => k.startsWith('postbackId')).length).toBeLessThanOrEqual(
      POSTBACK_ID_SLOTS,
    );
    expect(item.postbackHitIds).toBeUndefined();
    expect(JSON.stringify(item).length).toBeLessThan(1024);
  });

  it('a postback retried across the upgrade is refused by the id set an earlier release kept', async () => {
    const hit = { ...redirectHit('before-slots'), channel: 'postback' } as const;
    await store.recordHit(hit, at, 'pb-other');
    // What the earlier release left on the item: every postback id's digest in a string set.
    const digest = createHash('sha256').update('pb-before').digest('base64url').slice(0, 8);
    await documents.send(
      new UpdateCommand({
        TableName: table,
        Key: attemptKey('701', 'p-before-slots', 'before-slots'),
        UpdateExpression: 'ADD postbackHitIds :ids',
        ExpressionAttributeValues: { ':ids': new Set([digest]) },
      }),
    );
    await store.recordHit(hit, at, 'pb-before'); // applied by the earlier release, its answer lost
    expect((await read('before-slots')).postback_success_hits).toBe(1);
    await store.recordHit(hit, at, 'pb-next');
    expect((await read('before-slots')).postback_success_hits).toBe(2);
  });

  it('the remaining bound: when both requests fall in one slot, the retry counts again', async () => {
    const [a, b] = ids(true);
    const hit = redirectHit('same-slot');
    await store.recordHit(hit, at, a);
    await store.recordHit(hit, at, b);
    await store.recordHit(hit, at, a);
    expect((await read('same-slot')).redirect_success_hits).toBe(3);
  });
});

describe("a day's outsiders", () => {
  it('thousands of them (postbacks re-sent after a day-long outage) are each kept, beside those an earlier release kept in one item', async () => {
    const results = createReconciliationStore(documents, table);
    const day = '2026-10-05';
    // UUID-like pids and hex tokens: 6,000 of them took the one item an earlier release kept past 400 KB.
    const keys = Array.from({ length: 6_000 }, (_, i) => {
      const digest = createHash('sha256').update(String(i)).digest('hex');
      return {
        pid: `${digest.slice(0, 8)}-${digest.slice(8, 12)}-${digest.slice(12, 16)}-${digest.slice(16, 20)}-${digest.slice(20, 32)}`,
        token: digest.slice(32, 64),
      };
    });
    await results.addOutsiders('7101', day, keys.slice(0, 3_500));
    await results.addOutsiders('7101', day, keys.slice(3_000));
    // As an earlier release wrote them: one item of the day, a set of [pid, token].
    await documents.send(
      new UpdateCommand({
        TableName: table,
        Key: outsidersKey('7101', day),
        UpdateExpression: 'SET kind = :kind, surveyId = :surveyId, #day = :day ADD #keys :keys',
        ExpressionAttributeNames: { '#day': 'day', '#keys': 'keys' },
        ExpressionAttributeValues: {
          ':kind': 'outsiders',
          ':surveyId': '7101',
          ':day': day,
          ':keys': new Set([
            JSON.stringify(['before-1', 'tok-1']),
            JSON.stringify([keys[0]?.pid, keys[0]?.token]),
          ]),
        },
      }),
    );
    // Another day's and another survey's are not this day's.
    await results.addOutsiders('7101', '2026-10-06', [{ pid: 'next-day', token: 't' }]);
    await results.addOutsiders('71011', day, [{ pid: 'other-survey', token: 't' }]);
    const found = await results.outsidersOf('7101', [day, '2026-10-06', '2026-10-07']);
    const ofDay = found.get(day) ?? [];
    expect(ofDay).toHaveLength(6_001);
    expect(new Set(ofDay.map(({ pid, token }) => `${pid} ${token}`))).toEqual(
      new Set([...keys, { pid: 'before-1', token: 'tok-1' }].map(({ pid, token }) => `${pid} ${token}`)),
    );
    expect(found.get('2026-10-06')).toEqual([{ pid: 'next-day', token: 't' }]);
    expect(found.has('2026-10-07')).toBe(false);
  });
});
