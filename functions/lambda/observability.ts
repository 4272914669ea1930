/**
 * Logger and metrics shared by every handler in a container. Successful hits log at DEBUG only: the ledger is
 * their record, and a log line per hit would cost more than the hit's write. Rejections, conflicts and
 * failures log at WARN or ERROR and count as metrics.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';

const serviceName = process.env.POWERTOOLS_SERVICE_NAME ?? 'survey-receiver';

export const logger = new Logger({ serviceName });
export const metrics = new Metrics({
  namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? 'SurveyReceiver',
  serviceName,
});

/** The counters the receiver publishes. */
export type Counter =
  | 'RejectedPostback'
  | 'RejectedRedirect'
  | 'ConflictingHit'
  | 'StoreUnavailable'
  | 'RedirectNotRecorded'
  | 'InternalError'
  | 'RedirectSyncFailures'
  | 'ReconcileFailures'
  | 'BufferedHits'
  | 'BufferedHitNotRecorded'
  | 'RejectedSource';

export function count(counter: Counter, dimensions: Record<string, string> = {}): void {
  const single = metrics.singleMetric();
  for (const [name, value] of Object.entries(dimensions)) single.addDimension(name, value);
  single.addMetric(counter, MetricUnit.Count, 1);
}
