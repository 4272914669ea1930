/**
 * Imported first by the CLI. The CLI is no Lambda environment running invocations side by side: a variable that
 * says so, inherited from a local stack's process (infra/local/invocation.ts), would make Powertools look for a
 * per-invocation store that is not there, and every log line fail.
 */
delete process.env.AWS_LAMBDA_MAX_CONCURRENCY;
