/**
 * The embedded DynamoDB-protocol engine (dynalite, in memory) and the ledger table inside it, created from
 * the same schema the CDK stack deploys.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  ResourceInUseException,
} from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { LEDGER } from '../../functions/ledger/ledger-schema';

export interface Engine {
  readonly endpoint: string;
  stop(): Promise<void>;
}

/** Starts an in-memory engine on the host and port given (port 0 picks a free one). */
export async function startEngine(host = '127.0.0.1', port = 0): Promise<Engine> {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  server.listen(port, host);
  await once(server, 'listening');
  const address = server.address() as AddressInfo;
  return {
    endpoint: `http://${host}:${address.port}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Creates the ledger table if it is not there yet, and waits until it is active. */
export async function ensureLedgerTable(
  endpoint: string,
  tableName: string,
  region = 'us-east-1',
): Promise<void> {
  const client = new DynamoDBClient({
    endpoint,
    region,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  const { partitionKey, sortKey, index, discrepancyIndex } = LEDGER;
  try {
    await client.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [
          partitionKey,
          sortKey,
          index.partitionKey,
          index.sortKey,
          discrepancyIndex.partitionKey,
          discrepancyIndex.sortKey,
        ].map((name) => ({
          AttributeName: name,
          AttributeType: 'S',
        })),
        KeySchema: [
          { AttributeName: partitionKey, KeyType: 'HASH' },
          { AttributeName: sortKey, KeyType: 'RANGE' },
        ],
        GlobalSecondaryIndexes: [
          {
            IndexName: index.name,
            KeySchema: [
              { AttributeName: index.partitionKey, KeyType: 'HASH' },
              { AttributeName: index.sortKey, KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'KEYS_ONLY' },
          },
          {
            IndexName: discrepancyIndex.name,
            KeySchema: [
              { AttributeName: discrepancyIndex.partitionKey, KeyType: 'HASH' },
              { AttributeName: discrepancyIndex.sortKey, KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'KEYS_ONLY' },
          },
        ],
      }),
    );
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
  for (let tries = 0; tries < 100; tries++) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    if (Table?.TableStatus === 'ACTIVE') break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  client.destroy();
}
