/**
 * The durable buffer behind the ledger: when DynamoDB is throttling or down beyond the SDK's retries, a hit is
 * put on an SQS queue and acknowledged; the drainer writes it to the ledger later, once. If even the queue cannot
 * take it, the hit is not acknowledged (the postback answers 503 and the marketplace retries).
 */
import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import * as z from 'zod/mini';
import type { Hit } from '../receiving/hit-request';
import { identifierProblem } from '../receiving/identifiers';
import { OUTCOMES } from '../receiving/outcome';
import { describeIssues } from '../shared/validation';

/** A hit as it waits in the buffer: an id that makes its replay idempotent, and when it arrived. */
export interface BufferedHit {
  readonly id: string;
  readonly at: string;
  readonly hit: Hit;
}

export interface HitBuffer {
  /** Buffers a hit under its request's id, the id its live write carried, so it is never counted twice. */
  put(hit: Hit, at: Date, id: string): Promise<BufferedHit>;
}

/** Receives before SQS parks a buffered hit in the dead-letter queue (the queue's redrive policy). */
export const BUFFER_MAX_RECEIVES = 12;

/**
 * How long a buffered hit the ledger refused waits before its next delivery: doubling from `baseSeconds` with
 * every receive, at most `maxSeconds`. With the defaults (60 s doubling to 2 h) and the queue's 12 receives, a
 * hit waits out about 12 hours of ledger outage before it is parked in the dead-letter queue.
 */
export function redeliveryDelaySeconds(
  receives: number,
  backoff: { readonly baseSeconds: number; readonly maxSeconds: number },
): number {
  const exponent = Math.min(Math.max(receives, 1) - 1, 30);
  return Math.min(backoff.baseSeconds * 2 ** exponent, backoff.maxSeconds, 43_200);
}

/** Stretches a received message's invisibility, so its next delivery waits (SQS allows at most 12 hours). */
export interface BufferRedelivery {
  delay(receiptHandle: string, seconds: number): Promise<void>;
}

export function sqsRedelivery(queueUrl: string, options: SqsLocation = {}): BufferRedelivery {
  const client = sqsClient(options);
  return {
    async delay(receiptHandle, seconds) {
      await client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: receiptHandle,
          VisibilityTimeout: seconds,
        }),
      );
    },
  };
}

/** Where the queues are: SQS in a region, or the local stand-in at an endpoint. */
export interface SqsLocation {
  readonly endpoint?: string | undefined;
  readonly region?: string | undefined;
}

/**
 * The one SQS client factory. A receiver is kept waiting briefly (two tries, 1 s each: a hit that cannot be
 * buffered soon is answered 503); an operator's command waits as SQS's long polls need.
 */
export function sqsClient(options: SqsLocation, patience: 'receiver' | 'operator' = 'receiver') {
  return new SQSClient({
    ...(options.region ? { region: options.region } : options.endpoint ? { region: 'us-east-1' } : {}),
    ...(options.endpoint
      ? { endpoint: options.endpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
      : {}),
    ...(patience === 'receiver'
      ? {
          maxAttempts: 2,
          requestHandler: { requestTimeout: 1000, connectionTimeout: 500, throwOnRequestTimeout: true },
        }
      : { requestHandler: { requestTimeout: 20_000, connectionTimeout: 2000, throwOnRequestTimeout: true } }),
  });
}

export function sqsHitBuffer(queueUrl: string, options: SqsLocation = {}): HitBuffer {
  const client = sqsClient(options);
  return {
    async put(hit, at, id) {
      const buffered: BufferedHit = { id, at: at.toISOString(), hit };
      await client.send(
        new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(buffered) }),
      );
      return buffered;
    },
  };
}

const identifier = (field: 'surveyId' | 'pid' | 'token') =>
  z.string().check(z.refine((value) => identifierProblem(field, value) === undefined, `invalid ${field}`));

const bufferedHitSchema = z.object({
  id: z.string().check(z.minLength(1), z.maxLength(100)),
  at: z.iso.datetime(),
  hit: z.object({
    channel: z.enum(['redirect', 'postback']),
    surveyId: identifier('surveyId'),
    outcome: z.enum(OUTCOMES),
    pid: identifier('pid'),
    token: identifier('token'),
    source: z.enum(['query', 'json', 'form']),
    from: z.optional(z.string().check(z.maxLength(16))),
  }),
});

/** Reads a buffered hit back, validating it as strictly as the receivers validated it the first time. */
export function parseBufferedHit(body: string): BufferedHit {
  const parsed = bufferedHitSchema.safeParse(JSON.parse(body));
  if (!parsed.success) throw new Error(`invalid buffered hit: ${describeIssues(parsed.error)}`);
  return parsed.data as BufferedHit;
}
