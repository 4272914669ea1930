/**
 * Every attempt item of the table by a parallel Scan, page by page: for the tools that must find attempts the day
 * index does not hold (the receivers leave out those the attempt feed covers: feed-coverage.ts), `ledger
 * rebuild-feed` and `ledger index-attempts`. A Scan reads every item of the table once, billed per 4 KB (about a
 * fifteenth of a read unit an attempt), and finds every survey's attempts, registered or not.
 */
import { type DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { runBounded, throwIfFailed } from '../shared/bounded-work';
import { type Item, send } from './document-client';
import { ATTEMPT_PARTITION_PREFIX } from './ledger-schema';

/** The Scan's segments, read side by side. */
const SEGMENTS = 4;

export async function scanAttemptItems(
  client: DynamoDBDocumentClient,
  tableName: string,
  onPage: (items: readonly Item[]) => Promise<void>,
  /** Items read per page (tests; default DynamoDB's 1 MB page). */
  options: { pageSize?: number } = {},
): Promise<void> {
  const report = await runBounded(
    Array.from({ length: SEGMENTS }, (_, segment) => async () => {
      let start: Item | undefined;
      do {
        const page = await send(() =>
          client.send(
            new ScanCommand({
              TableName: tableName,
              Segment: segment,
              TotalSegments: SEGMENTS,
              FilterExpression: 'begins_with(pk, :attempts)',
              ExpressionAttributeValues: { ':attempts': ATTEMPT_PARTITION_PREFIX },
              ...(options.pageSize ? { Limit: options.pageSize } : {}),
              ...(start ? { ExclusiveStartKey: start } : {}),
            }),
          ),
        );
        await onPage(page.Items ?? []);
        start = page.LastEvaluatedKey;
      } while (start);
    }),
    { concurrency: SEGMENTS },
  );
  throwIfFailed(report);
}
