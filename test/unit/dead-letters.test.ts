/**
 * The redrive's bookkeeping at the SDK boundary, for what the local queue never does: SQS's move task running,
 * failing or not allowed; a send or a delete refused for some messages of a batch, a failure mid-run, a dead-letter
 * queue that is not one queue's.
 */
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ListDeadLetterSourceQueuesCommand,
  ListMessageMoveTasksCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
  StartMessageMoveTaskCommand,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { cliContext, cliDeadLetters } from '../../functions/cli/context';
import { sqsDeadLetters } from '../../functions/runtime/dead-letters';

const sqs = mockClient(SQSClient);
const DLQ = 'https://sqs.eu-west-1.amazonaws.com/123456789012/hits-dlq';
const QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/hits';

const messages = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({
    MessageId: `m${from + i}`,
    ReceiptHandle: `r${from + i}`,
    Body: `{"id":"hit-${from + i}"}`,
  }));

const DLQ_ARN = 'arn:aws:sqs:eu-west-1:123456789012:hits-dlq';
const unsupported = () =>
  Object.assign(new Error('StartMessageMoveTask is not supported'), { name: 'UnsupportedOperation' });

beforeEach(() => {
  sqs.reset();
  sqs.on(ListDeadLetterSourceQueuesCommand).resolves({ queueUrls: [QUEUE] });
  sqs.on(GetQueueAttributesCommand).resolves({ Attributes: { QueueArn: DLQ_ARN } });
  // The copy loop's tests: a queue service without the move task.
  sqs.on(StartMessageMoveTaskCommand).rejects(unsupported());
  sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: { Id: string }[] }) => ({
    Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `new-${entry.Id}` })),
    Failed: [],
  }));
  sqs.on(DeleteMessageBatchCommand).callsFake((input: { Entries: { Id: string }[] }) => ({
    Successful: input.Entries.map((entry) => ({ Id: entry.Id })),
    Failed: [],
  }));
});

describe('redrive by copy', () => {
  it('receives, sends to the source queue, deletes what was sent, until a receive finds nothing', async () => {
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: messages(0, 10) })
      .resolvesOnce({ Messages: messages(10, 3) })
      .resolves({});
    const progress: number[] = [];
    const result = await sqsDeadLetters(DLQ).redrive((soFar) => progress.push(soFar.moved));
    expect(result).toEqual({ moved: 13, failed: 0, notDeleted: 0, by: 'copy' });
    expect(progress).toEqual([10, 13]);
    const sends = sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);
    expect(sends.map((input) => input.QueueUrl)).toEqual([QUEUE, QUEUE]);
    expect(sends[1]?.Entries?.map((entry) => entry.MessageBody)).toEqual(messages(10, 3).map((m) => m.Body));
    const deletes = sqs.commandCalls(DeleteMessageBatchCommand).map((call) => call.args[0].input);
    expect(deletes.map((input) => input.QueueUrl)).toEqual([DLQ, DLQ]);
    expect(deletes[1]?.Entries?.map((entry) => entry.ReceiptHandle)).toEqual(['r10', 'r11', 'r12']);
    // Long polls, so an empty answer means an empty queue; moved messages hidden from a concurrent run.
    expect(sqs.commandCalls(ReceiveMessageCommand)[0]?.args[0].input).toMatchObject({
      QueueUrl: DLQ,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 1,
      VisibilityTimeout: 120,
    });
  });

  it('never deletes a message the buffer did not take; it stays in the dead-letter queue', async () => {
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: messages(0, 3) })
      .resolves({});
    sqs.on(SendMessageBatchCommand).resolves({
      Successful: [
        { Id: '0', MessageId: 'a', MD5OfMessageBody: '' },
        { Id: '2', MessageId: 'b', MD5OfMessageBody: '' },
      ],
      Failed: [{ Id: '1', SenderFault: false, Code: 'InternalError' }],
    });
    expect(await sqsDeadLetters(DLQ).redrive()).toEqual({ moved: 2, failed: 1, notDeleted: 0, by: 'copy' });
    const [deleted] = sqs.commandCalls(DeleteMessageBatchCommand);
    expect(deleted?.args[0].input.Entries?.map((entry) => entry.ReceiptHandle)).toEqual(['r0', 'r2']);
  });

  it('counts messages sent but not deleted: the next run moves them again, which the drainer absorbs', async () => {
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: messages(0, 2) })
      .resolves({});
    sqs.on(DeleteMessageBatchCommand).resolves({
      Successful: [{ Id: '0' }],
      Failed: [{ Id: '1', SenderFault: false, Code: 'InternalError' }],
    });
    expect(await sqsDeadLetters(DLQ).redrive()).toEqual({ moved: 2, failed: 0, notDeleted: 1, by: 'copy' });
  });

  it('stopped by an error, says how many it moved and that the rest is still parked', async () => {
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: messages(0, 10) })
      .rejects(new Error('AccessDenied'));
    await expect(sqsDeadLetters(DLQ).redrive()).rejects.toThrow(
      'AccessDenied (after moving 10; what was not moved is still in the dead-letter queue: run again)',
    );
  });

  it('moves nothing unless the dead-letter queue belongs to exactly one queue', async () => {
    sqs.on(ListDeadLetterSourceQueuesCommand).resolves({ queueUrls: [QUEUE, `${QUEUE}-other`] });
    await expect(sqsDeadLetters(DLQ).redrive()).rejects.toThrow(/dead-letter queue of 2 queues/);
    expect(sqs.commandCalls(ReceiveMessageCommand)).toEqual([]);
  });
});

