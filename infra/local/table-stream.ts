/**
 * A stand-in for DynamoDB Streams in front of an engine that has none (dynalite): a proxy that forwards every
 * request to the engine and, for each write to the table that changed an item, reads the item back and keeps a
 * stream record (NEW_AND_OLD_IMAGES, in the typed JSON a Lambda event carries), and a poller that delivers the
 * records in batches to a handler as Lambda's event source mapping does: in order, with the mapping's filter,
 * partial batch failures retried from the reported record, a failed batch sent again whole.
 *
 * Each item's changes are read back one after another, so a later record of an item never holds an older image.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AttributeValue, DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { lambdaContext } from './api-gateway';
import { invokeHandler } from './invocation';

type Image = Record<string, AttributeValue>;

export interface TableStream {
  /** Where the table's clients send their requests (the engine behind it). */
  readonly endpoint: string;
  /** The stream's ARN, as its records name it (`eventSourceARN`). */
  readonly arn: string;
  /** Records kept and not yet delivered. */
  pending(): number;
  stop(): Promise<void>;
  /** @internal the poller's side */
  readonly records: DynamoDBRecord[];
}

/** Read-backs of a changed item before the stand-in gives up and fails the write's answer. */
const READ_BACK_TRIES = 5;

const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems']);

/** The keys of the table's items a write request names. */
function keysWritten(operation: string, input: Record<string, unknown>, tableName: string): Image[] {
  const keyOf = (item: Image | undefined): Image | undefined =>
    item?.pk && item.sk ? { pk: item.pk, sk: item.sk } : undefined;
  const keys: (Image | undefined)[] = [];
  if (operation === 'PutItem' && input.TableName === tableName) keys.push(keyOf(input.Item as Image));
  if ((operation === 'UpdateItem' || operation === 'DeleteItem') && input.TableName === tableName)
    keys.push(keyOf(input.Key as Image));
  if (operation === 'BatchWriteItem') {
    const requests = (input.RequestItems as Record<string, unknown[]> | undefined)?.[tableName] ?? [];
    for (const r of requests as { PutRequest?: { Item: Image }; DeleteRequest?: { Key: Image } }[])
      keys.push(keyOf(r.PutRequest?.Item ?? r.DeleteRequest?.Key));
  }
  if (operation === 'TransactWriteItems') {
    type Part = { TableName?: string; Item?: Image; Key?: Image };
    for (const t of (input.TransactItems as Record<string, Part | undefined>[]) ?? []) {
      const part = t.Put ?? t.Update ?? t.Delete;
      if (part?.TableName === tableName) keys.push(keyOf(part.Item ?? part.Key));
    }
  }
  return keys.filter((k): k is Image => k !== undefined);
}

