/**
 * What both receivers build once per container: configuration, the ledger, the key ring, the durable buffer
 * (when configured) and the postback source allow-list (when configured).
 */
import { createDocumentClient, createLedgerStore } from '../ledger/ledger-store';
import { type HitBuffer, sqsHitBuffer } from './hit-buffer';
import { keyRingSource } from './key-ring-source';
import { readReceiverConfig } from './runtime-config';
import { parseAllowList } from './source-allow-list';

export function receiverContext() {
  const config = readReceiverConfig();
  const store = createLedgerStore(
    createDocumentClient({
      region: config.region,
      endpoint: config.dynamoEndpoint,
      requestTimeoutMs: config.storeTimeoutMs,
    }),
    config.tableName,
  );
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
