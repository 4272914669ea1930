/**
 * The local stack runs every function in one process, invocations side by side: each must log under its own
 * function name and request id, not those of whichever invocation started last.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import { afterEach, beforeAll, expect, it, vi } from 'vitest';
import { lambdaContext } from '../../infra/local/api-gateway';
import { invokeHandler } from '../../infra/local/invocation';

let logger: typeof import('../../functions/runtime/observability')['logger'];
beforeAll(async () => {
  // The tests' environment silences logs; the logger reads its level when it is made.
  process.env.POWERTOOLS_LOG_LEVEL = 'WARN';
  ({ logger } = await import('../../functions/runtime/observability'));
});
afterEach(() => vi.restoreAllMocks());

it('two functions invoked side by side log each under its own name and request id', async () => {
  const written: string[] = [];
  const record = (chunk: unknown) => {
    written.push(String(chunk));
    return true;
  };
  vi.spyOn(process.stdout, 'write').mockImplementation(record);
  vi.spyOn(process.stderr, 'write').mockImplementation(record);
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const logging = (marker: string, wait?: Promise<void>) =>
    middy()
      .use(injectLambdaContext(logger, { resetKeys: true }))
      .handler(async () => {
        await wait;
        logger.warn(marker);
      });
  // A scheduled run starts, a hit comes in and is handled while the run waits, then the run logs.
  const run = invokeHandler(logging('run-marker', gate), {}, lambdaContext('reconcile', 'request-run'));
  await invokeHandler(logging('hit-marker'), {}, lambdaContext('postback', 'request-hit'));
  release();
  await run;
  vi.restoreAllMocks();
  const entry = (marker: string) =>
    JSON.parse(written.find((chunk) => chunk.includes(marker)) ?? '{}') as Record<string, unknown>;
  expect(entry('run-marker')).toMatchObject({
    function_name: 'reconcile',
    function_request_id: 'request-run',
  });
  expect(entry('hit-marker')).toMatchObject({
    function_name: 'postback',
    function_request_id: 'request-hit',
  });
});
