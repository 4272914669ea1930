/**
 * The whole local stack in one call: the engine (unless DYNAMODB_ENDPOINT points at one already running),
 * the ledger table, the API with the real handlers, and the local marketplace (unless MARKETPLACE_BASE_URL
 * points at a real one). Used by `npm start` and by the tests.
 */

import { applyLocalDefaults } from '../../functions/runtime/local-stack-defaults';
import { acceptedByFeed, FUNCTIONS, type FunctionName, QUEUE_FUNCTIONS, STREAM_FUNCTIONS } from '../routes';
import { type LambdaHandler, type LocalApi, startApiGateway } from './api-gateway';
import { type Engine, ensureLedgerTable, startEngine } from './engine';
import { type LocalMarketplace, startLocalMarketplace } from './marketplace/server';
import { type LocalQueue, pollQueue, type SqsHandler, startLocalQueue } from './queue';
import { pollTableStream, type StreamHandler, startTableStream } from './table-stream';

export interface LocalStack {
  readonly apiUrl: string;
  readonly dynamoEndpoint: string;
  readonly tableName: string;
  /** Whether this stack runs its own in-memory engine. */
  readonly embeddedEngine: boolean;
  /** The local marketplace, when this stack runs one. */
  readonly marketplace?: LocalMarketplace;
  /** The hit buffer and its drainer. */
  readonly buffer: LocalQueue;
  /** Delivers everything the buffer holds to the drainer now. */
  drainBuffer(): Promise<void>;
  /** With LOCAL_ATTEMPT_FEED=on: delivers every change the table's stream holds to the feed's consumer now. */
  drainFeed?: () => Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts the stack on the ports in the environment (PORT, DYNAMODB_PORT, MARKETPLACE_PORT, SQS_PORT; 0 picks free
 * ones). LOCAL_BUFFER_MAX_RECEIVES, when set, dead-letters buffered hits sooner than the deployed queue does.
 * LOCAL_ATTEMPT_FEED=on keeps the attempt feed as a deployment with `attemptFeed` does: the engine sits behind a
 * stand-in for the table's stream (table-stream.ts), which takes the engine's port, and the feed's consumer reads it.
 * The handlers read their configuration from the environment when first imported, so it is completed first.
 */
export async function startLocalStack(): Promise<LocalStack> {
  const env = process.env;
  applyLocalDefaults(env);
  const embeddedEngine = env.LOCAL_ENGINE === 'embedded';
  const localMarketplace = env.LOCAL_MARKETPLACE === 'local';
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop();
  };
  try {
    const attemptFeed = env.LOCAL_ATTEMPT_FEED === 'on';
    let engine: Engine | undefined;
    if (embeddedEngine) {
      engine = await startEngine(env.LOCAL_HOST, attemptFeed ? 0 : Number(env.DYNAMODB_PORT));
      env.DYNAMODB_ENDPOINT = engine.endpoint;
      stops.push(engine.stop);
    }
    let drainFeed: (() => Promise<void>) | undefined;
    if (attemptFeed) {
      const stream = await startTableStream({
        engineEndpoint: env.DYNAMODB_ENDPOINT as string,
        tableName: env.TABLE_NAME as string,
        host: env.LOCAL_HOST,
        port: embeddedEngine ? Number(env.DYNAMODB_PORT) : 0,
        region: env.AWS_REGION,
      });
      stops.push(stream.stop);
      env.DYNAMODB_ENDPOINT = stream.endpoint;
      // The health check and scheduled reconciliation read the feed, and the receivers leave the attempts it covers
      // out of the day index, as the deployed ones do with `attemptFeed`.
      env.ATTEMPT_FEED = 'on';
      env.ATTEMPT_FEED_STREAM = stream.arn;
      const { handler } = (await import(
        /* @vite-ignore */ `../../${STREAM_FUNCTIONS['attempt-feed'].entry}`
      )) as {
        handler: StreamHandler;
      };
      const consumer = pollTableStream(stream, handler, {
        accept: acceptedByFeed,
        background: env.LOCAL_FEED_CONSUMER !== 'manual',
      });
      stops.push(consumer.stop);
      drainFeed = consumer.drain;
    }
    let marketplace: LocalMarketplace | undefined;
    if (localMarketplace) {
      marketplace = await startLocalMarketplace({
        host: env.LOCAL_HOST,
        port: Number(env.MARKETPLACE_PORT),
        accessToken: env.MARKETPLACE_ACCESS_TOKEN as string,
        seed: Number(env.MARKETPLACE_SEED),
      });
      env.MARKETPLACE_BASE_URL = marketplace.url;
      stops.push(marketplace.stop);
    }
    await ensureLedgerTable(env.DYNAMODB_ENDPOINT as string, env.TABLE_NAME as string, env.AWS_REGION);
    const buffer = await startLocalQueue({
      host: env.LOCAL_HOST,
      port: Number(env.SQS_PORT),
      ...(env.LOCAL_BUFFER_MAX_RECEIVES ? { maxReceiveCount: Number(env.LOCAL_BUFFER_MAX_RECEIVES) } : {}),
    });
    stops.push(buffer.stop);
    env.HIT_BUFFER_QUEUE_URL = buffer.queueUrl;
    env.SQS_ENDPOINT = buffer.endpoint;
    const { handler: drain } = (await import(
      /* @vite-ignore */ `../../${QUEUE_FUNCTIONS['drain-buffer'].entry}`
    )) as {
      handler: SqsHandler;
    };
    const drainer = pollQueue(buffer, drain, { background: env.LOCAL_DRAINER !== 'manual' });
    stops.push(drainer.stop);
    const api: LocalApi = await startApiGateway(await loadHandlers(), env.LOCAL_HOST, Number(env.PORT));
    stops.push(api.stop);
    if (env.PUBLIC_BASE_URL?.endsWith(':0')) env.PUBLIC_BASE_URL = api.url;
    return {
      apiUrl: api.url,
      dynamoEndpoint: env.DYNAMODB_ENDPOINT as string,
      tableName: env.TABLE_NAME as string,
      embeddedEngine,
      buffer,
      drainBuffer: () => drainer.drain(),
      ...(drainFeed ? { drainFeed } : {}),
      ...(marketplace ? { marketplace } : {}),
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

async function loadHandlers(): Promise<Record<FunctionName, LambdaHandler>> {
  const entries = await Promise.all(
    (Object.keys(FUNCTIONS) as FunctionName[]).map(async (name) => {
      const module = (await import(/* @vite-ignore */ `../../${FUNCTIONS[name].entry}`)) as {
        handler: LambdaHandler;
      };
      return [name, module.handler] as const;
    }),
  );
  return Object.fromEntries(entries) as Record<FunctionName, LambdaHandler>;
}
