/**
 * A loopback proxy in front of the engine that records every DynamoDB operation it forwards and can answer
 * with the faults a real table produces (throttling, 5xx, silence), so tests see the real wire protocol.
 */
import { createServer, request as forward } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * `lost-answer`: the request reaches the engine and is applied, but its answer never reaches the client. `garbled`:
 * applied, and answered 200 with its body cut short (a proxy or a connection that ends the answer early).
 */
export type Fault = 'throttle' | 'server-error' | 'hang' | 'lost-answer' | 'garbled';
export type FaultPlan = (operation: string, index: number) => Fault | undefined;

export interface EngineProxy {
  readonly endpoint: string;
  /** Operation names (e.g. UpdateItem) in the order they arrived, faulted ones included. */
  readonly operations: string[];
  faults(plan: FaultPlan | undefined): void;
  stop(): Promise<void>;
}

const FAULT_RESPONSES = {
  throttle: {
    status: 400,
    body: {
      __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
      message: 'throttled (injected)',
    },
  },
  'server-error': {
    status: 500,
    body: { __type: 'com.amazon.coral.service#InternalFailure', message: 'injected' },
  },
} as const;

export async function startEngineProxy(target: string): Promise<EngineProxy> {
  const targetUrl = new URL(target);
  const operations: string[] = [];
  let plan: FaultPlan | undefined;
  const hanging = new Set<import('node:http').ServerResponse>();
  const server = createServer((req, res) => {
    const operation =
      String(req.headers['x-amz-target'] ?? '')
        .split('.')
        .pop() ?? '';
    const index = operations.push(operation) - 1;
    /** The request as it came, sent on to the engine; `onAnswer` gets the engine's answer. */
    const toEngine = (onAnswer: (answer: import('node:http').IncomingMessage) => void) =>
      forward(
        {
          host: targetUrl.hostname,
          port: targetUrl.port,
          method: req.method,
          path: req.url,
          headers: req.headers,
        },
        onAnswer,
      );
    const fault = plan?.(operation, index);
    if (fault === 'hang') {
      hanging.add(res);
      req.resume();
      return;
    }
    if (fault === 'lost-answer') {
      hanging.add(res);
      const upstream = toEngine((answer) => answer.resume());
      upstream.on('error', () => undefined);
      req.pipe(upstream);
      return;
    }
    if (fault === 'garbled') {
      const upstream = toEngine((answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          const body = Buffer.concat(chunks);
          res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
          res.end(body.subarray(0, Math.max(1, Math.floor(body.length / 2))));
        });
      });
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
      return;
    }
    if (fault) {
      const { status, body } = FAULT_RESPONSES[fault];
      req.resume();
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify(body));
      return;
    }
    const upstream = toEngine((answer) => {
      res.writeHead(answer.statusCode ?? 500, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    if (operation !== 'Query') {
      req.pipe(upstream);
      return;
    }
    // A Query is read whole first, to refuse what DynamoDB refuses and the engine lets through.
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const problem = strictQueryProblem(body.toString('utf8'));
      if (problem) {
        upstream.destroy();
        res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
        res.end(
          JSON.stringify({ __type: 'com.amazon.coral.validate#ValidationException', message: problem }),
        );
        return;
      }
      upstream.end(body);
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    operations,
    faults(next) {
      plan = next;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * What DynamoDB refuses in a Query that dynalite accepts: an empty string as a key-condition value ("One or more
 * parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value").
 */
function strictQueryProblem(body: string): string | undefined {
  let input: { KeyConditionExpression?: string; ExpressionAttributeValues?: Record<string, { S?: string }> };
  try {
    input = JSON.parse(body);
  } catch {
    return undefined;
  }
  const condition = input.KeyConditionExpression ?? '';
  for (const [name, value] of Object.entries(input.ExpressionAttributeValues ?? {})) {
    if (value.S === '' && new RegExp(`${name}\\b`).test(condition))
      return 'One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value.';
  }
  return undefined;
}
