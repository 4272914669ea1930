/**
 * Scheduled redirect sync: every new or changed live survey gets this receiver's redirects and postbacks, and
 * surveys that failed before are retried. Stops taking up surveys 30 s before the Lambda's deadline; the next
 * run continues from the checkpoint.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { createDocumentClient, createSurveyRegistry } from './ledger/ledger-store';
import { failuresOf, redirectConfiguration, type SyncReport } from './marketplace/redirect-configuration';
import { keyRingSource } from './runtime/key-ring-source';
import { marketplaceFromEnvironment } from './runtime/marketplace-access';
import { count, logger, publish } from './runtime/observability';
import { readRedirectSyncConfig } from './runtime/runtime-config';

const DEADLINE_MARGIN_MS = 30_000;

const config = readRedirectSyncConfig();
const configuration = redirectConfiguration({
  marketplace: marketplaceFromEnvironment(),
  registry: createSurveyRegistry(
    createDocumentClient({
      region: config.region,
      endpoint: config.dynamoEndpoint,
      requestTimeoutMs: config.storeTimeoutMs,
    }),
    config.tableName,
  ),
  keyRing: keyRingSource(config.keyRing),
  publicBaseUrl: config.publicBaseUrl,
  methods: config.methods,
  concurrency: config.concurrency,
  ...(config.initialSince ? { initialSince: config.initialSince } : {}),
});

export interface SyncSummary {
  readonly since: string;
  readonly checkpoint?: string;
  readonly counts: Record<string, number>;
  readonly failed: { surveyId: string; error: string }[];
  readonly malformedRows: number;
}

export function summarize(report: SyncReport): SyncSummary {
  const counts: Record<string, number> = {};
  for (const result of report.results) counts[result.status] = (counts[result.status] ?? 0) + 1;
  return {
    since: report.since,
    ...(report.checkpoint ? { checkpoint: report.checkpoint } : {}),
    counts,
    failed: failuresOf(report.results).map((r) => ({
      surveyId: r.surveyId,
      error: r.status === 'failed' ? r.error : '',
    })),
    malformedRows: report.malformed.length,
  };
}

export const handler = middy<unknown, SyncSummary>()
  .use(injectLambdaContext(logger, { resetKeys: true }))
  .handler(async (_event: unknown, context: Context) => {
    const deadline = new Date(Date.now() + context.getRemainingTimeInMillis() - DEADLINE_MARGIN_MS);
    const summary = summarize(await configuration.sync({ deadline }));
    publish('RedirectsApplied', summary.counts.applied ?? 0, {});
    if (summary.failed.length > 0) {
      count('RedirectSyncFailures');
      logger.warn('redirect sync finished with failures', { ...summary });
    } else {
      logger.info('redirect sync finished', { ...summary });
    }
    return summary;
  });
