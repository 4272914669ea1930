/**
 * A reconciliation run's survey lists at the size of a large supplier: tens of thousands of surveys keep the run's
 * items small, the list written once per run, read back whole; a run whose list is gone starts afresh.
 */
import { DeleteCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { finishedRunKey, runStateKey, runSurveysKey } from '../../functions/ledger/ledger-schema';
import {
  createDocumentClient,
  createReconciliationStore,
  type ReconciliationStore,
} from '../../functions/ledger/ledger-store';
import { RUN_SURVEYS_PER_CHUNK } from '../../functions/ledger/run-lists';
import { freshTable } from '../support/ledger';

let client: ReturnType<typeof createDocumentClient>;
let tableName: string;
let results: ReconciliationStore;

beforeAll(async () => {
  const table = await freshTable();
  tableName = table.tableName;
  client = createDocumentClient({ endpoint: table.endpoint });
  results = createReconciliationStore(client, tableName);
});

const raw = async (key: Record<string, string>) =>
  (await client.send(new GetCommand({ TableName: tableName, Key: key }))).Item;
const itemBytes = (item: unknown) => Buffer.byteLength(JSON.stringify(item), 'utf8');

describe("a run's survey lists", () => {
  it('of 40,000 surveys keep the run items small, written once, read back whole with the failed ones', async () => {
    // Twelve-digit ids: kept in the state item, 40,000 of them were about 600 KB, over DynamoDB's 400 KB.
    const surveys = Array.from({ length: 40_000 }, (_, i) => String(100_000_000_000 + i));
    const failedSurveys = [surveys[0], surveys[12_345], surveys[39_999], '999'] as string[];
    const state = {
      runId: 'big-run',
      days: ['2026-11-22', '2026-11-23'],
      surveys,
      cursor: 17,
      startedAt: '2026-11-23T10:00:00.000Z',
      failedSurveys,
    };
    await results.putRunState('big', state);
    const item = await raw(runStateKey('big'));
    expect(itemBytes(item)).toBeLessThan(8_000);
    expect(await results.runState('big')).toEqual(state);
    const chunks = Math.ceil(surveys.length / RUN_SURVEYS_PER_CHUNK);
    for (let index = 0; index < chunks; index++)
      expect((await raw(runSurveysKey('big', 'big-run', index)))?.expiresAt).toBeGreaterThan(0);

    // Saving the cursor again writes the state item alone: a list item removed meanwhile stays removed.
    await client.send(new DeleteCommand({ TableName: tableName, Key: runSurveysKey('big', 'big-run', 1) }));
    await results.putRunState('big', { ...state, cursor: 5_000 });
    expect(await raw(runSurveysKey('big', 'big-run', 1))).toBeUndefined();
    // A run whose list is gone cannot be resumed: read as finished, so the next invocation starts a new run.
    const lost = await createReconciliationStore(client, tableName).runState('big');
    expect(lost?.finishedAt).toBeDefined();

    // The finished run keeps its lists the same way, and an earlier release's inline lists still read.
    const fresh = createReconciliationStore(client, tableName);
    const run = {
      runId: 'big-run-2',
      startedAt: '2026-11-23T11:00:00.000Z',
      finishedAt: '2026-11-23T11:40:00.000Z',
      freshDays: ['2026-11-23'],
      surveys,
      failedSurveys,
      stoppedSurveys: [surveys[12_345] as string],
    };
    await fresh.putFinishedRun('big', run);
    expect(itemBytes(await raw(finishedRunKey('big')))).toBeLessThan(8_000);
    expect(await createReconciliationStore(client, tableName).finishedRun('big')).toEqual(run);
  }, 60_000);

  it('of a few hundred surveys stay in the run item, as before', async () => {
    const state = {
      runId: 'small-run',
      days: ['2026-11-23'],
      surveys: ['1', '2', '3'],
      cursor: 1,
      startedAt: '2026-11-23T10:00:00.000Z',
      failedSurveys: ['2'],
    };
    await results.putRunState('small', state);
    expect(await raw(runStateKey('small'))).toMatchObject({ surveys: ['1', '2', '3'], failedSurveys: ['2'] });
    expect(await results.runState('small')).toEqual(state);
  });
});
