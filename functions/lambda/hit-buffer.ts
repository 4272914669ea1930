/**
 * The durable buffer behind the ledger: when DynamoDB is throttling or down beyond the SDK's retries, a hit is
 * put on an SQS queue and acknowledged; the drainer writes it to the ledger later, once. If even the queue cannot
 * take it, the hit is not acknowledged (the postback answers 503 and the marketplace retries).
 */
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import * as z from 'zod/mini';
import type { Hit } from '../core/hit-request';
import { identifierProblem } from '../core/identifiers';
import { OUTCOMES } from '../core/outcome';
import { describeIssues } from '../core/validation';

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

export function sqsHitBuffer(
  queueUrl: string,
  options: { endpoint?: string | undefined; region?: string } = {},
): HitBuffer {
  const client = new SQSClient({
    ...(options.region ? { region: options.region } : options.endpoint ? { region: 'us-east-1' } : {}),
    ...(options.endpoint
      ? { endpoint: options.endpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
      : {}),
    maxAttempts: 2,
    requestHandler: { requestTimeout: 1000, connectionTimeout: 500, throwOnRequestTimeout: true },
  });
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
  }),
});

/** Reads a buffered hit back, validating it as strictly as the receivers validated it the first time. */
export function parseBufferedHit(body: string): BufferedHit {
  const parsed = bufferedHitSchema.safeParse(JSON.parse(body));
  if (!parsed.success) throw new Error(`invalid buffered hit: ${describeIssues(parsed.error)}`);
  return parsed.data as BufferedHit;
}
