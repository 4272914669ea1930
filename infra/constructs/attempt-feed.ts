/**
 * The attempt feed's consumer (functions/attempt-feed.ts) on the ledger table's stream: changes of attempts only
 * (the mapping's filter, so other items' changes never invoke it), in batches of up to a thousand gathered for up
 * to `FEED_BATCHING_WINDOW`, a failed group retried from its earliest change, a batch that keeps failing split in
 * two (bisect) and, after `FEED_RETRY_ATTEMPTS`, described on the failed-batches queue (the stream's shard and
 * sequence range: the records themselves stay in the table) while the shard moves on.
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type { TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { FilterCriteria, StartingPosition } from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { FEED_PARTITION_PREFIX } from '../../functions/ledger/feed-keys';
import { FEED_STREAM_FILTER, STREAM_FUNCTIONS } from '../routes';
import { ReceiverFunction } from './receiver-function';

/**
 * How long the stream's changes gather before a batch is delivered (Lambda's most): the longer, the more changes
 * share each feed item's write units, and the later a reader sees them. At the cost model's shape a minute packs
 * about 11 changes an item (0.19 write units an attempt), five about 51 (0.08; BENCHMARKS.md §7).
 */
export const FEED_BATCHING_WINDOW = Duration.minutes(5);
/**
 * Beyond the batching window, how late a change may reach the feed in the normal course (the consumer's own time,
 * a retried group): the health check judges as of the window and this margin ago.
 */
export const FEED_LAG_MARGIN = Duration.minutes(2);
/**
 * Retries of a failing batch (each split in two) before it is set aside; the table's stream keeps a day. A batch the
 * ledger refused for being down waits 30 s before it is handed back (stream-consumer.ts `LEDGER_DOWN_WAIT_MS`), so
 * these ride out about nine hours of a ledger outage; a batch failing for another reason is set aside in minutes.
 */
export const FEED_RETRY_ATTEMPTS = 1_000;

export class AttemptFeed extends Construct {
  readonly consumer: ReceiverFunction;
  /** Where a batch that kept failing is described (shard, sequence range), for an operator. */
  readonly failedBatches: Queue;

  constructor(scope: Construct, id: string, props: { table: TableV2 }) {
    super(scope, id);
    this.failedBatches = new Queue(this, 'failed-batches', {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.consumer = new ReceiverFunction(this, 'consumer', {
      ...STREAM_FUNCTIONS['attempt-feed'],
      timeout: Duration.seconds(60),
    })
      .bindLedger(props.table, [])
      // The feed's items and nothing else.
      .allowLedgerItems(props.table, ['dynamodb:PutItem'], FEED_PARTITION_PREFIX);
    this.consumer.function.addEventSource(
      new DynamoEventSource(props.table, {
        startingPosition: StartingPosition.TRIM_HORIZON,
        batchSize: 1000,
        maxBatchingWindow: FEED_BATCHING_WINDOW,
        parallelizationFactor: 1,
        bisectBatchOnError: true,
        reportBatchItemFailures: true,
        retryAttempts: FEED_RETRY_ATTEMPTS,
        filters: [FilterCriteria.filter(FEED_STREAM_FILTER)],
        onFailure: new SqsDlq(this.failedBatches),
      }),
    );
  }
}
