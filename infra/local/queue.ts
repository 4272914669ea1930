/**
 * A local stand-in for SQS, speaking its JSON protocol (SendMessage and SendMessageBatch, ReceiveMessage,
 * DeleteMessage and DeleteMessageBatch, ChangeMessageVisibility, GetQueueAttributes, ListDeadLetterSourceQueues,
 * StartMessageMoveTask and ListMessageMoveTasks of the dead-letter queue)
 * so the product's real SQS client works against it, and a poller that delivers batches to a handler as Lambda's
 * event source mapping does: partial batch failures, visibility timeout, and a dead-letter queue after
 * `maxReceiveCount` receives.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { BUFFER_MAX_RECEIVES } from '../../functions/runtime/hit-buffer';
import { localQueueUrls } from '../../functions/runtime/local-stack-defaults';
import { lambdaContext } from './api-gateway';
import { invokeHandler } from './invocation';

interface Message {
  id: string;
  body: string;
  receipt?: string;
  visibleAt: number;
  receives: number;
  sentAt: number;
}

export interface LocalQueue {
  readonly endpoint: string;
  readonly queueUrl: string;
  readonly deadLetterUrl: string;
  /** Messages waiting (visible or in flight), and those moved to the dead-letter queue. */
  depth(): { waiting: number; deadLetters: number };
  deadLetters(): string[];
  stop(): Promise<void>;
}

const md5 = (text: string) => createHash('md5').update(text).digest('hex');

