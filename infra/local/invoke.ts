/**
 * `npm run invoke -- <function> <event-file>`: runs one handler on a sample event, as Lambda would, and prints
 * its result (the HTTP functions on events/apigw-v2/, the attempt feed's consumer on events/dynamodb-stream/). Uses the engine of a running `npm start` when there is one, otherwise a throwaway embedded one.
 */
import { readFile } from 'node:fs/promises';
import { applyLocalDefaults } from '../../functions/runtime/local-stack-defaults';
import { FUNCTIONS, STREAM_FUNCTIONS } from '../routes';
import { type LambdaHandler, lambdaContext } from './api-gateway';
import { ensureLedgerTable, startEngine } from './engine';
import { invokeHandler } from './invocation';

/** The functions a sample event can drive: those behind the routes, and the table stream's consumer. */
const INVOCABLE: Record<string, { readonly entry: string }> = { ...FUNCTIONS, ...STREAM_FUNCTIONS };
const [name, eventFile] = process.argv.slice(2);
const invoked = name === undefined ? undefined : INVOCABLE[name];
if (!name || !eventFile || !invoked) {
  console.error(`usage: npm run invoke -- <${Object.keys(INVOCABLE).join('|')}> <event-file>`);
  process.exit(2);
}

// The event first: a file that cannot be read is said so, before any engine starts.
const event = await readFile(eventFile, 'utf8')
  .then((text) => JSON.parse(text) as unknown)
  .catch((error: Error) => {
    console.error(`cannot read the event ${eventFile}: ${error.message} (samples are in events/)`);
    process.exit(2);
  });

const env = applyLocalDefaults();
let engine: Awaited<ReturnType<typeof startEngine>> | undefined;
// The stream's consumer always on a throwaway engine: a sample batch would mark a running stack's feed as begun on
// the sample's day, and its readers would trust the feed for days it does not hold.
const throwaway = name in STREAM_FUNCTIONS;
if (throwaway || (env.LOCAL_ENGINE === 'embedded' && !(await reachable(env.DYNAMODB_ENDPOINT as string)))) {
  engine = await startEngine();
  env.DYNAMODB_ENDPOINT = engine.endpoint;
  console.error(
    throwaway
      ? `(the stream's consumer runs on a throwaway engine at ${engine.endpoint}, never a running stack's)`
      : `(no engine at the default endpoint; using a throwaway one at ${engine.endpoint})`,
  );
}
await ensureLedgerTable(env.DYNAMODB_ENDPOINT as string, env.TABLE_NAME as string, env.AWS_REGION);

// A function's configuration is read as it is imported, as at a Lambda cold start: a bad setting is said by its
// message (naming the variable), as the CLI says it, not as a stack trace.
const { handler } = (await import(/* @vite-ignore */ `../../${invoked.entry}`).catch(
  async (error: unknown) => {
    console.error(`${name}: ${error instanceof Error ? error.message : String(error)}`);
    await engine?.stop();
    process.exit(1);
  },
)) as { handler: LambdaHandler };
const result = await invokeHandler(handler, event as Parameters<LambdaHandler>[0], lambdaContext(name));
console.log(JSON.stringify(result, null, 2));
await engine?.stop();

async function reachable(endpoint: string): Promise<boolean> {
  try {
    await fetch(endpoint, { signal: AbortSignal.timeout(500) });
    return true;
  } catch {
    return false;
  }
}
