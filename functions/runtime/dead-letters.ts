/**
 * The hit buffer's dead-letter queue, for an operator (`buffer redrive`): count it, move it back to the buffer.
 *
 * SQS moves a dead-letter queue back to its source itself (`StartMessageMoveTask`), hundreds of messages a second
 * and with nothing running on the operator's machine: what a long outage parked (millions of hits at ten times
 * today's traffic) goes back in minutes, where a receive/send/delete loop moves 50 to 100 a second. Where that is
 * not to be had (a queue service without it, credentials without `sqs:StartMessageMoveTask`), the loop does it.
 * Either way a hit moved twice is one buffered hit, which the drainer records once by its id.
 */
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ListDeadLetterSourceQueuesCommand,
  ListMessageMoveTasksCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';
import { type SqsLocation, sqsClient } from './hit-buffer';

/** What waits in the dead-letter queue: visible now, and received by someone (a redrive) but not yet deleted. */
export interface DeadLetterCount {
  readonly waiting: number;
  readonly inFlight: number;
}

/** What a redrive did. `failed` stay in the dead-letter queue; `notDeleted` were moved but will be moved again. */
export interface RedriveResult {
  readonly moved: number;
  readonly failed: number;
  readonly notDeleted: number;
  /** How: SQS's own move task, or the copy loop (receive, send, delete). */
  readonly by: 'move-task' | 'copy';
}

/** The hit buffer's dead-letter queue, for an operator: count it, move it back. */
export interface DeadLetters {
  readonly deadLetterUrl: string;
  /** The queue these are the dead letters of, as SQS's redrive policy says (never guessed from a name). */
  source(): Promise<string>;
  /** SQS's approximate counts; receives nothing, so a dry run changes nothing. */
  count(): Promise<DeadLetterCount>;
  /**
   * Moves every message back to the source queue: by SQS's move task, waiting for it to end, else ten at a time
   * (receive, send, delete) until a receive finds none. Safe to run twice, or twice at once: a message is deleted
   * only after it was sent, and a message sent twice (a crash between the two) is one buffered hit, which the
   * drainer records once by its id.
   */
  redrive(onProgress?: (soFar: RedriveResult) => void): Promise<RedriveResult>;
}

/** How long a message being moved stays hidden from another redrive; a batch takes well under a second. */
const MOVE_VISIBILITY_SECONDS = 120;

/**
 * Errors that say the move task is not to be had here, so the copy loop does the work: a service without the
 * operation (the local stand-in), credentials not allowed it, or a move task of this queue already running (another
 * operator's: the loop alongside it is harmless).
 */
const NO_MOVE_TASK =
  /UnsupportedOperation|AccessDenied|NotAuthorized|UnknownOperation|InvalidAction|already/i;

