/**
 * Batch reads: 100 keys a request, a few requests at once (a day of thousands of summaries is read in tens of
 * requests, not one after another), and what the table leaves unprocessed is read again.
 */

import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { batchGet } from '../../functions/ledger/document-client';

const client = DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'us-east-1' }));
const mock = mockClient(client);
afterEach(() => mock.reset());

const keys = (n: number) => Array.from({ length: n }, (_, i) => ({ pk: `K#${i}`, sk: 'S' }));

describe('batchGet', () => {
  it('reads 100 keys a request, four requests at most in flight, and returns every item', async () => {
    let inFlight = 0;
    let most = 0;
    mock.on(BatchGetCommand).callsFake(async (input: BatchGetCommand['input']) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 5));
      inFlight--;
      const asked = input.RequestItems?.t?.Keys ?? [];
      return { Responses: { t: asked.map((k) => ({ ...k, found: true })) } };
    });
    const items = await batchGet(client, 't', keys(950));
    expect(items).toHaveLength(950);
    expect(new Set(items.map((i) => i.pk)).size).toBe(950);
    const calls = mock.commandCalls(BatchGetCommand);
    expect(calls.map((c) => c.args[0].input.RequestItems?.t?.Keys?.length)).toEqual([
      100, 100, 100, 100, 100, 100, 100, 100, 100, 50,
    ]);
    expect(most).toBe(4);
  });

  it('reads again what the table left unprocessed, consistently when asked', async () => {
    let first = true;
    mock.on(BatchGetCommand).callsFake(async (input: BatchGetCommand['input']) => {
      const asked = input.RequestItems?.t?.Keys ?? [];
      if (first) {
        first = false;
        return {
          Responses: { t: asked.slice(0, 30) },
          UnprocessedKeys: { t: { Keys: asked.slice(30) } },
        };
      }
      return { Responses: { t: asked } };
    });
    const items = await batchGet(client, 't', keys(80), { consistent: true });
    expect(items).toHaveLength(80);
    const calls = mock.commandCalls(BatchGetCommand).map((c) => c.args[0].input.RequestItems?.t);
    expect(calls.map((c) => [c?.Keys?.length, c?.ConsistentRead])).toEqual([
      [80, true],
      [50, true],
    ]);
  });

  it('keeps reading while the table answers some keys a round, however few; gives up after rounds that read none', async () => {
    // A table throttling hard: one key a round.
    mock.on(BatchGetCommand).callsFake(async (input: BatchGetCommand['input']) => {
      const asked = input.RequestItems?.t?.Keys ?? [];
      return { Responses: { t: asked.slice(0, 1) }, UnprocessedKeys: { t: { Keys: asked.slice(1) } } };
    });
    expect(await batchGet(client, 't', keys(15))).toHaveLength(15);
    mock.reset();
    mock.on(BatchGetCommand).callsFake(async (input: BatchGetCommand['input']) => ({
      Responses: { t: [] },
      UnprocessedKeys: { t: { Keys: input.RequestItems?.t?.Keys ?? [] } },
    }));
    await expect(batchGet(client, 't', keys(3))).rejects.toMatchObject({ name: 'StoreUnavailable' });
    expect(mock.commandCalls(BatchGetCommand)).toHaveLength(9);
  }, 30_000);
});