function forward(
  target: URL,
  method: string,
  headers: IncomingHttpHeaders,
  body: Buffer,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        path: '/',
        method,
        headers: { ...headers, host: target.host },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 500, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Starts the proxy in front of the engine at `engineEndpoint`, keeping records of `tableName`'s changes. */
export async function startTableStream(options: {
  engineEndpoint: string;
  tableName: string;
  host?: string;
  port?: number;
  region?: string;
}): Promise<TableStream> {
  const target = new URL(options.engineEndpoint);
  const records: DynamoDBRecord[] = [];
  const images = new Map<string, Image>();
  const readBacks = new Map<string, Promise<void>>();
  let sequence = 0n;
  const region = options.region ?? 'us-east-1';
  const streamArn = `arn:aws:dynamodb:${region}:000000000000:table/${options.tableName}/stream/local`;

  const readBack = (key: Image, headers: IncomingHttpHeaders) => {
    const id = `${key.pk?.S}\n${key.sk?.S}`;
    const next = (readBacks.get(id) ?? Promise.resolve()).then(async () => {
      const body = Buffer.from(
        JSON.stringify({ TableName: options.tableName, Key: key, ConsistentRead: true }),
      );
      const getItem = () =>
        forward(
          target,
          'POST',
          { ...headers, 'x-amz-target': 'DynamoDB_20120810.GetItem', 'content-length': String(body.length) },
          body,
        );
      // The write is applied: its change must be kept, as DynamoDB's stream never drops one. A read-back that keeps
      // failing answers the writer 500 rather than leave the change out unsaid.
      let answer = await getItem();
      for (let tries = 1; answer.status !== 200 && tries < READ_BACK_TRIES; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 20 * tries));
        answer = await getItem();
      }
      if (answer.status !== 200)
        throw new Error(`the stream stand-in could not read back a changed item (${answer.status})`);
      const after = (JSON.parse(answer.body.toString('utf8')) as { Item?: Image }).Item;
      const before = images.get(id);
      if (JSON.stringify(after) === JSON.stringify(before)) return;
      if (after) images.set(id, after);
      else images.delete(id);
      sequence += 1n;
      records.push({
        eventID: `local-${sequence}`,
        eventName: !after ? 'REMOVE' : before ? 'MODIFY' : 'INSERT',
        eventVersion: '1.1',
        eventSource: 'aws:dynamodb',
        awsRegion: region,
        eventSourceARN: streamArn,
        dynamodb: {
          ApproximateCreationDateTime: Math.floor(Date.now() / 1000),
          Keys: key,
          ...(after ? { NewImage: after } : {}),
          ...(before ? { OldImage: before } : {}),
          SequenceNumber: String(100_000_000_000_000_000_000n + sequence),
          SizeBytes: JSON.stringify(after ?? before ?? key).length,
          StreamViewType: 'NEW_AND_OLD_IMAGES',
        },
      });
    });
    const settled = next.catch(() => undefined);
    readBacks.set(id, settled);
    // The chain of an item no write waits on is forgotten (its last image stays, the next OldImage).
    void settled.then(() => {
      if (readBacks.get(id) === settled) readBacks.delete(id);
    });
    return next;
  };

  const server = createServer(async (req, res) => {
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks);
      const answer = await forward(target, req.method ?? 'POST', req.headers, body);
      const operation = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
      if (answer.status === 200 && WRITES.has(operation)) {
        const input = JSON.parse(body.toString('utf8') || '{}') as Record<string, unknown>;
        const headers = { ...req.headers };
        delete headers['content-length'];
        await Promise.all(
          keysWritten(operation, input, options.tableName).map((key) => readBack(key, headers)),
        );
      }
      res.writeHead(answer.status, answer.headers);
      res.end(answer.body);
    } catch (error) {
      res.writeHead(500, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify({ __type: 'InternalFailure', message: (error as Error).message }));
    }
  });
  server.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const address = server.address() as AddressInfo;
  return {
    endpoint: `http://${options.host ?? '127.0.0.1'}:${address.port}`,
    arn: streamArn,
    records,
    pending: () => records.length,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type StreamHandler = (
  event: DynamoDBStreamEvent,
  context: ReturnType<typeof lambdaContext>,
) => Promise<DynamoDBBatchResponse | undefined>;

/**
 * Delivers the stream's records to `handler`, `batchSize` at a time, those `accept` refuses dropped unseen (the
 * event source mapping's filter). In the background every `intervalMs` unless `background` is false; `drain()`
 * delivers everything kept now.
 */
export function pollTableStream(
  stream: TableStream,
  handler: StreamHandler,
  options: {
    accept?: (record: DynamoDBRecord) => boolean;
    batchSize?: number;
    intervalMs?: number;
    background?: boolean;
  } = {},
) {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();
  let delivering: Promise<number> = Promise.resolve(0);
  const once = async (): Promise<number> => {
    const batch: DynamoDBRecord[] = [];
    while (batch.length < (options.batchSize ?? 100) && stream.records.length > 0) {
      const record = stream.records.shift() as DynamoDBRecord;
      if (!options.accept || options.accept(record)) batch.push(record);
    }
    if (batch.length === 0) return 0;
    let retryFrom = 0;
    try {
      const result = await invokeHandler(handler, { Records: batch }, lambdaContext('attempt-feed'));
      const failed = result?.batchItemFailures?.[0]?.itemIdentifier;
      retryFrom =
        failed === undefined ? batch.length : batch.findIndex((r) => r.dynamodb?.SequenceNumber === failed);
      if (retryFrom < 0) retryFrom = 0;
    } catch {
      // The whole batch failed: it is sent again.
    }
    stream.records.unshift(...batch.slice(retryFrom));
    return retryFrom === 0 ? -1 : batch.length;
  };
  const serial = () => {
    delivering = delivering.then(once, once);
    return delivering;
  };
  const loop = async () => {
    while (!stopped) {
      const delivered = await serial().catch(() => -1);
      if (delivered <= 0) await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 1_000));
    }
  };
  if (options.background ?? true) running = loop();
  return {
    /** Delivers until nothing is kept, or a batch fails (it stays kept). */
    drain: async () => {
      for (;;) {
        const delivered = await serial();
        if (delivered <= 0) return;
      }
    },
    stop: async () => {
      stopped = true;
      await running;
    },
  };
}