export function sqsDeadLetters(
  deadLetterUrl: string,
  options: SqsLocation & {
    /** How often a running move task is looked at (2 s). */
    readonly pollMs?: number;
  } = {},
): DeadLetters {
  const client = sqsClient(options, 'operator');
  const pollMs = options.pollMs ?? 2_000;
  const source = async () => {
    const { queueUrls = [] } = await client.send(
      new ListDeadLetterSourceQueuesCommand({ QueueUrl: deadLetterUrl }),
    );
    if (queueUrls.length !== 1 || !queueUrls[0])
      throw new Error(
        `${deadLetterUrl} is the dead-letter queue of ${queueUrls.length} queues; expected exactly the hit buffer`,
      );
    return queueUrls[0];
  };

  /** SQS's move task back to the source queue, to its end; undefined when it is not to be had (`NO_MOVE_TASK`). */
  async function byMoveTask(onProgress?: (soFar: RedriveResult) => void): Promise<RedriveResult | undefined> {
    const { Attributes = {} } = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: deadLetterUrl, AttributeNames: ['QueueArn'] }),
    );
    const sourceArn = Attributes.QueueArn;
    if (!sourceArn) return undefined;
    let taskHandle: string | undefined;
    try {
      // No destination: SQS moves each message back to the queue it came from (the buffer, the only source).
      ({ TaskHandle: taskHandle } = await client.send(
        new StartMessageMoveTaskCommand({ SourceArn: sourceArn }),
      ));
    } catch (error) {
      const name = error instanceof Error ? `${error.name} ${error.message}` : String(error);
      if (NO_MOVE_TASK.test(name)) return undefined;
      throw error;
    }
    for (let unlisted = 0; ; ) {
      const { Results = [] } = await client.send(
        new ListMessageMoveTasksCommand({ SourceArn: sourceArn, MaxResults: 10 }),
      );
      const task = taskHandle ? Results.find((t) => t.TaskHandle === taskHandle) : Results[0];
      if (!task) {
        // Just started, not listed yet: looked for again, for a minute at most.
        if (++unlisted * pollMs > 60_000)
          throw new Error(
            `SQS did not list the move task it started (${taskHandle}): see the console, or run again`,
          );
        await new Promise((resolve) => setTimeout(resolve, pollMs));
        continue;
      }
      const moved = task.ApproximateNumberOfMessagesMoved ?? 0;
      const soFar: RedriveResult = { moved, failed: 0, notDeleted: 0, by: 'move-task' };
      onProgress?.(soFar);
      if (task.Status === 'COMPLETED') return soFar;
      if (task.Status === 'FAILED' || task.Status === 'CANCELLED')
        throw new Error(
          `SQS's move task ${task.Status === 'FAILED' ? `failed (${task.FailureReason ?? 'no reason given'})` : 'was cancelled'} after moving about ${moved}; what was not moved is still in the dead-letter queue: run again`,
        );
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  /** The copy loop: ten at a time, received, sent to the buffer, deleted once sent. */
  async function byCopy(onProgress?: (soFar: RedriveResult) => void): Promise<RedriveResult> {
    const queueUrl = await source();
    let moved = 0;
    let failed = 0;
    let notDeleted = 0;
    try {
      for (;;) {
        // A long poll asks every SQS server, so an empty answer means the queue is empty (not a sample of it).
        const { Messages = [] } = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: deadLetterUrl,
            MaxNumberOfMessages: 10,
            VisibilityTimeout: MOVE_VISIBILITY_SECONDS,
            WaitTimeSeconds: 1,
          }),
        );
        if (Messages.length === 0) break;
        const sent = await client.send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: Messages.map((message, i) => ({ Id: String(i), MessageBody: message.Body ?? '' })),
          }),
        );
        const ok = new Set((sent.Successful ?? []).map((entry) => entry.Id));
        const done = Messages.filter((_, i) => ok.has(String(i)));
        // A message not sent stays in the dead-letter queue, hidden for two minutes (a long run tries it again).
        failed += Messages.length - done.length;
        moved += done.length;
        if (done.length > 0) {
          const deleted = await client.send(
            new DeleteMessageBatchCommand({
              QueueUrl: deadLetterUrl,
              Entries: done.map((message, i) => ({ Id: String(i), ReceiptHandle: message.ReceiptHandle })),
            }),
          );
          notDeleted += deleted.Failed?.length ?? 0;
        }
        onProgress?.({ moved, failed, notDeleted, by: 'copy' });
      }
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(
        `${reason} (after moving ${moved}; what was not moved is still in the dead-letter queue: run again)`,
      );
    }
    return { moved, failed, notDeleted, by: 'copy' };
  }

  return {
    deadLetterUrl,
    source,
    async count() {
      const { Attributes = {} } = await client.send(
        new GetQueueAttributesCommand({
          QueueUrl: deadLetterUrl,
          AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
        }),
      );
      return {
        waiting: Number(Attributes.ApproximateNumberOfMessages ?? 0),
        inFlight: Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0),
      };
    },
    async redrive(onProgress) {
      // The source is checked first either way: a queue that is not exactly the buffer's dead letters is refused.
      await source();
      return (await byMoveTask(onProgress)) ?? byCopy(onProgress);
    },
  };
}
