/**
 * The whole local stack in one call: the engine (unless DYNAMODB_ENDPOINT points at one already running),
 * the ledger table, and the API with the real handlers. Used by `npm start` and by the tests.
 */
import { FUNCTIONS, type FunctionName } from '../routes';
import { type LambdaHandler, type LocalApi, startApiGateway } from './api-gateway';
import { applyLocalDefaults } from './defaults';
import { type Engine, ensureLedgerTable, startEngine } from './engine';

export interface LocalStack {
  readonly apiUrl: string;
  readonly dynamoEndpoint: string;
  readonly tableName: string;
  stop(): Promise<void>;
}

export interface LocalStackOptions {
  /** Start an embedded engine (default) or use the one at DYNAMODB_ENDPOINT. */
  readonly embeddedEngine?: boolean;
}

/**
 * Starts the stack on the ports in the environment (PORT, DYNAMODB_PORT; 0 picks free ones). The handlers
 * read their configuration from the environment when first imported, so it is completed before that.
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const env = process.env;
  const embedded = options.embeddedEngine ?? env.DYNAMODB_ENDPOINT === undefined;
  let engine: Engine | undefined;
  if (embedded) {
    engine = await startEngine(env.LOCAL_HOST ?? '127.0.0.1', Number(env.DYNAMODB_PORT ?? 8000));
    env.DYNAMODB_ENDPOINT = engine.endpoint;
  }
  let api: LocalApi | undefined;
  try {
    applyLocalDefaults(env);
    await ensureLedgerTable(env.DYNAMODB_ENDPOINT as string, env.TABLE_NAME as string, env.AWS_REGION);
    api = await startApiGateway(await loadHandlers(), env.LOCAL_HOST, Number(env.PORT));
  } catch (error) {
    await engine?.stop();
    throw error;
  }
  if (env.PUBLIC_BASE_URL?.endsWith(':0')) env.PUBLIC_BASE_URL = api.url;
  const started = api;
  return {
    apiUrl: started.url,
    dynamoEndpoint: env.DYNAMODB_ENDPOINT as string,
    tableName: env.TABLE_NAME as string,
    async stop() {
      await started.stop();
      await engine?.stop();
    },
  };
}

async function loadHandlers(): Promise<Record<FunctionName, LambdaHandler>> {
  const entries = await Promise.all(
    (Object.keys(FUNCTIONS) as FunctionName[]).map(async (name) => {
      const module = (await import(`../../${FUNCTIONS[name].entry}`)) as { handler: LambdaHandler };
      return [name, module.handler] as const;
    }),
  );
  return Object.fromEntries(entries) as Record<FunctionName, LambdaHandler>;
}
