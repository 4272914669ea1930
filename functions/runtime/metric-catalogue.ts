/**
 * Every custom metric the functions publish: its name, unit and the closed set of values each of its dimensions
 * takes. The functions emit only through this catalogue (`observability.ts`), and the dashboard and alarms
 * (`infra/constructs/operations.ts`) read only from it, so a widget cannot ask CloudWatch for a dimension set
 * that nothing emits (such a widget stays empty and such an alarm never fires). Pure data: the infrastructure
 * imports it without loading Powertools.
 */
import { VERDICT_KINDS } from '../reconciliation/verdict-kinds';

export const METRIC_NAMESPACE = 'SurveyReceiver';
/**
 * The `service` of an undeployed function (the local stack, the tests). A deployed stack's functions publish under
 * the stack's name (`POWERTOOLS_SERVICE_NAME`), and its alarms read that name: two stacks in one account and region
 * (staging beside production, the example stack deployed by mistake) never read each other's metrics.
 */
export const SERVICE_NAME = 'survey-receiver';

/** Powertools adds `service` to every metric; the catalogue lists the dimensions beyond it. */
export const SERVICE_DIMENSION = 'service';

const CHANNELS = ['redirect', 'postback'] as const;

export const METRIC_CATALOGUE = {
  RejectedPostback: {
    unit: 'Count',
    dimensions: { reason: ['signature', 'input'] },
    about: 'postbacks refused: a bad or missing signature, or input that fails validation',
  },
  RejectedRedirect: {
    unit: 'Count',
    dimensions: {},
    about: 'redirect hits refused (forged, stale or malformed)',
  },
  RefusalsNotRecorded: {
    unit: 'Count',
    dimensions: { channel: CHANNELS },
    about:
      'refused hits past the per-container rate of refusals counted in the ledger (a flood), or whose count the ledger did not take within the wait: metric only',
  },
  RejectedSource: {
    unit: 'Count',
    dimensions: {},
    about: 'postbacks from an address outside the allow-list',
  },
  ConflictingHit: {
    unit: 'Count',
    dimensions: { channel: CHANNELS },
    about: 'hits that contradict what the ledger holds for their attempt',
  },
  BufferedHits: {
    unit: 'Count',
    dimensions: { channel: CHANNELS },
    about: 'hits acknowledged while the ledger was unavailable, parked in the buffer',
  },
  BufferedHitNotRecorded: {
    unit: 'Count',
    dimensions: {},
    about: 'buffered hits the drainer could not write yet (retried with back-off)',
  },
  StoreUnavailable: { unit: 'Count', dimensions: {}, about: 'requests that found the ledger unavailable' },
  KeyRingUnavailable: {
    unit: 'Count',
    dimensions: {},
    about:
      'postbacks answered 503 because the signing key ring could not be read (or a new key id looked up)',
  },
  RedirectNotRecorded: {
    unit: 'Count',
    dimensions: {},
    about: 'redirect hits neither recorded nor buffered (logged in full)',
  },
  RedirectsOverSenderBound: {
    unit: 'Count',
    dimensions: {},
    about:
      'senders whose redirects went past the per-minute bound in a container (answered, not recorded; one a sender and minute)',
  },
  InternalError: {
    unit: 'Count',
    dimensions: {},
    about: 'requests answered 500 for a fault of this service',
  },
  RedirectsApplied: { unit: 'Count', dimensions: {}, about: 'surveys whose redirects a sync run applied' },
  RedirectSyncFailures: {
    unit: 'Count',
    dimensions: {},
    about: 'redirect sync runs with a failed survey or a survey listing refused',
  },
  RedirectListingRefused: {
    unit: 'Count',
    dimensions: {},
    about:
      'redirect sync runs whose survey listing the marketplace refused or did not answer (new or closed surveys unseen); 0 in the others',
  },
  RedirectsDrifted: {
    unit: 'Count',
    dimensions: {},
    about:
      'surveys whose redirects the daily read-back found changed at the marketplace, applied again (or tried to)',
  },
  ReconciledSurveys: { unit: 'Count', dimensions: {}, about: 'surveys a reconciliation run reconciled' },
  ReconcileHeldOff: {
    unit: 'Count',
    dimensions: {},
    about:
      'reconciliation runs that stopped because the marketplace refused calls (429: a Retry-After, or refused through every retry) past what the invocation can wait: 1 each such run',
  },
  ReconcileFailedSurveys: {
    unit: 'Count',
    dimensions: {},
    about: 'surveys a reconciliation run could not reconcile',
  },
  SurveysFailingLong: {
    unit: 'Count',
    dimensions: {},
    about: 'surveys a reconciliation run could not reconcile whose runs have failed for six hours or more',
  },
  ReconciledTransactions: { unit: 'Count', dimensions: {}, about: 'marketplace transactions read' },
  VerdictChanges: { unit: 'Count', dimensions: {}, about: 'verdicts a reconciliation run wrote or changed' },
  Verdicts: {
    unit: 'Count',
    dimensions: { verdict: VERDICT_KINDS },
    about: 'attempts per verdict in a reconciliation run',
  },
  ReconcileFailures: { unit: 'Count', dimensions: {}, about: 'reconciliation runs with a failed survey' },
  AttemptFeedBehind: {
    unit: 'Count',
    dimensions: {},
    about:
      "reconciliation reads that found the attempt feed's probe long unseen and read the attempt items instead",
  },
  SurveysOk: { unit: 'Count', dimensions: {}, about: 'active surveys the health check found ok in a run' },
  SurveysWarning: {
    unit: 'Count',
    dimensions: {},
    about: 'active surveys the health check found warning in a run',
  },
  SurveysFailing: {
    unit: 'Count',
    dimensions: {},
    about: 'active surveys the health check found failing in a run',
  },
  SurveysTurnedFailing: {
    unit: 'Count',
    dimensions: {},
    about: 'surveys that turned failing in a health check run (each also notified by name)',
  },
  SurveysRecovered: {
    unit: 'Count',
    dimensions: {},
    about: 'surveys that stopped failing in a health check run (each also notified by name)',
  },
  SurveysLeft: {
    unit: 'Count',
    dimensions: {},
    about: 'surveys a health check run had no time for (the next run starts with them)',
  },
} as const satisfies Record<string, MetricSpec>;