describe("redrive by SQS's move task", () => {
  it('starts one back to the source queue and waits for it to end, reporting what it moved', async () => {
    sqs.on(StartMessageMoveTaskCommand).resolves({ TaskHandle: 'task-1' });
    const task = (Status: string, moved: number) => ({
      Results: [
        { TaskHandle: 'task-1', Status, SourceArn: DLQ_ARN, ApproximateNumberOfMessagesMoved: moved },
        {
          TaskHandle: 'task-0',
          Status: 'COMPLETED',
          SourceArn: DLQ_ARN,
          ApproximateNumberOfMessagesMoved: 5,
        },
      ],
    });
    sqs
      .on(ListMessageMoveTasksCommand)
      .resolvesOnce({ Results: [] })
      .resolvesOnce(task('RUNNING', 400_000))
      .resolvesOnce(task('RUNNING', 1_700_000))
      .resolves(task('COMPLETED', 2_000_000));
    const progress: number[] = [];
    const result = await sqsDeadLetters(DLQ, { pollMs: 1 }).redrive((soFar) => progress.push(soFar.moved));
    expect(result).toEqual({ moved: 2_000_000, failed: 0, notDeleted: 0, by: 'move-task' });
    expect(progress).toEqual([400_000, 1_700_000, 2_000_000]);
    // No destination: SQS sends each message back to the queue it came from.
    expect(sqs.commandCalls(StartMessageMoveTaskCommand)[0]?.args[0].input).toEqual({ SourceArn: DLQ_ARN });
    expect(sqs.commandCalls(ReceiveMessageCommand)).toEqual([]);
  });

  it('says so when the task fails or is cancelled: the rest is still parked', async () => {
    sqs.on(StartMessageMoveTaskCommand).resolves({ TaskHandle: 'task-2' });
    sqs.on(ListMessageMoveTasksCommand).resolves({
      Results: [
        {
          TaskHandle: 'task-2',
          Status: 'FAILED',
          FailureReason: 'AWS.SimpleQueueService.NonExistentQueue',
          ApproximateNumberOfMessagesMoved: 7,
        },
      ],
    });
    await expect(sqsDeadLetters(DLQ, { pollMs: 1 }).redrive()).rejects.toThrow(
      "SQS's move task failed (AWS.SimpleQueueService.NonExistentQueue) after moving about 7; what was not moved is still in the dead-letter queue: run again",
    );
  });

  it('without permission for it, moves them by copy', async () => {
    sqs.on(StartMessageMoveTaskCommand).rejects(
      Object.assign(new Error('not authorized to perform sqs:StartMessageMoveTask'), {
        name: 'AccessDenied',
      }),
    );
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: messages(0, 4) })
      .resolves({});
    expect(await sqsDeadLetters(DLQ).redrive()).toEqual({ moved: 4, failed: 0, notDeleted: 0, by: 'copy' });
  });

  it('an error it does not know stops the redrive', async () => {
    sqs.on(StartMessageMoveTaskCommand).rejects(new Error('socket hang up'));
    await expect(sqsDeadLetters(DLQ).redrive()).rejects.toThrow('socket hang up');
    expect(sqs.commandCalls(ReceiveMessageCommand)).toEqual([]);
  });
});

