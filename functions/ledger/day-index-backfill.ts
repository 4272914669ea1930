/**
 * Moves attempts an earlier release indexed under a day-wide partition (`ATTEMPTS#<utc day>`, gsi1sk
 * `<survey>#<first seen>`) to their survey's own partition of that day, then leaves the checkpoint that tells
 * the readers to stop querying the day-wide partitions (ledger-schema.ts). Until it has run, the readers query
 * both and every attempt is found either way, so it can run at any time after the new release is deployed, be
 * stopped, and run again: each item is moved by a conditional write that does nothing if it moved already.
 *
 * Cost: one write unit per attempt for the table plus the index entry it replaces (two index writes), once.
 */
import { type DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { runBounded, throwIfFailed } from '../shared/bounded-work';
import { conditionally, queryAll, send } from './document-client';
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
  /** False: never leave the checkpoint (the scheduled form decides itself). */
  readonly checkpoint?: boolean;
  readonly concurrency?: number;
  readonly now?: () => Date;
  readonly onDay?: (day: string, moved: number) => void;
}

/** What a scheduled `settle` did. */
export type SettleOutcome =
  | 'done'
  | { readonly moved: number; readonly quietSince?: string; readonly checkpointed: boolean };

export interface DayIndexBackfill {
  run(options: BackfillOptions): Promise<BackfillReport>;
  /**
   * The backfill as a scheduled job runs it, so no operator has to: once the checkpoint is there, one read and
   * nothing else. Until then it moves whatever the day-wide partitions hold and leaves the checkpoint only when two
   * runs at least `quietMs` apart found them empty: a receiver of the earlier release still running while a
   * deployment rolls out writes there, and is caught by the second look.
   */
  settle(options?: { now?: () => Date; quietMs?: number }): Promise<SettleOutcome>;
}

/** Releases before the split did not exist before this day; the scheduled backfill reads from it. */
export const FIRST_LEGACY_DAY = '2025-01-01';
/** The scheduled backfill's progress: the first day still to read, and since when it has found nothing. */
const progressKey = { pk: 'CHECKPOINT#day-index-backfill-progress', sk: 'CHECKPOINT' };

export function createDayIndexBackfill(client: DynamoDBDocumentClient, tableName: string): DayIndexBackfill {
  return {
    run: (options) => backfillDayIndex(client, tableName, options),
    async settle({ now = () => new Date(), quietMs = 3_600_000 } = {}) {
      const registry = createSurveyRegistry(client, tableName);
      if ((await registry.checkpoint(DAY_INDEX_BACKFILLED)) !== undefined) return 'done';
      const at = now();
      const today = at.toISOString().slice(0, 10);
      const { Item } = await send(() =>
        client.send(new GetCommand({ TableName: tableName, Key: progressKey, ConsistentRead: true })),
      );
      const quietSince = typeof Item?.at === 'string' ? Item.at : undefined;
      const from = typeof Item?.scanFrom === 'string' ? Item.scanFrom : FIRST_LEGACY_DAY;
      const report = await backfillDayIndex(client, tableName, {
        from,
        to: today,
        checkpoint: false,
        now: () => at,
      });
      // The days before yesterday are empty now (unless something unrecognised stays there): later runs start later.
      const yesterday = new Date(at.getTime() - 86_400_000).toISOString().slice(0, 10);
      const scanFrom = report.unrecognised > 0 ? from : yesterday < from ? from : yesterday;
      const quiet = report.moved + report.alreadyMoved + report.unrecognised === 0;
      const since = quiet ? (quietSince ?? at.toISOString()) : undefined;
      if (since && at.getTime() - Date.parse(since) >= quietMs) {
        const checkpointed = await registry.advanceCheckpoint(DAY_INDEX_BACKFILLED, at.toISOString());
        return { moved: 0, quietSince: since, checkpointed };
      }
      await send(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: { ...progressKey, kind: 'checkpoint', scanFrom, ...(since ? { at: since } : {}) },
          }),
        ),
      );
      return { moved: report.moved, ...(since ? { quietSince: since } : {}), checkpointed: false };
    },
  };
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
  const perDay = await runBounded(
    days.map((day) => async () => {
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
          const moved = attemptDayKey(surveyId, String(key.sk), placedAt);
          const applied = await conditionally(() =>
            client.send(
              new UpdateCommand({
                TableName: tableName,
                Key: { pk: key.pk, sk: key.sk },
                UpdateExpression: 'SET #pk = :pk, #sk = :sk',
                ConditionExpression: '#pk = :legacy AND #sk = :legacySk',
                ExpressionAttributeNames: { '#pk': index.partitionKey, '#sk': index.sortKey },
                ExpressionAttributeValues: {
                  ':pk': moved.gsi1pk,
                  ':sk': moved.gsi1sk,
                  ':legacy': legacy,
                  ':legacySk': legacySortKey,
                },
              }),
            ),
          );
          if (applied) movedToday++;
          else alreadyMoved++;
        }),
        { concurrency: options.concurrency ?? 8 },
      );
      throwIfFailed(moves);
      moved += movedToday;
      options.onDay?.(day, movedToday);
    }),
    { concurrency: 4 },
  );
  throwIfFailed(perDay);
  // Only a run that reached today may tell the readers: an earlier `to` leaves later days unmoved.
  const now = (options.now ?? (() => new Date()))();
  const checkpointed =
    !options.dryRun &&
    options.checkpoint !== false &&
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
