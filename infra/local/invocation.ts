/**
 * How the local stack calls a function's handler. Locally every function shares one process, and invocations run
 * side by side, as Lambda Managed Instances run them in one environment: each runs in its own InvokeStore context
 * (as Lambda's runtime does there, `AWS_LAMBDA_MAX_CONCURRENCY` set), so the shared logger's Lambda context (its
 * function name and request id) is the invocation's own and not that of whichever started last.
 */
import { InvokeStore, InvokeStoreBase } from '@aws/lambda-invoke-store';
import type { Context } from 'aws-lambda';

process.env.AWS_LAMBDA_MAX_CONCURRENCY ??= '64';
// Made now, before a handler's module makes its logger: Powertools looks for it once the variable is set.
const store = await InvokeStore.getInstanceAsync();

export function invokeHandler<E, R>(
  handler: (event: E, context: Context) => Promise<R>,
  event: E,
  context: Context,
): Promise<R> {
  return store.run({ [InvokeStoreBase.PROTECTED_KEYS.REQUEST_ID]: context.awsRequestId }, () =>
    handler(event, context),
  );
}