export async function startLocalQueue(
  options: { host?: string; port?: number; maxReceiveCount?: number } = {},
): Promise<LocalQueue> {
  const queues = new Map<string, Message[]>([
    ['hits', []],
    ['hits-dlq', []],
  ]);
  const maxReceiveCount = options.maxReceiveCount ?? BUFFER_MAX_RECEIVES;
  let urls = localQueueUrls('');
  /** Move tasks of the dead-letter queue, newest first; each is done when started. */
  const moveTasks: { TaskHandle: string; moved: number }[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const operation = String(req.headers['x-amz-target'] ?? '').replace('AmazonSQS.', '');
    const input = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
    // Queues are named by URL, or (move tasks) by ARN: the name is the last part of either.
    const name =
      String(input.QueueUrl ?? input.SourceArn ?? '')
        .split(/[/:]/)
        .pop() ?? '';
    const queue = queues.get(name);
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify(body));
    };
    if (!queue)
      return reply(400, { __type: 'com.amazonaws.sqs#QueueDoesNotExist', message: 'no such queue' });
    const now = Date.now();
    const send = (body: string) => {
      const id = randomUUID();
      queue.push({ id, body, visibleAt: now, receives: 0, sentAt: now });
      return { MessageId: id, MD5OfMessageBody: md5(body) };
    };
    const remove = (receipt: unknown) => {
      const index = queue.findIndex((m) => m.receipt === receipt);
      if (index >= 0) queue.splice(index, 1);
    };
    const entries = () => (Array.isArray(input.Entries) ? input.Entries : []) as Record<string, unknown>[];
    switch (operation) {
      case 'SendMessage':
        return reply(200, send(String(input.MessageBody ?? '')));
      case 'SendMessageBatch':
        return reply(200, {
          Successful: entries().map((entry) => ({ Id: entry.Id, ...send(String(entry.MessageBody ?? '')) })),
          Failed: [],
        });
      case 'ReceiveMessage': {
        const max = Number(input.MaxNumberOfMessages ?? 1);
        const visibility = Number(input.VisibilityTimeout ?? 30) * 1000;
        const batch = queue.filter((m) => m.visibleAt <= now).slice(0, max);
        for (const message of batch) {
          message.receives++;
          message.receipt = randomUUID();
          message.visibleAt = now + visibility;
        }
        return reply(200, {
          Messages: batch.map((m) => ({
            MessageId: m.id,
            ReceiptHandle: m.receipt,
            Body: m.body,
            MD5OfBody: md5(m.body),
            Attributes: { ApproximateReceiveCount: String(m.receives), SentTimestamp: String(m.sentAt) },
          })),
        });
      }
      case 'ChangeMessageVisibility': {
        const message = queue.find((m) => m.receipt === input.ReceiptHandle);
        if (!message)
          return reply(400, {
            __type: 'com.amazonaws.sqs#ReceiptHandleIsInvalid',
            message: 'no message has that receipt handle',
          });
        message.visibleAt = now + Number(input.VisibilityTimeout ?? 0) * 1000;
        return reply(200, {});
      }
      case 'DeleteMessage':
        remove(input.ReceiptHandle);
        return reply(200, {});
      case 'DeleteMessageBatch':
        for (const entry of entries()) remove(entry.ReceiptHandle);
        return reply(200, { Successful: entries().map((entry) => ({ Id: entry.Id })), Failed: [] });
      case 'GetQueueAttributes': {
        const visible = queue.filter((m) => m.visibleAt <= now).length;
        return reply(200, {
          Attributes: {
            QueueArn: `arn:aws:sqs:local:000000000000:${name}`,
            ApproximateNumberOfMessages: String(visible),
            ApproximateNumberOfMessagesNotVisible: String(queue.length - visible),
          },
        });
      }
      case 'ListDeadLetterSourceQueues':
        return reply(200, { queueUrls: name === 'hits-dlq' ? [urls.queueUrl] : [] });
      case 'StartMessageMoveTask': {
        // Back to the source queue, as SQS does without a destination: every visible message, at once.
        if (name !== 'hits-dlq')
          return reply(400, {
            __type: 'com.amazonaws.sqs#InvalidParameterValue',
            message: 'not a dead-letter queue',
          });
        const visible = queue.filter((m) => m.visibleAt <= now);
        const hits = queues.get('hits') as Message[];
        for (const message of visible) {
          queue.splice(queue.indexOf(message), 1);
          hits.push({ ...message, receives: 0, visibleAt: now });
        }
        const task = { TaskHandle: randomUUID(), moved: visible.length };
        moveTasks.unshift(task);
        return reply(200, { TaskHandle: task.TaskHandle });
      }
      case 'ListMessageMoveTasks':
        return reply(200, {
          Results: moveTasks.slice(0, Number(input.MaxResults ?? 1)).map((task) => ({
            TaskHandle: task.TaskHandle,
            Status: 'COMPLETED',
            SourceArn: input.SourceArn,
            ApproximateNumberOfMessagesMoved: task.moved,
          })),
        });
      default:
        return reply(400, { __type: 'com.amazonaws.sqs#UnsupportedOperation', message: operation });
    }
  });
  server.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  // A port in use fails the start (named by `npm start`), not the process with an unhandled 'error'.
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const endpoint = `http://${options.host ?? '127.0.0.1'}:${(server.address() as AddressInfo).port}`;
  urls = localQueueUrls(endpoint);
  // Receives beyond the limit move a message to the dead-letter queue, as a redrive policy does.
  const redrive = setInterval(() => {
    const hits = queues.get('hits') as Message[];
    const dead = queues.get('hits-dlq') as Message[];
    for (let i = hits.length - 1; i >= 0; i--) {
      const m = hits[i] as Message;
      if (m.receives >= maxReceiveCount && m.visibleAt <= Date.now()) {
        hits.splice(i, 1);
        dead.push({ ...m, receives: 0 });
      }
    }
  }, 100);
  return {
    endpoint,
    ...urls,
    depth: () => ({
      waiting: queues.get('hits')?.length ?? 0,
      deadLetters: queues.get('hits-dlq')?.length ?? 0,
    }),
    deadLetters: () => (queues.get('hits-dlq') ?? []).map((m) => m.body),
    stop: () =>
      new Promise<void>((resolve) => {
        clearInterval(redrive);
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export type SqsHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

/**
 * Delivers the queue's messages to a handler in batches, as Lambda's event source mapping does: messages the
 * handler reports as failed stay (and become visible again after the visibility timeout); the rest are deleted.
 */
export function pollQueue(
  queue: LocalQueue,
  handler: SqsHandler,
  options: { intervalMs?: number; visibilitySeconds?: number; background?: boolean } = {},
) {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  const call = (operation: string, body: Record<string, unknown>) =>
    fetch(queue.endpoint, {
      method: 'POST',
      headers: { 'x-amz-target': `AmazonSQS.${operation}`, 'content-type': 'application/x-amz-json-1.0' },
      body: JSON.stringify({ QueueUrl: queue.queueUrl, ...body }),
    }).then((r) => r.json() as Promise<Record<string, unknown>>);
  const once = async () => {
    const received = await call('ReceiveMessage', {
      MaxNumberOfMessages: 10,
      VisibilityTimeout: options.visibilitySeconds ?? 1,
    });
    const messages = (received.Messages ?? []) as {
      MessageId: string;
      ReceiptHandle: string;
      Body: string;
      Attributes: Record<string, string>;
    }[];
    if (messages.length === 0) return 0;
    const event: SQSEvent = {
      Records: messages.map((m) => ({
        messageId: m.MessageId,
        receiptHandle: m.ReceiptHandle,
        body: m.Body,
        attributes: {
          ApproximateReceiveCount: m.Attributes.ApproximateReceiveCount ?? '1',
          SentTimestamp: m.Attributes.SentTimestamp ?? String(Date.now()),
          SenderId: 'local',
          ApproximateFirstReceiveTimestamp: String(Date.now()),
        },
        messageAttributes: {},
        md5OfBody: '',
        eventSource: 'aws:sqs',
        eventSourceARN: 'arn:aws:sqs:local:000000000000:hits',
        awsRegion: 'local',
      })),
    };
    let failed = new Set(messages.map((m) => m.MessageId));
    try {
      const result = await invokeHandler(handler, event, lambdaContext('drain-buffer', randomUUID(), 60_000));
      failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
    } catch {
      // The whole batch failed: every message becomes visible again.
    }
    for (const m of messages)
      if (!failed.has(m.MessageId)) await call('DeleteMessage', { ReceiptHandle: m.ReceiptHandle });
    return messages.length;
  };
  const loop = async () => {
    while (!stopped) {
      const handled = await once().catch(() => 0);
      if (handled === 0) await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 200));
    }
  };
  if (options.background ?? true) running = loop();
  return {
    /** Delivers until the queue holds nothing visible. */
    drain: async () => {
      while ((await once()) > 0);
    },
    stop: async () => {
      stopped = true;
      await running;
    },
  };
}