describe('count', () => {
  it("reads SQS's counts and receives nothing", async () => {
    sqs.on(GetQueueAttributesCommand).resolves({
      Attributes: { ApproximateNumberOfMessages: '42', ApproximateNumberOfMessagesNotVisible: '3' },
    });
    expect(await sqsDeadLetters(DLQ).count()).toEqual({ waiting: 42, inFlight: 3 });
    expect(sqs.commandCalls(ReceiveMessageCommand)).toEqual([]);
  });
});

describe('the CLI in AWS', () => {
  it("needs the stack's region named, so that the ledger and the secrets are addressed in the same one", () => {
    const outputs = {
      RECEIVER_TARGET: 'aws',
      TABLE_NAME: 'SurveyReceiver-ledger',
      SIGNING_KEYS_SECRET_ID: 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:keys',
      PUBLIC_BASE_URL: 'https://abc.execute-api.eu-west-1.amazonaws.com/',
    };
    expect(() => cliContext({ ...outputs })).toThrow(
      "set AWS_REGION (the stack's region) (RECEIVER_TARGET=aws)",
    );
    // As process.env is: whatever is assigned to it is stored as a string (undefined as "undefined").
    const processLike = new Proxy<NodeJS.ProcessEnv>(
      { ...outputs },
      {
        set: (target, name, value) => Reflect.set(target, name, String(value)),
      },
    );
    expect(() => cliContext(processLike)).toThrow(
      "set AWS_REGION (the stack's region) (RECEIVER_TARGET=aws)",
    );
    expect(processLike.AWS_REGION).toBeUndefined();
    const env: NodeJS.ProcessEnv = { ...outputs, AWS_DEFAULT_REGION: 'eu-west-1' };
    expect(() => cliContext(env)).not.toThrow();
    expect(env.AWS_REGION).toBe('eu-west-1');
  });

  it('is asked for as aws or local, nothing else: a target spelled otherwise is refused, not taken for the local stack', () => {
    for (const spelled of ['AWS', 'prod', 'aws ']) {
      const asked = spelled.trim() === 'aws' ? undefined : /RECEIVER_TARGET must be aws or local/;
      if (asked) expect(() => cliContext({ RECEIVER_TARGET: spelled })).toThrow(asked);
      else expect(() => cliContext({ RECEIVER_TARGET: spelled })).toThrow(/RECEIVER_TARGET=aws/);
    }
  });

  it('needs only DEAD_LETTER_QUEUE_URL, and takes the region from it', async () => {
    expect(() => cliDeadLetters({ RECEIVER_TARGET: 'aws' })).toThrow(/DEAD_LETTER_QUEUE_URL/);
    sqs.on(GetQueueAttributesCommand).resolves({ Attributes: {} });
    const deadLetters = cliDeadLetters({ RECEIVER_TARGET: 'aws', DEAD_LETTER_QUEUE_URL: DLQ });
    await deadLetters.count();
    const [call] = sqs.commandCalls(GetQueueAttributesCommand);
    expect(await call?.thisValue.config.region()).toBe('eu-west-1');
    expect(call?.args[0].input.QueueUrl).toBe(DLQ);
  });
});
