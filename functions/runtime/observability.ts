/**
 * Logger and metrics shared by every handler in a container. Successful hits log at DEBUG only: the ledger is
 * their record, and a log line per hit would cost more than the hit's write. Rejections, conflicts and
 * failures log at WARN or ERROR and count as metrics.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { printable, withoutSignatures } from '../shared/printable';
import {
  type DimensionsOf,
  METRIC_CATALOGUE,
  METRIC_NAMESPACE,
  type MetricName,
  SERVICE_NAME,
} from './metric-catalogue';

const serviceName = process.env.POWERTOOLS_SERVICE_NAME ?? SERVICE_NAME;

// Every string field is written through `printable`: JSON escapes C0 controls but a log viewer shows them decoded,
// and it does not escape DEL or the C1 controls at all. And without any URL signature a field quotes (a sender that
// encodes its separators puts the whole query, `sig=` included, into one parameter), nor one a field holds by name
// (an event's `queryStringParameters.sig`). The handlers never log their event (`logEvent: false` in http-route.ts,
// whatever POWERTOOLS_LOGGER_LOG_EVENT says); this holds should anything log one.
export const logger = new Logger({
  serviceName,
  jsonReplacerFn: (key, value) =>
    typeof value !== 'string' ? value : key === 'sig' ? '[concealed]' : printable(withoutSignatures(value)),
});
const metrics = new Metrics({
  namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? METRIC_NAMESPACE,
  serviceName,
});

/**
 * Publishes one value of a catalogued metric, at once, with exactly the dimensions the catalogue gives it (the
 * types refuse any other), so the dashboard and alarms built from the same catalogue read what is published.
 */
export function publish<N extends MetricName>(name: N, value: number, dimensions: DimensionsOf<N>): void {
  const single = metrics.singleMetric();
  for (const [dimension, dimensionValue] of Object.entries(dimensions as Record<string, string>))
    single.addDimension(dimension, dimensionValue);
  single.addMetric(name, METRIC_CATALOGUE[name].unit, value);
}

/** Counts one occurrence of a catalogued event. */
export function count<N extends MetricName>(
  name: N,
  ...dimensions: keyof DimensionsOf<N> extends never ? [] : [DimensionsOf<N>]
): void {
  publish(name, 1, (dimensions[0] ?? {}) as DimensionsOf<N>);
}
