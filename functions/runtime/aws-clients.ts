/**
 * The one place the functions' AWS clients are built from configuration: the ledger's document client and the
 * stores over it, and what both receivers need (key ring, buffer, allow-list). Each entry file calls these once
 * per container; tests build the same handlers from the engine's stores instead.
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { feedCoverage } from '../ledger/feed-coverage';
import { createDocumentClient, createLedgerStore } from '../ledger/ledger-store';
import { type HitBuffer, sqsHitBuffer } from './hit-buffer';
import { keyRingSource } from './key-ring-source';
import { type LedgerConnection, readReceiverConfig } from './runtime-config';
import { parseAllowList } from './source-allow-list';

type StoreFactory = (client: DynamoDBDocumentClient, tableName: string) => unknown;

/**
 * One document client for the configured ledger, and the stores a function asks for over it:
 * `openLedger(config, { attempts: createLedgerStore, results: createReconciliationStore })`. The stores are named
 * by the caller so a bundle holds only the store modules its function uses.
 */
export function openLedger<const S extends Record<string, StoreFactory>>(
  connection: LedgerConnection,
  stores: S,
): { [K in keyof S]: ReturnType<S[K]> } {
  const client = createDocumentClient({
    region: connection.region,
    endpoint: connection.dynamoEndpoint,
    requestTimeoutMs: connection.storeTimeoutMs,
  });
  return Object.fromEntries(
    Object.entries(stores).map(([name, create]) => [name, create(client, connection.tableName)]),
  ) as { [K in keyof S]: ReturnType<S[K]> };
}

/**
 * The hit path's store when the table keeps the attempt feed: attempts the feed covers stay out of the day index
 * (ledger/feed-coverage.ts).
 */
export const feedCoveredStore =
  (stream: string | undefined) => (client: DynamoDBDocumentClient, tableName: string) =>
    createLedgerStore(client, tableName, undefined, {
      indexFree: feedCoverage(client, tableName, { stream }).covers,
    });

/** What both receivers build once per container, from their configuration. */
export function receiverContext() {
  const config = readReceiverConfig();
  const { store } = openLedger(config, {
    store: config.attemptFeed ? feedCoveredStore(config.feedStream) : createLedgerStore,
  });
  const buffer: HitBuffer | undefined = config.buffer
    ? sqsHitBuffer(config.buffer.queueUrl, { endpoint: config.buffer.endpoint, region: config.region })
    : undefined;
  return {
    config,
    store,
    keyRing: keyRingSource(config.keyRing),
    buffer,
    postbackSources: parseAllowList(config.postbackSources),
  };
}
