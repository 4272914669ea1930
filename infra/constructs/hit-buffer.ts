/**
 * The durable buffer behind the ledger: an encrypted SQS queue the receivers send to when DynamoDB refuses a
 * hit, a dead-letter queue for what the drainer still cannot write after twelve receives (about 12 hours of
 * outage with the drainer's backoff), and the drainer itself, at most two at once so a dead ledger is not hammered.
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { Effect, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { BUFFER_MAX_RECEIVES } from '../../functions/runtime/hit-buffer';
import type { ReceiverFunction } from './receiver-function';

/** The drainer's timeout: a batch of ten written a few attempts at once, each write retried by the SDK. */
export const DRAINER_TIMEOUT = Duration.seconds(30);

export class HitBuffer extends Construct {
  readonly queue: Queue;
  readonly deadLetters: Queue;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    const common = {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      // Both hold hits already acknowledged and not yet in the ledger: a stack deleted or a queue replaced during
      // an outage must not take them along (README, "Rolling back and tearing down").
      removalPolicy: RemovalPolicy.RETAIN,
    };
    this.deadLetters = new Queue(this, 'dead-letters', common);
    this.queue = new Queue(this, 'queue', {
      ...common,
      // Six times the drainer's timeout, as AWS advises for an SQS event source: a batch in flight is not
      // delivered twice meanwhile, and while the drainer cannot start at all (throttled: its code and its backoff
      // never run) a batch comes back every 3 minutes, not every minute, 12 receives taking 36 minutes, not 12.
      visibilityTimeout: Duration.seconds(DRAINER_TIMEOUT.toSeconds() * 6),
      deadLetterQueue: { queue: this.deadLetters, maxReceiveCount: BUFFER_MAX_RECEIVES },
    });
  }

  /** Lets a receiver put hits in the buffer: its URL in the environment, SendMessage on this queue only. */
  bindSender(fn: ReceiverFunction): void {
    fn.function.addEnvironment('HIT_BUFFER_QUEUE_URL', this.queue.queueUrl);
    fn.role.addToPrincipalPolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        actions: ['sqs:SendMessage'],
        resources: [this.queue.queueArn],
      }),
    );
  }

  /** Feeds the drainer from the queue, reporting per-message failures so one bad hit does not hold the batch. */
  bindDrainer(fn: ReceiverFunction, options: { maxConcurrency?: number } = {}): void {
    // The drainer stretches a refused hit's visibility (its backoff), on this queue only.
    fn.function.addEnvironment('HIT_BUFFER_QUEUE_URL', this.queue.queueUrl);
    fn.role.addToPrincipalPolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        actions: ['sqs:ChangeMessageVisibility'],
        resources: [this.queue.queueArn],
      }),
    );
    fn.function.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: 10,
        maxBatchingWindow: Duration.seconds(1),
        reportBatchItemFailures: true,
        // Two by default: a backlog after an outage drains at a pace the ledger takes beside the live traffic; a
        // larger supplier raises it (`scale.drainConcurrency`) to drain a longer backlog within hours.
        maxConcurrency: options.maxConcurrency ?? 2,
      }),
    );
  }
}
