/**
 * What every CLI command needs: the store, the key ring, the marketplace and the public base URL. By default the
 * CLI talks to the local stack; with RECEIVER_TARGET=aws it uses the AWS credentials and the variables of the
 * deployed stack. The hit buffer's dead-letter queue has a context of its own, as it needs none of the rest.
 */

import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { type AttemptFeed, createAttemptFeed, NO_STREAM } from '../ledger/attempt-feed';
import { type FeedAwareLookups, feedAwareLookups } from '../ledger/attempt-lookup';
import { type AttemptReindex, createAttemptReindex } from '../ledger/attempt-reindex';
import { createFeedRebuild, type FeedRebuild } from '../ledger/feed-rebuild';
import {
  createDayIndexBackfill,
  createHealthStore,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
  type DayIndexBackfill,
  type HealthStore,
  type LedgerStore,
  type ReconciliationStore,
  type SurveyRegistry,
} from '../ledger/ledger-store';
import type { MarketplaceClient } from '../marketplace/marketplace-client';
import type { KeyRing } from '../receiving/signing';
import { openLedger } from '../runtime/aws-clients';
import { type DeadLetters, sqsDeadLetters } from '../runtime/dead-letters';
import { type KeyRingStore, keyRingStore } from '../runtime/key-ring-source';
import { applyLocalDefaults, localQueueUrls } from '../runtime/local-stack-defaults';
import { marketplaceFromEnvironment } from '../runtime/marketplace-access';
import { keyRingLocation } from '../runtime/runtime-config';
import { keyRingWarnings, storedKeyRing } from './key-ring-check';
import { complain } from './terminal';

export interface CliContext {
  /** The ledger, its look-ups through the day index made whole with the attempt feed (attempt-lookup.ts). */
  readonly store: LedgerStore & Pick<FeedAwareLookups, 'feedBehindSince'>;
  /** The attempt feed, if the table keeps one (its state says). */
  readonly feed: AttemptFeed;
  /**
   * The attempt feed as the deployed functions read it, for the commands that read as they do (`reconcile`,
   * `health`): none on a table that no longer keeps a stream (the feed turned off leaves its start mark behind).
   */
  readonly feedAsDeployed: AttemptFeed;
  readonly registry: SurveyRegistry;
  readonly results: ReconciliationStore;
  readonly dayIndex: DayIndexBackfill;
  readonly feedRebuild: FeedRebuild;
  readonly reindex: AttemptReindex;
  readonly health: HealthStore;
  readonly keyRing: () => Promise<KeyRing>;
  /** Where the key ring is kept, for rotation. */
  readonly keyRingStore: KeyRingStore;
  readonly publicBaseUrl: string;
  /**
   * The postbacks' own host (POSTBACK_BASE_URL, the stack output PostbackApiUrl); locally PUBLIC_BASE_URL when unset,
   * against AWS required (read only by the commands that build URLs).
   */
  readonly postbackBaseUrl: string;
  readonly target: 'local' | 'aws';
  /** The marketplace client, built on first use (only some commands need it). */
  marketplace(): MarketplaceClient;
}

export function cliContext(env: NodeJS.ProcessEnv = process.env): CliContext {
  // Spelled otherwise (`AWS`, `prod`), it would run against the local stack and say only that it is not running.
  const asked = env.RECEIVER_TARGET?.trim() || 'local';
  if (asked !== 'aws' && asked !== 'local')
    throw new Error(`RECEIVER_TARGET must be aws or local, not ${JSON.stringify(env.RECEIVER_TARGET)}`);
  const target = asked;
  if (target === 'local') applyLocalDefaults(env);
  const missing = ['TABLE_NAME', 'PUBLIC_BASE_URL'].filter((name) => !env[name]);
  if (!env.SIGNING_KEYS_SECRET_ID && !env.SIGNING_KEYS_FILE && !env.SIGNING_KEYS)
    missing.push('SIGNING_KEYS_SECRET_ID');
  // In AWS every client must address the stack's region: the ledger's and the secrets' (Powertools builds its own
  // client from the environment) alike. A profile's region would reach some clients and not others.
  if (target === 'aws') {
    // Only a region given: assigning undefined to process.env stores the string "undefined".
    if (!env.AWS_REGION && env.AWS_DEFAULT_REGION) env.AWS_REGION = env.AWS_DEFAULT_REGION;
    if (!env.AWS_REGION) missing.push("AWS_REGION (the stack's region)");
  }
  if (missing.length > 0) throw new Error(`set ${missing.join(', ')} (RECEIVER_TARGET=${target})`);
  const ledger = openLedger(
    {
      tableName: env.TABLE_NAME as string,
      region: env.AWS_REGION ?? 'us-east-1',
      dynamoEndpoint: env.DYNAMODB_ENDPOINT,
      storeTimeoutMs: 2000,
    },
    {
      store: createLedgerStore,
      feed: createAttemptFeed,
      feedAsDeployed: (client: DynamoDBDocumentClient, tableName: string) =>
        createAttemptFeed(client, tableName, { stream: deployedStream(env, target, client, tableName) }),
      registry: createSurveyRegistry,
      results: createReconciliationStore,
      dayIndex: createDayIndexBackfill,
      feedRebuild: createFeedRebuild,
      reindex: createAttemptReindex,
      health: createHealthStore,
    },
  );
  const ringAt = keyRingLocation(env);
  const keys = keyRingStore(ringAt);
  /** The ring's hand-edit warnings, said once a process (a ring that does not parse fails on its own). */
  let ringChecked = false;
  const checkedRing = async () => {
    const ring = await keys.load({ fresh: true });
    if (!ringChecked) {
      ringChecked = true;
      const raw = await storedKeyRing(ringAt).catch(() => undefined);
      for (const warning of raw === undefined ? [] : keyRingWarnings(raw)) complain(`warning: ${warning}`);
    }
    return ring;
  };
  let marketplace: MarketplaceClient | undefined;
  const { feed, ...stores } = ledger;
  return {
    ...stores,
    feed,
    // A table whose receivers leave attempts the attempt feed covers out of the day index is looked up in both.
    store: { ...stores.store, ...feedAwareLookups(stores.store, feed) },
    keyRing: checkedRing,
    keyRingStore: keys,
    publicBaseUrl: env.PUBLIC_BASE_URL as string,
    // Against AWS the postbacks have an API of their own: built on the public host by default, an apply would point
    // every survey's postbacks back at it (asked for only by the commands that build URLs).
    get postbackBaseUrl() {
      if (!env.POSTBACK_BASE_URL && target === 'aws')
        throw new Error(
          "set POSTBACK_BASE_URL (the stack's PostbackApiUrl output): the surveys' postbacks go to the postback API, and built on PUBLIC_BASE_URL they would be pointed back at the public host",
        );
      return env.POSTBACK_BASE_URL || (env.PUBLIC_BASE_URL as string);
    },
    target,
    marketplace: () => {
      marketplace ??= marketplaceFromEnvironment(env);
      return marketplace;
    },
  };
}

