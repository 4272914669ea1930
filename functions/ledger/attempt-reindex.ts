/**
 * Puts back into the day index the attempts the receivers left out of it while the attempt feed covered them
 * (feed-coverage.ts): `ledger index-attempts`, for a table whose feed is turned off (its readers then list a
 * survey's attempts through the index alone). Each attempt that has no index entry (first seen on or after the day
 * asked for, if one is) gets the one its first hit would have written without the feed (its survey's partition of
 * that UTC day, by its first sighting), conditional on it still having none; one a later hit indexed by its own time
 * (it came after the feed was turned off, before this ran) is moved to its first sighting. Found by a Scan (attempt-scan.ts),
 * which reads the whole table whatever the day; safe to repeat, and a write unit an attempt it indexes.
 */
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { scanAttemptItems } from './attempt-scan';
import { conditionally, type Item } from './document-client';
import { attemptDayKey, placedAfter } from './ledger-schema';

export interface ReindexReport {
  /** Attempts found without an index entry (first seen since the day asked for). */
  readonly unindexed: number;
  /** Of them, put in the index by this run (none on a dry run). */
  readonly indexed: number;
  /**
   * Attempts a later hit indexed by its own time (their first hit left them out; the later one came after the feed
   * was turned off), moved to their first sighting by this run.
   */
  readonly replaced: number;
}

/**
 * Indexed by a later hit's time: the layout's plain time later than the first sighting, and not an item
 * reconciliation made, which is placed by its transaction's click.
 */
function misplaced(item: Item): boolean {
  const clickedAt = (item.marketplace as Item | undefined)?.clickedAt;
  return placedAfter(item.gsi1sk, String(item.firstSeenAt)) && item.gsi1sk !== clickedAt;
}

export function createAttemptReindex(client: DynamoDBDocumentClient, tableName: string) {
  return {
    /** Every attempt without an index entry, or those first seen on or after the UTC day `from`. */
    async run(options: { from?: string; dryRun?: boolean; pageSize?: number }): Promise<ReindexReport> {
      const from = options.from ? `${options.from}T00:00:00.000Z` : '';
      let unindexed = 0;
      let indexed = 0;
      let replaced = 0;
      const index = async (item: Item) => {
        const firstSeenAt = item.firstSeenAt as string;
        const day = attemptDayKey(String(item.surveyId), String(item.sk), firstSeenAt);
        const placed = typeof item.gsi1sk === 'string' ? item.gsi1sk : undefined;
        const written = await conditionally(() =>
          client.send(
            new UpdateCommand({
              TableName: tableName,
              Key: { pk: item.pk, sk: item.sk },
              UpdateExpression: 'SET gsi1pk = :gsi1pk, gsi1sk = :gsi1sk',
              // A hit or a drained one since may have indexed it (or moved its first sighting): left as it is.
              ConditionExpression: `${placed ? 'gsi1sk = :placed' : 'attribute_not_exists(gsi1pk)'} AND firstSeenAt = :firstSeenAt`,
              ExpressionAttributeValues: {
                ':gsi1pk': day.gsi1pk,
                ':gsi1sk': day.gsi1sk,
                ':firstSeenAt': firstSeenAt,
                ...(placed ? { ':placed': placed } : {}),
              },
            }),
          ),
        );
        if (written && placed) replaced++;
        else if (written) indexed++;
      };
      await scanAttemptItems(
        client,
        tableName,
        async (items) => {
          for (const item of items) {
            if (typeof item.surveyId !== 'string') continue;
            if (typeof item.firstSeenAt !== 'string' || item.firstSeenAt < from) continue;
            if (item.gsi1pk === undefined) unindexed++;
            else if (!misplaced(item)) continue;
            if (!options.dryRun) await index(item);
          }
        },
        options.pageSize ? { pageSize: options.pageSize } : {},
      );
      return { unindexed, indexed, replaced };
    },
  };
}

export type AttemptReindex = ReturnType<typeof createAttemptReindex>;
