// Imports one bundle in a fresh process, as the Lambda runtime does, and prints how long that took in ms
// (module evaluation, client construction included). With PROBE_EVENT (JSON) it then invokes the handler once
// with that event, as Lambda's first invocation of a new container, and prints that hit's time and status code
// too: whatever the handler loads or fetches on its first call (the key ring) is in it. Plain JavaScript, so no
// loader adds to the figures.
const started = performance.now();
const bundle = await import(process.argv[2]);
const importMs = performance.now() - started;
if (!process.env.PROBE_EVENT) {
  process.stdout.write(`${importMs}\n`);
} else {
  const context = {
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${process.env.AWS_LAMBDA_FUNCTION_NAME}`,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsRequestId: 'probe-request',
    logGroupName: '/aws/lambda/probe',
    logStreamName: 'probe',
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => 10_000,
    done() {},
    fail() {},
    succeed() {},
  };
  const hitStarted = performance.now();
  const result = await bundle.handler(JSON.parse(process.env.PROBE_EVENT), context);
  const hitMs = performance.now() - hitStarted;
  // The SDK's keep-alive sockets would hold the process open: a container is frozen here, not ended.
  process.stdout.write(`${importMs} ${hitMs} ${result?.statusCode ?? '-'}\n`, () => process.exit(0));
}
