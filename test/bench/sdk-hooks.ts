/**
 * Hooks on the AWS SDK that the benchmarks need, installed on the CommonJS copies the handlers load (the SDK
 * packages resolve to their `main` builds under Node), before any handler is imported:
 *
 * - `answerInMemory` replaces the HTTP handler's socket round trip with an answer built in memory, so a hit
 *   runs everything (middleware, parsing, signature check, marshalling, SigV4 signing, response parsing)
 *   except the network;
 * - `recordCommands` asks the engine for the capacity each DynamoDB command consumed and records it.
 */
import { createRequire } from 'node:module';
import { Readable } from 'node:stream';

const require = createRequire(import.meta.url);

interface HttpRequest {
  headers: Record<string, string>;
  body?: unknown;
}

/**
 * Answers every DynamoDB request in memory: `answer` gets the operation (`UpdateItem`, ...) and the request's
 * JSON and returns the response's JSON. Returns a counter of the requests answered.
 */
export function answerInMemory(answer: (operation: string, request: unknown) => unknown): () => number {
  const { NodeHttpHandler } = require('@smithy/node-http-handler');
  const { HttpResponse } = require('@smithy/core/transport');
  let answered = 0;
  NodeHttpHandler.prototype.handle = async (request: HttpRequest) => {
    answered++;
    const operation = (request.headers['x-amz-target'] ?? '').split('.').pop() ?? '';
    const body = Buffer.from(JSON.stringify(answer(operation, JSON.parse(bodyText(request.body)))));
    return {
      response: new HttpResponse({
        statusCode: 200,
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'content-length': String(body.length),
          'x-amzn-requestid': 'in-memory',
        },
        body: Readable.from([body]),
      }),
    };
  };
  return () => answered;
}

const bodyText = (body: unknown): string =>
  body instanceof Uint8Array
    ? Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')
    : String(body ?? '{}');

/**
 * Answers every command any SDK client sends in memory, before the SDK's request pipeline runs: `answer` gets the
 * command's name (`Update`, `UpdateItem`, ...) and input and returns its output. Returns a counter of the calls.
 */
export function answerSendInMemory(
  answer: (command: string, input: Record<string, unknown>) => unknown,
): () => number {
  const { Client } = require('@smithy/core/client');
  let answered = 0;
  Client.prototype.send = async (command: {
    constructor: { name: string };
    input: Record<string, unknown>;
  }) => {
    answered++;
    return answer(command.constructor.name.replace(/Command$/, ''), command.input);
  };
  return () => answered;
}

/**
 * The read units a Query is billed, from what the engine reported: DynamoDB bills a query that returns nothing its
 * read's minimum (half a unit eventually consistent, one consistent), which dynalite reports as 0.
 */
export function billedQueryUnits(reported: number, input: Record<string, unknown>): number {
  return Math.max(reported, input.ConsistentRead === true ? 1 : 0.5);
}

interface Consumed {
  CapacityUnits?: number;
  Table?: { CapacityUnits?: number };
}

export interface CommandRecord {
  readonly command: string;
  /** Capacity units the engine reported, table and indexes; absent on errors. */
  readonly capacity?: { total: number; table?: number };
  readonly error?: string;
}

/**
 * Records every DynamoDB command any client sends while `recording` says so, with ReturnConsumedCapacity set
 * so the engine reports what the command consumed.
 */
export function recordCommands(recording: () => boolean): CommandRecord[] {
  const { Client } = require('@smithy/core/client');
  const records: CommandRecord[] = [];
  const send = Client.prototype.send;
  Client.prototype.send = async function (
    this: unknown,
    command: { constructor: { name: string }; input: Record<string, unknown> },
    ...rest: unknown[]
  ) {
    if (!recording() || !('TableName' in command.input || 'RequestItems' in command.input))
      return send.call(this, command, ...rest);
    command.input.ReturnConsumedCapacity = 'INDEXES';
    const name = command.constructor.name.replace(/Command$/, '');
    try {
      const output = await send.call(this, command, ...rest);
      // Batch operations report a list, one entry per table.
      const reported = output.ConsumedCapacity as Consumed | Consumed[] | undefined;
      const consumed = Array.isArray(reported)
        ? reported.reduce<Consumed>(
            (sum, c) => ({
              CapacityUnits: (sum.CapacityUnits ?? 0) + (c.CapacityUnits ?? 0),
              Table: { CapacityUnits: (sum.Table?.CapacityUnits ?? 0) + (c.Table?.CapacityUnits ?? 0) },
            }),
            {},
          )
        : reported;
      const reportedTotal = consumed?.CapacityUnits ?? 0;
      records.push({
        command: name,
        ...(consumed
          ? {
              capacity: {
                total: name === 'Query' ? billedQueryUnits(reportedTotal, command.input) : reportedTotal,
                ...(consumed.Table?.CapacityUnits !== undefined
                  ? { table: consumed.Table.CapacityUnits }
                  : {}),
              },
            }
          : {}),
      });
      return output;
    } catch (error) {
      records.push({ command: name, error: (error as Error).name });
      throw error;
    }
  };
  return records;
}
