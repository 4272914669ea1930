/**
 * The redrive's bookkeeping at the SDK boundary, for what the local queue never does: a send or a delete refused
 * for some messages of a batch, a failure mid-run, a dead-letter queue that is not one queue's.
 */
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ListDeadLetterSourceQueuesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { cliContext, cliDeadLetters } from '../../functions/cli/context';
import { sqsDeadLetters } from '../../functions/runtime/hit-buffer';

const sqs = mockClient(SQSClient);
const DLQ = 'https://sqs.eu-west-1.amazonaws.com/123456789012/hits-dlq';
const QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/hits';

const messages = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({
    MessageId: `m${from + i}`,
    ReceiptHandle: `r${from + i}`,
    Body: `{"id":"hit-${from + i}"}`,
  }));

beforeEach(() => {
  sqs.reset();
  sqs.on(ListDeadLetterSourceQueuesCommand).resolves({ queueUrls: [QUEUE] });
  sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: { Id: string }[] }) => ({
    Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `new-${entry.Id}` })),
    Failed: [],
  }));
  sqs.on(DeleteMessageBatchCommand).callsFake((input: { Entries: { Id: string }[] }) => ({
    Successful: input.Entries.map((entry) => ({ Id: entry.Id })),
    Failed: [],
  }));
});

describe('redrive', () => {
  it('receives, sends to the source queue, deletes what was sent, until a receive finds nothing', async () => {
    sqs
      .on(ReceiveMessageCommand)
      .resolvesOnce({ Messages: messages(0, 10) })
      .resolvesOnce({ Messages: messages(10, 3) })
      .resolves({});
    const progress: number[] = [];
    const result = await sqsDeadLetters(DLQ).redrive((soFar) => progress.push(soFar.moved));
    expect(result).toEqual({ moved: 13, failed: 0, notDeleted: 0 });
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
    expect(await sqsDeadLetters(DLQ).redrive()).toEqual({ moved: 2, failed: 1, notDeleted: 0 });
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
    expect(await sqsDeadLetters(DLQ).redrive()).toEqual({ moved: 2, failed: 0, notDeleted: 1 });
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
