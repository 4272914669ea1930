/**
 * Moves attempts an earlier release indexed under a day-wide partition (`ATTEMPTS#<utc day>`, gsi1sk
 * `<survey>#<first seen>`) to their survey's own partition of that day, then leaves the checkpoint that tells
 * the readers to stop querying the day-wide partitions (ledger-schema.ts). Until it has run, the readers query
 * both and every attempt is found either way, so it can run at any time after the new release is deployed, be
 * stopped, and run again: each item is moved by a conditional write that does nothing if it moved already.
 *
 * Cost: one write unit per attempt for the table plus the index entry it replaces (two index writes), once.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { runBounded, throwIfFailed } from '../shared/bounded-work';
import { queryAll, send } from './document-client';
import { attemptDayKey, DAY_INDEX_BACKFILLED, LEDGER, legacyAttemptDayPartition } from './ledger-schema';
import { createSurveyRegistry } from './survey-registry';

export interface BackfillReport {
  /** UTC days whose day-wide partition was read. */
  readonly days: number;
  /** Attempts moved to their survey's partition by this run. */
  readonly moved: number;
  /** Attempts another run (or a concurrent one) had moved already. */
  readonly alreadyMoved: number;
  /** Index entries in a day-wide partition that are not an attempt's (left alone, and reported). */
  readonly unrecognised: number;
  /** Whether the readers were told to stop querying the day-wide partitions. */
  readonly checkpointed: boolean;
}

export interface BackfillOptions {
  /** First and last UTC day (YYYY-MM-DD) to move; the readers are only told by a run that reached today. */
  readonly from: string;
  readonly to: string;
  /** Count what would move; change nothing. */
  readonly dryRun?: boolean;
  readonly concurrency?: number;
  readonly now?: () => Date;
  readonly onDay?: (day: string, moved: number) => void;
}

export interface DayIndexBackfill {
  run(options: BackfillOptions): Promise<BackfillReport>;
}

export function createDayIndexBackfill(client: DynamoDBDocumentClient, tableName: string): DayIndexBackfill {
  return { run: (options) => backfillDayIndex(client, tableName, options) };
}

async function backfillDayIndex(
  client: DynamoDBDocumentClient,
  tableName: string,
  options: BackfillOptions,
): Promise<BackfillReport> {
  const registry = createSurveyRegistry(client, tableName);
  const { index } = LEDGER;
  let moved = 0;
  let alreadyMoved = 0;
  let unrecognised = 0;
  const days = utcDays(options.from, options.to);
  for (const day of days) {
    const legacy = legacyAttemptDayPartition(day);
    const keys = await queryAll(client, {
      TableName: tableName,
      IndexName: index.name,
      KeyConditionExpression: '#pk = :pk',
      ExpressionAttributeNames: { '#pk': index.partitionKey },
      ExpressionAttributeValues: { ':pk': legacy },
    });
    let movedToday = 0;
    const moves = await runBounded(
      keys.map((key) => async () => {
        const legacySortKey = String(key[index.sortKey]);
        const [, surveyId, placedAt] = /^(\d+)#(.+)$/.exec(legacySortKey) ?? [];
        if (!surveyId || !placedAt || !String(key.pk).startsWith('ATTEMPT#')) {
          unrecognised++;
          return;
        }
        if (options.dryRun) {
          movedToday++;
          return;
        }
        try {
          await send(() =>
            client.send(
              new UpdateCommand({
                TableName: tableName,
                Key: { pk: key.pk, sk: key.sk },
                UpdateExpression: 'SET #pk = :pk, #sk = :sk',
                ConditionExpression: '#pk = :legacy AND #sk = :legacySk',
                ExpressionAttributeNames: { '#pk': index.partitionKey, '#sk': index.sortKey },
                ExpressionAttributeValues: {
                  ':pk': attemptDayKey(surveyId, placedAt).gsi1pk,
                  ':sk': attemptDayKey(surveyId, placedAt).gsi1sk,
                  ':legacy': legacy,
                  ':legacySk': legacySortKey,
                },
              }),
            ),
          );
          movedToday++;
        } catch (error) {
          if (!(error instanceof ConditionalCheckFailedException)) throw error;
          alreadyMoved++;
        }
      }),
      { concurrency: options.concurrency ?? 8 },
    );
    throwIfFailed(moves);
    moved += movedToday;
    options.onDay?.(day, movedToday);
  }
  // Only a run that reached today may tell the readers: an earlier `to` leaves later days unmoved.
  const now = (options.now ?? (() => new Date()))();
  const checkpointed =
    !options.dryRun &&
    unrecognised === 0 &&
    options.to >= now.toISOString().slice(0, 10) &&
    (await registry.advanceCheckpoint(DAY_INDEX_BACKFILLED, now.toISOString()));
  return { days: days.length, moved, alreadyMoved, unrecognised, checkpointed };
}

/** Every UTC day from `from` to `to`, both included. */
function utcDays(from: string, to: string): string[] {
  const days: string[] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86_400_000)
    days.push(new Date(t).toISOString().slice(0, 10));
  if (days.length === 0) throw new RangeError('from must not be after to');
  return days;
}
