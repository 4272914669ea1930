/**
 * Upgrading a table an earlier release wrote: the backfill moves attempts indexed under the day-wide partition to
 * their survey's partition, every reader finds the same attempts before and after, and once the backfill has
 * reached today the readers stop querying the day-wide partitions.
 */
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { firstHitItem } from '../../functions/ledger/attempt-store';
import {
  attemptDayPartition,
  attemptDayShard,
  attemptKey,
  DAY_INDEX_SHARDS,
} from '../../functions/ledger/ledger-schema';
import {
  createDayIndexBackfill,
  createDocumentClient,
  createLedgerStore,
} from '../../functions/ledger/ledger-store';
import { type EngineProxy, startEngineProxy } from '../support/engine-proxy';
import { freshTable } from '../support/ledger';

let proxy: EngineProxy;
let documents: ReturnType<typeof createDocumentClient>;
let table: string;
const readers = () => createLedgerStore(createDocumentClient({ endpoint: proxy.endpoint }), table);

/** An attempt as the earlier release indexed it: gsi1pk ATTEMPTS#<day>, gsi1sk <survey>#<first seen>. */
async function legacyAttempt(surveyId: string, token: string, at: string) {
  const hit = {
    channel: 'postback',
    surveyId,
    outcome: 'success',
    pid: `p-${token}`,
    token,
    source: 'query',
  } as const;
  await documents.send(
    new PutCommand({
      TableName: table,
      Item: {
        ...firstHitItem(hit, new Date(at)),
        gsi1pk: `ATTEMPTS#${at.slice(0, 10)}`,
        gsi1sk: `${surveyId}#${at}`,
      },
    }),
  );
}

const day = (d: string) => ({ from: new Date(`${d}T00:00:00.000Z`), to: new Date(`${d}T23:59:59.999Z`) });
const tokens = async (surveyId: string, d: string) =>
  (await readers().attemptsOfSurvey(surveyId, day(d).from, day(d).to)).map((a) => a.token);

beforeAll(async () => {
  const { endpoint, tableName } = await freshTable();
  proxy = await startEngineProxy(endpoint);
  documents = createDocumentClient({ endpoint });
  table = tableName;
  await legacyAttempt('801', 'a', '2026-11-18T09:00:00.000Z');
  await legacyAttempt('801', 'b', '2026-11-19T09:00:00.000Z');
  await legacyAttempt('802', 'c', '2026-11-19T10:00:00.000Z');
  await readers().recordHit(
    { channel: 'redirect', surveyId: '801', outcome: 'success', pid: 'p-d', token: 'd', source: 'query' },
    new Date('2026-11-19T11:00:00.000Z'),
  );
});

describe('day index backfill', () => {
  it('a dry run counts what would move and changes nothing', async () => {
    const report = await createDayIndexBackfill(documents, table).run({
      from: '2026-11-17',
      to: '2026-11-20',
      dryRun: true,
      now: () => new Date('2026-11-20T12:00:00.000Z'),
    });
    expect(report).toMatchObject({ days: 4, moved: 3, alreadyMoved: 0, checkpointed: false });
    const { Item } = await documents.send(
      new GetCommand({ TableName: table, Key: attemptKey('802', 'p-c', 'c') }),
    );
    expect(Item?.gsi1pk).toBe('ATTEMPTS#2026-11-19');
  });

  it('a run short of today moves its days but leaves the readers reading both partitions', async () => {
    const report = await createDayIndexBackfill(documents, table).run({
      from: '2026-11-18',
      to: '2026-11-18',
      now: () => new Date('2026-11-20T12:00:00.000Z'),
    });
    expect(report).toMatchObject({ moved: 1, checkpointed: false });
    expect(await tokens('801', '2026-11-18')).toEqual(['a']);
    expect(await tokens('801', '2026-11-19')).toEqual(['b', 'd']);
  });

  it('moves every attempt to its survey partition, and the readers then query only those', async () => {
    const before = { a: await tokens('801', '2026-11-19'), c: await tokens('802', '2026-11-19') };
    const report = await createDayIndexBackfill(documents, table).run({
      from: '2026-11-17',
      to: '2026-11-20',
      now: () => new Date('2026-11-20T12:00:00.000Z'),
    });
    expect(report).toMatchObject({ days: 4, moved: 2, unrecognised: 0, checkpointed: true });
    const { Item } = await documents.send(
      new GetCommand({ TableName: table, Key: attemptKey('802', 'p-c', 'c') }),
    );
    expect(Item).toMatchObject({
      gsi1pk: attemptDayPartition('802', '2026-11-19', attemptDayShard(attemptKey('802', 'p-c', 'c').sk)),
      gsi1sk: '2026-11-19T10:00:00.000Z',
    });

    proxy.operations.length = 0;
    const store = readers();
    expect(await tokens('801', '2026-11-19')).toEqual(before.a);
    expect(await tokens('802', '2026-11-19')).toEqual(before.c);
    expect(
      (await store.attemptsByToken('801', 'a', day('2026-11-18').from, day('2026-11-18').to))[0]?.pid,
    ).toBe('p-a');
    // One query per partition of a survey's day, its four shards (and one read of the checkpoint per store), no
    // day-wide query; by token, its own shard and shard 0 at most.
    const queries = proxy.operations.filter((op) => op === 'Query').length;
    const byToken = attemptDayShard(attemptKey('801', 'p-a', 'a').sk) === 0 ? 1 : 2;
    expect(queries).toBe(2 * DAY_INDEX_SHARDS + byToken);
  });

  it('running again moves nothing and keeps the readers right', async () => {
    const report = await createDayIndexBackfill(documents, table).run({
      from: '2026-11-17',
      to: '2026-11-20',
      now: () => new Date('2026-11-20T13:00:00.000Z'),
    });
    expect(report).toMatchObject({ moved: 0, checkpointed: true });
    expect(await tokens('801', '2026-11-19')).toEqual(['b', 'd']);
  });
});