export interface MetricSpec {
  readonly unit: 'Count';
  readonly dimensions: Readonly<Record<string, readonly string[]>>;
  readonly about: string;
}

export type MetricName = keyof typeof METRIC_CATALOGUE;

/** The dimensions a metric must be published with: each one named, with a value from its set. */
export type DimensionsOf<N extends MetricName> = {
  -readonly [D in keyof (typeof METRIC_CATALOGUE)[N]['dimensions']]: (typeof METRIC_CATALOGUE)[N]['dimensions'][D] extends readonly (infer V)[]
    ? V
    : never;
};

/**
 * Every dimension combination a metric is published under, `service` included: what a dashboard lists to show
 * all of it.
 */
export function dimensionSets(name: MetricName, service: string = SERVICE_NAME): Record<string, string>[] {
  let sets: Record<string, string>[] = [{ [SERVICE_DIMENSION]: service }];
  for (const [dimension, values] of Object.entries(
    METRIC_CATALOGUE[name].dimensions as MetricSpec['dimensions'],
  ))
    sets = sets.flatMap((set) => values.map((value) => ({ ...set, [dimension]: value })));
  return sets;
}

/** Whether a published or read metric (name and full dimension map) is one the catalogue names. */
export function inCatalogue(
  name: string,
  dimensions: Record<string, string>,
  service: string = SERVICE_NAME,
): boolean {
  if (!Object.hasOwn(METRIC_CATALOGUE, name)) return false;
  const spec = METRIC_CATALOGUE[name as MetricName] as MetricSpec;
  const { [SERVICE_DIMENSION]: published, ...rest } = dimensions;
  if (published !== service) return false;
  const expected = Object.keys(spec.dimensions).sort();
  if (expected.join() !== Object.keys(rest).sort().join()) return false;
  return expected.every((d) => (spec.dimensions[d] as readonly string[]).includes(rest[d] as string));
}