/**
 * The table's stream as the deployed functions know it (their ATTEMPT_FEED_STREAM): ATTEMPT_FEED=off, none;
 * ATTEMPT_FEED_STREAM, that one; in AWS otherwise the table's own, asked once (DescribeTable), none when it keeps no
 * stream; locally (a fresh engine each start) whichever marked the start.
 */
function deployedStream(
  env: NodeJS.ProcessEnv,
  target: 'local' | 'aws',
  client: DynamoDBDocumentClient,
  tableName: string,
): string | (() => Promise<string | undefined>) | undefined {
  if (env.ATTEMPT_FEED === 'off') return NO_STREAM;
  if (env.ATTEMPT_FEED_STREAM) return env.ATTEMPT_FEED_STREAM;
  if (target !== 'aws') return undefined;
  return async () => {
    try {
      const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
      return Table?.StreamSpecification?.StreamEnabled && Table.LatestStreamArn
        ? Table.LatestStreamArn
        : NO_STREAM;
    } catch (error) {
      complain(
        `warning: the table's stream could not be read (${error instanceof Error ? error.name : 'error'}): the attempt feed is taken to be on while its start mark says so; set ATTEMPT_FEED=off if it is turned off`,
      );
      return undefined;
    }
  };
}

/**
 * The hit buffer's dead-letter queue. Locally, the stand-in's at SQS_ENDPOINT (what `npm start` prints as "Hit
 * buffer"; http://127.0.0.1:9324 by default). In AWS, DEAD_LETTER_QUEUE_URL: the stack's DeadLetterQueueUrl output,
 * in whose region the queue is addressed whatever AWS_REGION says. The buffer queue is found from it (SQS's
 * redrive policy), so one URL is all an operator gives.
 */
export function cliDeadLetters(env: NodeJS.ProcessEnv = process.env): DeadLetters {
  if (env.RECEIVER_TARGET !== 'aws') {
    applyLocalDefaults(env);
    const endpoint = env.SQS_ENDPOINT as string;
    return sqsDeadLetters(localQueueUrls(endpoint).deadLetterUrl, { endpoint, region: env.AWS_REGION });
  }
  const url = env.DEAD_LETTER_QUEUE_URL;
  if (!url)
    throw new Error('set DEAD_LETTER_QUEUE_URL, the stack output DeadLetterQueueUrl (RECEIVER_TARGET=aws)');
  return sqsDeadLetters(url, { region: regionOfQueue(url) ?? env.AWS_REGION });
}

/** The region in a queue URL (`https://sqs.<region>.amazonaws.com/...` or the older `https://<region>.queue...`). */
function regionOfQueue(url: string): string | undefined {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    throw new Error(`DEAD_LETTER_QUEUE_URL is not a URL: ${url}`);
  }
  return (
    /^sqs\.([a-z0-9-]+)\.amazonaws\.com/.exec(host)?.[1] ??
    /^([a-z0-9-]+)\.queue\.amazonaws\.com/.exec(host)?.[1]
  );
}

/**
 * Says on standard error which of the surveys an operator named have no registration here (an id mistyped, or
 * redirects configured by hand), and what follows for them, rather than going on as if nothing were odd.
 */
export async function noteUnregistered(
  registry: Pick<SurveyRegistry, 'get'>,
  surveyIds: readonly string[],
  consequence: string,
): Promise<void> {
  for (const surveyId of await unregistered(registry, surveyIds))
    complain(`note: survey ${surveyId} has no redirects registered here; ${consequence}`);
}

/** Which of the surveys named have no registration here. */
export async function unregistered(
  registry: Pick<SurveyRegistry, 'get'>,
  surveyIds: readonly string[],
): Promise<string[]> {
  const missing: string[] = [];
  // One recorded only as removed by `redirects remove` (another stack's, `neverApplied`) is not registered here.
  for (const surveyId of surveyIds) {
    const registration = await registry.get(surveyId);
    if (!registration || registration.neverApplied) missing.push(surveyId);
  }
  return missing;
}