describe('the scheduled backfill (run after each redirect sync)', () => {
  it('moves, then waits for two quiet looks an hour apart before telling the readers', async () => {
    const { endpoint, tableName } = await freshTable();
    const client = createDocumentClient({ endpoint });
    const backfill = createDayIndexBackfill(client, tableName);
    const put = (token: string, at: string) =>
      client.send(
        new PutCommand({
          TableName: tableName,
          Item: {
            ...firstHitItem(
              {
                channel: 'postback',
                surveyId: '811',
                outcome: 'success',
                pid: `p-${token}`,
                token,
                source: 'query',
              },
              new Date(at),
            ),
            gsi1pk: `ATTEMPTS#${at.slice(0, 10)}`,
            gsi1sk: `811#${at}`,
          },
        }),
      );
    await put('x', '2026-11-10T09:00:00.000Z');
    const at = (iso: string) => ({ now: () => new Date(iso) });

    expect(await backfill.settle(at('2026-11-20T10:00:00.000Z'))).toEqual({ moved: 1, checkpointed: false });
    expect(await backfill.settle(at('2026-11-20T10:15:00.000Z'))).toEqual({
      moved: 0,
      quietSince: '2026-11-20T10:15:00.000Z',
      checkpointed: false,
    });
    // A receiver of the earlier release, still running during the rollout, writes one more: the quiet restarts.
    await put('y', '2026-11-20T10:20:00.000Z');
    expect(await backfill.settle(at('2026-11-20T11:30:00.000Z'))).toEqual({ moved: 1, checkpointed: false });
    expect(await backfill.settle(at('2026-11-20T11:45:00.000Z'))).toMatchObject({ checkpointed: false });
    expect(await backfill.settle(at('2026-11-20T12:45:00.000Z'))).toMatchObject({ checkpointed: true });
    expect(await backfill.settle(at('2026-11-20T13:00:00.000Z'))).toBe('done');

    const store = createLedgerStore(client, tableName);
    const window = { from: new Date('2026-11-10T00:00:00.000Z'), to: new Date('2026-11-21T00:00:00.000Z') };
    expect((await store.attemptsOfSurvey('811', window.from, window.to)).map((a) => a.token)).toEqual([
      'x',
      'y',
    ]);
  });
});

describe('an attempt the earlier release indexed, not yet backfilled', () => {
  it('a drained hit made before its first sighting moves it to the day it was made, in the new layout', async () => {
    const { endpoint, tableName } = await freshTable();
    const client = createDocumentClient({ endpoint });
    const postback = {
      channel: 'postback',
      surveyId: '821',
      outcome: 'success',
      pid: 'p-early',
      token: 'early',
      source: 'query',
    } as const;
    const seen = '2026-11-19T01:37:00.000Z';
    await client.send(
      new PutCommand({
        TableName: tableName,
        Item: {
          ...firstHitItem(postback, new Date(seen)),
          gsi1pk: `ATTEMPTS#${seen.slice(0, 10)}`,
          gsi1sk: `821#${seen}`,
        },
      }),
    );
    // Its redirect, made the evening before and held in the buffer while the ledger was down, drained now.
    const store = createLedgerStore(client, tableName, () => new Date('2026-11-19T02:00:00.000Z'));
    const made = new Date('2026-11-18T23:50:00.000Z');
    await store.recordBufferedHit({ ...postback, channel: 'redirect' }, made, 'buffer-early');
    const { Item } = await client.send(
      new GetCommand({ TableName: tableName, Key: attemptKey('821', 'p-early', 'early') }),
    );
    expect(Item).toMatchObject({ firstSeenAt: made.toISOString(), gsi1sk: made.toISOString() });
    const listed = (from: string, to: string) =>
      store.attemptsOfSurvey('821', new Date(from), new Date(to)).then((all) => all.map((a) => a.token));
    expect(await listed('2026-11-18T00:00:00.000Z', '2026-11-18T23:59:59.999Z')).toEqual(['early']);
    expect(await listed('2026-11-19T00:00:00.000Z', '2026-11-19T23:59:59.999Z')).toEqual([]);
  });
});
