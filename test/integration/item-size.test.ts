/**
 * An attempt must fit one DynamoDB write unit (1 KB) for the hits that happen every day, so each hit costs one
 * write unit. Measured on the item the engine actually holds, with DynamoDB's size rules.
 */
import { randomUUID } from 'node:crypto';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { attemptKey, discrepancyIndexKey, rejectedKey } from '../../functions/ledger/ledger-schema';
import {
  createDocumentClient,
  createLedgerStore,
  firstHitItem,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import type { Hit } from '../../functions/receiving/hit-request';
import {
  ONE_UNIT_PID_BYTES,
  ONE_UNIT_TOKEN_BYTES,
  PID_MAX_BYTES,
  TOKEN_MAX_BYTES,
} from '../../functions/receiving/identifiers';
import type { Outcome } from '../../functions/receiving/outcome';
import { itemSize } from '../support/item-size';
import { freshTable } from '../support/ledger';

let store: LedgerStore;
let client: ReturnType<typeof createDocumentClient>;
let tableName: string;

beforeAll(async () => {
  const table = await freshTable();
  tableName = table.tableName;
  client = createDocumentClient({ endpoint: table.endpoint });
  store = createLedgerStore(client, tableName);
});

async function sizeAfter(
  ids: { surveyId: string; pid: string; token: string },
  hits: [Hit['channel'], Outcome][],
) {
  for (const [channel, outcome] of hits) {
    // As the receivers write it: with the request's id, which the item remembers against double counting.
    await store.recordHit({ ...ids, channel, outcome, source: 'json' }, new Date(), randomUUID());
  }
  const { Item } = await client.send(
    new GetCommand({ TableName: tableName, Key: attemptKey(ids.surveyId, ids.pid, ids.token) }),
  );
  const size = itemSize(Item ?? {});
  if (process.env.PRINT_ITEM_SIZES) console.log(`${ids.pid.slice(0, 8)}: ${size} bytes`);
  return size;
}

describe('attempt item size', () => {
  it('a redirect and a postback with a UUID token fit one write unit with room to spare', async () => {
    const size = await sizeAfter(
      { surveyId: '12345678', pid: 'panel-0000000000001', token: '3f2b8c1e-5d0a-4e7b-9c61-2a8f0e9d7b45' },
      [
        ['redirect', 'success'],
        ['postback', 'success'],
      ],
    );
    expect(size).toBeLessThan(700);
  });

  it('every outcome on both channels, typical ids, still fits one write unit', async () => {
    const all: [Hit['channel'], Outcome][] = [
      ['redirect', 'success'],
      ['redirect', 'fail'],
      ['redirect', 'overquota'],
      ['redirect', 'quality'],
      ['redirect', 'termination'],
      ['postback', 'success'],
      ['postback', 'fail'],
    ];
    const size = await sizeAfter(
      { surveyId: '12345678', pid: 'panel-0000000000002', token: '9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d' },
      all,
    );
    expect(size).toBeLessThanOrEqual(1024);
  });
});

describe('the identifier bound', () => {
  it('ids at the one-unit bound, made of characters keys must escape, still fit one write unit', async () => {
    // The hits of every day: a redirect, a postback retried once, and a respondent who came back to the link.
    const all: [Hit['channel'], Outcome][] = [
      ['redirect', 'success'],
      ['postback', 'success'],
      ['postback', 'success'],
      ['redirect', 'success'],
    ];
    const size = await sizeAfter(
      {
        surveyId: '999999999999',
        pid: '%'.repeat(ONE_UNIT_PID_BYTES),
        token: '#'.repeat(ONE_UNIT_TOKEN_BYTES),
      },
      all,
    );
    expect(size).toBeLessThanOrEqual(1024);
  });

  it('the longest ids accepted, made of characters keys must escape, are stored and fit every key', async () => {
    const ids = {
      surveyId: '999999999999',
      pid: '%'.repeat(PID_MAX_BYTES),
      token: '%'.repeat(TOKEN_MAX_BYTES),
    };
    await sizeAfter(ids, [
      ['redirect', 'success'],
      ['postback', 'success'],
    ]);
    const [stored] = await store.attemptsOf(ids.surveyId, ids.pid);
    expect(stored).toMatchObject({ pid: ids.pid, token: ids.token, complete: 'postback-confirmed' });
    const key = attemptKey(ids.surveyId, ids.pid, ids.token);
    expect(Buffer.byteLength(key.pk)).toBeLessThanOrEqual(2048);
    expect(Buffer.byteLength(key.sk)).toBeLessThanOrEqual(1024);
    // The discrepancy index escapes the table's (already escaped) sort key once more, as recordVerdict does.
    const index = discrepancyIndexKey(
      '2026-11-21',
      ids.surveyId,
      'complete_not_received_xx',
      key.sk.replace(/^TOKEN#/, ''),
    );
    expect(Buffer.byteLength(index.gsi2sk)).toBeLessThanOrEqual(1024);
  });
});

describe('rejected hits item size', () => {
  it('a record of refused hits at every bound, in 4-byte characters, stays under 4 KB however many it counts', async () => {
    const wide = (n: number) => '👩'.repeat(n);
    const at = '2026-11-21T10:00:00.000Z';
    const rejected = {
      at,
      requestId: wide(5000),
      channel: 'redirect',
      code: 'signature_unknown_key',
      reason: wide(5000),
      surveyId: wide(5000),
      outcome: wide(5000),
      pid: wide(5000),
      token: wide(5000),
      sourceIp: wide(5000),
    } as const;
    for (let i = 0; i < 3; i++) await store.recordRejectedHit(rejected);
    const { Item } = await client.send(
      new GetCommand({
        TableName: tableName,
        Key: rejectedKey(at, rejected.code, wide(100)),
      }),
    );
    expect(Item?.hits).toBe(3);
    const size = itemSize(Item ?? {});
    if (process.env.PRINT_ITEM_SIZES) console.log(`rejected, worst case: ${size} bytes`);
    expect(size).toBeLessThanOrEqual(4096);
  });
});

describe('bulk-loaded attempts', () => {
  it('firstHitItem is exactly what a first hit writes', async () => {
    const hit = {
      channel: 'postback',
      surveyId: '424',
      outcome: 'fail',
      pid: 'bulk-1',
      token: 'bulk-token-1',
      source: 'form',
    } as const;
    const at = new Date('2026-11-21T10:00:00.000Z');
    await store.recordHit(hit, at);
    const { Item } = await client.send(
      new GetCommand({ TableName: tableName, Key: attemptKey(hit.surveyId, hit.pid, hit.token) }),
    );
    expect(Item).toEqual(firstHitItem(hit, at));
  });
});
