/**
 * The ledger table's plumbing, shared by the store modules: one document client per process, the error that
 * means "retry later", and paginated queries and batch reads.
 */
import { ConditionalCheckFailedException, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { settleWithin } from '../shared/time-limit';

/** The store could not be reached or is refusing work (throttling, 5xx, timeouts): retry later. */
export class StoreUnavailable extends Error {
  override readonly name = 'StoreUnavailable';
}

/**
 * The store's answer, or StoreUnavailable once `ms` have passed without one: a caller with someone waiting (a
 * respondent, a sender with its own timeout) does not sit through the client's timeouts and retries. The request
 * given up on is aborted with its retries, which would otherwise land after the hit's copy went to the buffer: a
 * request already on its way may still land; nothing waits for it (the copy carries the same request id, so it is
 * then counted once, unless another request of the same attempt took its id slot in between).
 */
export function storeAnswerWithin<T>(request: (signal: AbortSignal) => Promise<T>, ms: number): Promise<T> {
  const controller = new AbortController();
  return settleWithin(request(controller.signal), ms, (): never => {
    controller.abort();
    throw new StoreUnavailable(`the ledger did not answer within ${ms} ms`);
  });
}

export interface DocumentClientOptions {
  readonly region?: string | undefined;
  /** A local engine's URL; unset in AWS. */
  readonly endpoint?: string | undefined;
  /** Per-request socket timeout; the SDK retries within `maxAttempts`. */
  readonly requestTimeoutMs?: number;
  readonly maxAttempts?: number;
}

/** A document client configured for the ledger. Create once per process. */
export function createDocumentClient(options: DocumentClientOptions = {}): DynamoDBDocumentClient {
  const client = new DynamoDBClient({
    // A local engine needs some region to sign with; in AWS the runtime's region applies.
    ...(options.region ? { region: options.region } : options.endpoint ? { region: 'us-east-1' } : {}),
    ...(options.endpoint
      ? { endpoint: options.endpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
      : {}),
    maxAttempts: options.maxAttempts ?? 3,
    // Without throwOnRequestTimeout the handler only logs a warning and the request waits on for ever.
    requestHandler: {
      requestTimeout: options.requestTimeoutMs ?? 2000,
      connectionTimeout: 1000,
      throwOnRequestTimeout: true,
    },
  });
  // The SDK's logger middleware copies every request and answer through its sensitive-data filter (a walk of the
  // whole schema) before handing them to a logger that discards them: this product gives the SDK no logger. On a
  // reconciliation's batch reads of 100 attempts that walk was a tenth of the run's CPU.
  client.middlewareStack.remove('loggerMiddleware');
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

export type Item = Record<string, unknown>;

/** Every item a query matches, page by page. */
export async function queryAll(
  client: DynamoDBDocumentClient,
  input: QueryCommand['input'],
): Promise<Item[]> {
  const items: Item[] = [];
  let ExclusiveStartKey: Record<string, unknown> | undefined;
  do {
    const page = await send(() => client.send(new QueryCommand({ ...input, ExclusiveStartKey })));
    for (const item of (page.Items ?? []) as Item[]) items.push(item);
    ExclusiveStartKey = page.LastEvaluatedKey;
  } while (ExclusiveStartKey);
  return items;
}

/** Batches of a batch read in flight at once: a day of thousands of summaries is tens of requests, not one after another. */
const BATCHES_AT_ONCE = 4;

/** Reads items by key, 100 per request (a few at once), retrying what the table leaves unprocessed. */
export async function batchGet(
  client: DynamoDBDocumentClient,
  tableName: string,
  keys: Item[],
  options: { consistent?: boolean } = {},
): Promise<Item[]> {
  const items: Item[] = [];
  const batches: Item[][] = [];
  // DynamoDB refuses a request naming one key twice (a survey asked for twice): each key is read once.
  const unique = [...new Map(keys.map((key) => [JSON.stringify(key), key])).values()];
  for (let start = 0; start < unique.length; start += 100) batches.push(unique.slice(start, start + 100));
  const readBatch = async (batch: Item[]) => {
    let pending = batch;
    // Given up after rounds that read nothing, not after a number of rounds: a table throttling hard answers a few
    // keys a round, and a batch read so is slow, not failed. The backoff starts again once a round reads some.
    for (let idle = 0, round = 0; pending.length > 0; round++) {
      if (round > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 50 * 2 ** idle)));
      if (idle > 8) throw new StoreUnavailable('the ledger store left keys unprocessed');
      const page = await send(() =>
        client.send(
          new BatchGetCommand({
            RequestItems: {
              [tableName]: { Keys: pending, ...(options.consistent ? { ConsistentRead: true } : {}) },
            },
          }),
        ),
      );
      const read = (page.Responses?.[tableName] ?? []) as Item[];
      for (const item of read) items.push(item);
      const left = (page.UnprocessedKeys?.[tableName]?.Keys ?? []) as Item[];
      idle = left.length < pending.length ? 0 : idle + 1;
      pending = left;
    }
  };
  let next = 0;
  const worker = async () => {
    while (next < batches.length) await readBatch(batches[next++] as Item[]);
  };
  await Promise.all(Array.from({ length: Math.min(BATCHES_AT_ONCE, batches.length) }, worker));
  return items;
}

const TRANSIENT = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
  'InternalServerError',
  'ServiceUnavailable',
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
]);

/** Turns "the store is down or throttling" into StoreUnavailable; anything else is a bug and propagates. */
export async function send<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (isTransient(error)) throw new StoreUnavailable('the ledger store is unavailable', { cause: error });
    throw error;
  }
}

/**
 * `send` for a conditional write whose condition failing is an answer, not an error: true when it was written,
 * false when its condition did not hold.
 */
export async function conditionally(call: () => Promise<unknown>): Promise<boolean> {
  try {
    await send(call);
    return true;
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) return false;
    throw error;
  }
}

function isTransient(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const code = (error as { code?: string }).code;
  return (
    TRANSIENT.has(error.name) ||
    unreadableAnswer(error) ||
    (status !== undefined && status >= 500) ||
    (code !== undefined && /^(ECONN|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)/.test(code))
  );
}

/**
 * An answer that came and could not be read (its body cut short or garbled on the way): the SDK attaches the raw
 * answer (`$response`) to every error its deserialisation raises, and only the service's own errors carry `$fault`.
 * Whether the request was applied is unknown, as after a time-out: the store was not there for it.
 */
function unreadableAnswer(error: Error): boolean {
  return '$response' in error && !('$fault' in error);
}
