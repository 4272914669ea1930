/**
 * What an operator watches: alarms on what would lose money or hide a failure, published to an encrypted SNS
 * topic, and one CloudWatch dashboard with the same figures.
 */
import { Annotations, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import {
  Alarm,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  type IMetric,
  MathExpression,
  Metric,
  TreatMissingData,
  type Unit,
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { Effect, PolicyStatement, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { FilterPattern, type ILogGroup, type JsonPattern, MetricFilter } from 'aws-cdk-lib/aws-logs';
import { Topic } from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Queue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import {
  dimensionSets,
  METRIC_CATALOGUE,
  METRIC_NAMESPACE,
  type MetricName,
} from '../../functions/runtime/metric-catalogue';
import { ROUTES, routeKey } from '../routes';

/** The time the oldest dead letter has spent there that alarms a second time: about 3.5 days before SQS drops it. */
export const DEAD_LETTER_WARNING_AGE = Duration.days(10);

export interface OperationsProps {
  readonly api: HttpApi;
  /** The HTTP API's access log (one JSON line a request): the 429s API Gateway's throttles answer are counted there. */
  readonly accessLogs?: ILogGroup;
  /** The postbacks' own API and its access log, watched with the other. */
  readonly postbackApi?: { readonly api: HttpApi; readonly accessLogs?: ILogGroup };
  readonly buffer: Queue;
  readonly deadLetters: Queue;
  readonly functions: Record<string, IFunction>;
  /** An address subscribed to the alarm topic (it must confirm the e-mail AWS sends). */
  readonly alarmEmail?: string;
  /** The attempt feed's consumer and where it describes batches that kept failing, when the feed is kept. */
  readonly attemptFeed?: { readonly consumer: IFunction; readonly failedBatches: Queue };
  /** The enabled schedules' rates: each gets an alarm for when its runs stop. */
  readonly schedules?: {
    readonly reconcileEvery?: Duration;
    readonly syncEvery?: Duration;
    readonly healthEvery?: Duration;
  };
}

/**
 * A catalogued metric as published, one line per dimension combination (a `reason`, a `channel`): CloudWatch
 * only returns the exact dimension set a metric was published with.
 */
export function catalogued(service: string, name: MetricName, period = Duration.minutes(5)): Metric[] {
  return dimensionSets(name, service).map(
    (dimensionsMap) =>
      new Metric({
        namespace: METRIC_NAMESPACE,
        metricName: name,
        dimensionsMap,
        statistic: 'Sum',
        period,
        unit: METRIC_CATALOGUE[name].unit as Unit,
        label: [
          name,
          ...Object.entries(dimensionsMap)
            .filter(([d]) => d !== 'service')
            .map(([, v]) => v),
        ].join(' '),
      }),
  );
}

/** The sum over all of a catalogued metric's dimension combinations, for an alarm. */
function cataloguedTotal(service: string, name: MetricName, period = Duration.minutes(5)): IMetric {
  const [only, ...more] = catalogued(service, name, period);
  if (!only) throw new Error(`${name} has no dimension set`);
  if (more.length === 0) return only;
  // Ids named after the metric: two totals in one expression must not both call theirs m0.
  const prefix = name.replace(/[^A-Za-z0-9]/g, '').replace(/^[A-Z]/, (c) => c.toLowerCase());
  const usingMetrics = Object.fromEntries([only, ...more].map((metric, i) => [`${prefix}${i}`, metric]));
  return new MathExpression({
    // Each combination filled with 0: one without a datapoint in a period would leave the sum without a value.
    expression: Object.keys(usingMetrics)
      .map((id) => `FILL(${id}, 0)`)
      .join(' + '),
    usingMetrics,
    label: name,
    period,
  });
}

export class Operations extends Construct {
  readonly topic: Topic;
  readonly key: Key;
  readonly alarms: Alarm[] = [];
  readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: OperationsProps) {
    super(scope, id);
    // The functions publish under the stack's name (receiver-function.ts): this stack's alarms read its own.
    const service = Stack.of(this).stackName;
    // CloudWatch cannot publish to a topic under the AWS-managed SNS key (its policy cannot be changed), so the
    // topic has its own key whose policy lets CloudWatch use it.
    this.key = new Key(this, 'alarm-key', {
      description: 'Encrypts the survey receiver alarm topic',
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.DESTROY,
      pendingWindow: Duration.days(7),
    });
    // CloudWatch acting for this account's alarms only (aws:SourceAccount), on the key and on the topic.
    const cloudWatch = new ServicePrincipal('cloudwatch.amazonaws.com');
    const thisAccount = { StringEquals: { 'aws:SourceAccount': Stack.of(this).account } };
    this.key.addToResourcePolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        principals: [cloudWatch],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: thisAccount,
      }),
    );
    this.topic = new Topic(this, 'alarms', {
      displayName: 'Survey receiver alarms',
      enforceSSL: true,
      masterKey: this.key,
    });
    // enforceSSL gives the topic a policy of its own (the SSL-only deny), which replaces SNS's default policy: the
    // alarms' right to publish is stated, or no alarm would ever reach the topic.
    this.topic.addToResourcePolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        principals: [cloudWatch],
        actions: ['sns:Publish'],
        resources: [this.topic.topicArn],
        conditions: thisAccount,
      }),
    );
    if (props.alarmEmail) this.topic.addSubscription(new EmailSubscription(props.alarmEmail));
    // Said at synth and deploy: without a subscriber every alarm and every survey health notice reaches no one.
    else
      Annotations.of(this.topic).addWarning(
        'no alarmEmail: the alarm topic has no subscriber, so alarms and survey health notices reach no one; set alarmEmail in the environment, or subscribe the topic (its ARN is the stack output AlarmTopicArn) another way',
      );
    /** An alarm on `threshold` or more; by default in one period, else in `datapoints` of the last `periods`. */
    const alarm = (
      name: string,
      description: string,
      metric: IMetric,
      threshold: number,
      window: { periods: number; datapoints: number } = { periods: 1, datapoints: 1 },
    ) => {
      const created = new Alarm(this, name, {
        // Named `<stack>-<name>`, as the README's alarm table calls them (unique per account and region).
        alarmName: `${service}-${name}`,
        alarmDescription: description,
        metric,
        threshold,
        evaluationPeriods: window.periods,
        ...(window.datapoints !== window.periods ? { datapointsToAlarm: window.datapoints } : {}),
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
      });
      created.addAlarmAction(new SnsAction(this.topic));
      this.alarms.push(created);
      return created;
    };

    /**
     * A scheduled job that stops finishing runs says nothing by itself (a disabled schedule, a function that cannot
     * start): a run publishes its figures every time, so none for three of its intervals (an hour at least) alarms.
     */
    const stopped = (name: string, description: string, metric: MetricName, every: Duration) => {
      // An interval of an hour or more: three periods of one interval each, every one without a run (one period of
      // three intervals alarmed whenever a run finished later than the one before it and left the period empty).
      const minutes = every.toMinutes();
      const [period, periods] =
        minutes >= 60 ? [Duration.minutes(minutes), 3] : [Duration.minutes(Math.max(60, 3 * minutes)), 1];
      const [runs] = catalogued(service, metric, period);
      if (!runs) throw new Error(`${metric} has no dimension set`);
      const created = new Alarm(this, name, {
        alarmName: `${service}-${name}`,
        alarmDescription: `${description} (no run finished in ${Duration.minutes(period.toMinutes() * periods).toHumanString()}).`,
        metric: runs.with({ statistic: 'SampleCount' }),
        threshold: 1,
        evaluationPeriods: periods,
        comparisonOperator: ComparisonOperator.LESS_THAN_THRESHOLD,
        treatMissingData: TreatMissingData.BREACHING,
      });
      created.addAlarmAction(new SnsAction(this.topic));
      this.alarms.push(created);
    };
    if (props.schedules?.reconcileEvery)
      stopped(
        'reconciliation-stopped',
        'Reconciliation has stopped running: what the marketplace owes is not being checked; look at the reconcile function and its schedule',
        'ReconciledSurveys',
        props.schedules.reconcileEvery,
      );
    if (props.schedules?.healthEvery)
      stopped(
        'health-check-stopped',
        'The survey health check has stopped running: a survey whose postbacks stop is not noticed; look at the health function and its schedule',
        'SurveysOk',
        props.schedules.healthEvery,
      );
    if (props.schedules?.syncEvery)
      stopped(
        'redirect-sync-stopped',
        'The redirect sync has stopped running: new surveys are not pointed here and drift is not repaired; look at the redirect-sync function and its schedule',
        'RedirectsApplied',
        props.schedules.syncEvery,
      );

    const apis = [
      { api: props.api, accessLogs: props.accessLogs },
      ...(props.postbackApi ? [props.postbackApi] : []),
    ];
    /** A metric of every API, added up. */
    const overApis = (label: string, metricOf: (api: HttpApi) => IMetric): IMetric => {
      const [only] = apis;
      if (apis.length === 1 && only) return metricOf(only.api);
      // Ids unique within any expression that uses two of these sums.
      const id = (i: number) => `${label.replace(/\W/g, '')}${i}`;
      // A period without requests publishes nothing for that API: counted as none, not as no sum at all.
      return new MathExpression({
        expression: apis.map((_, i) => `FILL(${id(i)}, 0)`).join(' + '),
        usingMetrics: Object.fromEntries(apis.map(({ api }, i) => [id(i), metricOf(api)])),
        label,
        period: Duration.minutes(5),
      });
    };
    const requests = overApis('requests', (api) =>
      api.metricCount({ period: Duration.minutes(5), statistic: 'Sum' }),
    );
    const serverErrors = overApis('server errors', (api) =>
      api.metricServerError({ period: Duration.minutes(5), statistic: 'Sum' }),
    );
    const accessLogs = apis.flatMap(({ accessLogs }) => (accessLogs ? [accessLogs] : []));
    // The hit routes' lines only: finance's own routes fail and throttle for reasons that lose no hit (a slow month's
    // report, a client paging fast), and would hold the receivers' alarms, whose runbook is the receivers', in ALARM.
    const hitRoutes = ROUTES.filter((route) => route.function === 'finance').map((route) =>
      FilterPattern.stringValue('$.route', '!=', routeKey(route)),
    );
    /**
     * A count of the access log lines (one a request, every API's log into one metric) that match: HTTP APIs publish
     * no metric per route, nor any of the requests their throttles refuse.
     */
    const countedInAccessLogs = (id: string, metricName: string, ...match: JsonPattern[]) => {
      const [first] = accessLogs.map(
        (logGroup, i) =>
          new MetricFilter(this, i === 0 ? id : `${id}-${i}`, {
            logGroup,
            filterPattern: FilterPattern.all(...match, ...hitRoutes),
            // Apart from the functions' own namespace (metric-catalogue.ts): a function never publishes it. A metric
            // filter cannot add a fixed dimension, so the stack's name is in the namespace.
            metricNamespace: `${METRIC_NAMESPACE}/Api/${service}`,
            metricName,
            metricValue: '1',
          }),
      );
      return first;
    };
    // Every access log line has a status: the hit routes' requests, and of them those answered 5xx (a regular
    // expression: CloudWatch takes up to five in a log group's filters, and this is the only one).
    const hitRequestLines = countedInAccessLogs(
      'hit-requests',
      'HitRequests',
      FilterPattern.exists('$.status'),
    );
    const hitServerErrorLines = countedInAccessLogs(
      'hit-server-errors',
      'HitServerErrors',
      FilterPattern.regexValue('$.status', '=', '^5[0-9][0-9]$'),
    );
    // Where an API keeps no access log the APIs' own figures stand in, finance's requests among them.
    const everyApiLogged = accessLogs.length === apis.length;
    const hitRequests =
      everyApiLogged && hitRequestLines
        ? hitRequestLines.metric({ period: Duration.minutes(5), statistic: 'Sum', label: 'hit requests' })
        : requests;
    const hitServerErrors =
      everyApiLogged && hitServerErrorLines
        ? hitServerErrorLines.metric({ period: Duration.minutes(5), statistic: 'Sum', label: 'hit 5xx' })
        : serverErrors;
    // Below 20 requests in five minutes every 5xx counts as 5% (one alarms): a small supplier is watched too. A
    // period without a line of either publishes nothing: counted as none.
    const errorRate = new MathExpression({
      expression: 'IF(FILL(requests, 0) >= 20, 100 * FILL(errors, 0) / requests, 5 * FILL(errors, 0))',
      usingMetrics: { requests: hitRequests, errors: hitServerErrors },
      label: '5xx %',
      period: Duration.minutes(5),
    });
    alarm(
      'server-error-rate',
      "More than 1% of the redirect and postback routes' requests answered 5xx over 5 minutes (any 5xx under 20 requests): the ledger and the buffer may both be failing.",
      errorRate,
      1,
    );
    const receivers = ['redirect', 'postback']
      .map((name) => props.functions[name])
      .filter((fn): fn is IFunction => fn !== undefined);
    if (receivers.length > 0)
      alarm(
        'receivers-throttled',
        'A receiver was throttled (its reserved concurrency or the account limit was reached): hits were refused, and a refused postback may be lost. Raise receiverReservedConcurrency or the account limit.',
        new MathExpression({
          // A period in which one receiver has no datapoint (idle, or no throttle published) must not leave the sum
          // without a value, which the alarm would read as not breaching: each term is filled with 0.
          expression: receivers.map((_, i) => `FILL(t${i}, 0)`).join(' + '),
          usingMetrics: Object.fromEntries(
            receivers.map((fn, i) => [
              `t${i}`,
              fn.metricThrottles({ period: Duration.minutes(5), statistic: 'Sum' }),
            ]),
          ),
          label: 'receiver throttles',
          period: Duration.minutes(5),
        }),
        1,
      );
    let throttledRequests: IMetric | undefined;
    const throttled = countedInAccessLogs(
      'throttled-requests',
      'ThrottledRequests',
      FilterPattern.stringValue('$.status', '=', '429'),
    );
    if (throttled) {
      throttledRequests = throttled.metric({
        period: Duration.minutes(5),
        statistic: 'Sum',
        label: '429 (throttled)',
      });
      alarm(
        'requests-throttled',
        "API Gateway answered 429 (a route's or the stage's throttle was reached): postbacks refused this way may be lost, and respondents saw an error. Raise the throttles.hits setting in cdk.json (and the receivers' concurrency) if the traffic was genuine.",
        throttledRequests,
        1,
      );
    }
    // Not the age of the oldest message: SQS leaves a message received three times or more out of it, and a hit the
    // drainer keeps failing is received again within minutes (its backoff), so the age stays low through an outage
    // of hours. Hits held at all (waiting, or in flight: a drainer backing off holds them invisible), on average
    // over each of three five-minute periods: a healthy drainer takes a hit out within seconds.
    alarm(
      'buffer-age',
      'Hits have been held in the buffer for 15 minutes: the drainer cannot write them to the ledger (ledger throttling or down, or the drainer failing). They are safe in the queue for 14 days.',
      new MathExpression({
        expression: 'FILL(waiting, 0) + FILL(inFlight, 0)',
        usingMetrics: {
          waiting: props.buffer.metricApproximateNumberOfMessagesVisible({
            period: Duration.minutes(5),
            statistic: 'Average',
          }),
          inFlight: props.buffer.metricApproximateNumberOfMessagesNotVisible({
            period: Duration.minutes(5),
            statistic: 'Average',
          }),
        },
        label: 'hits held in the buffer',
        period: Duration.minutes(5),
      }),
      0.5,
      { periods: 3, datapoints: 3 },
    );
    alarm(
      'dead-letters',
      'Buffered hits the drainer could not write after 12 receives (about 12 hours of ledger outage) are in the dead-letter queue: fix the cause, then npm run cli -- buffer redrive (safe to run twice; see README, Operations).',
      props.deadLetters.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: 'Maximum',
      }),
      1,
    );
    // The first alarm stays in ALARM while anything is parked, so it says nothing more as the days pass. A message
    // keeps its first enqueue time when it moves to the dead-letter queue (its 14 days count from the hit's arrival),
    // while this metric counts from the move (about 12 hours later): 10 days here leave about three and a half.
    alarm(
      'dead-letters-expiring',
      'A buffered hit has waited 10 days in the dead-letter queue: SQS drops it about three and a half days from now, 14 days after it arrived (a postback lost, a complete not recorded). Fix the cause and npm run cli -- buffer redrive now (see README, Operations).',
      props.deadLetters.metricApproximateAgeOfOldestMessage({
        period: Duration.hours(1),
        statistic: 'Maximum',
      }),
      DEAD_LETTER_WARNING_AGE.toSeconds(),
    );
    // Under 100 surveys an hour every failed one alarms; above, one in a hundred: a supplier of thousands always has
    // a few failing on marketplace errors, and an alarm that never leaves ALARM would hide the next real problem.
    alarm(
      'reconciliation-failures',
      'Reconciliation could not reconcile a survey (the marketplace answered with errors or a row it could not read), or above 100 surveys an hour at least 1% of them; it retries every run. The reconcile log names each survey and its error.',
      new MathExpression({
        expression: 'IF(reconciled + failed >= 100, 100 * failed / (reconciled + failed), failed)',
        usingMetrics: {
          reconciled: cataloguedTotal(service, 'ReconciledSurveys', Duration.hours(1)),
          failed: cataloguedTotal(service, 'ReconcileFailedSurveys', Duration.hours(1)),
        },
        label: 'failed surveys (count, or % above 100)',
        period: Duration.hours(1),
      }),
      1,
    );
    if (props.schedules?.reconcileEvery) {
      // A run stopped by the marketplace's Retry-After defers its surveys, fails none: in three runs in a row (three
      // hours by default), nothing the marketplace owes is being checked.
      const every = Duration.minutes(Math.max(60, props.schedules.reconcileEvery.toMinutes()));
      alarm(
        'reconciliation-held-off',
        "Reconciliation was held off by the marketplace (429 with a Retry-After longer than a run can wait) in three runs in a row: no survey is being reconciled, none counted failed. The reconcile log says until when (refusedUntil); ask the marketplace about the account's rate limit; scale.marketplaceCallsPerSecond paces the calls.",
        cataloguedTotal(service, 'ReconcileHeldOff', every),
        1,
        { periods: 3, datapoints: 3 },
      );
    }
    // Whatever share of the surveys it is: the surveys that fail every run are often the biggest (the most money).
    alarm(
      'reconciliation-failing-long',
      "A survey's reconciliation has failed for six hours or more (every run since): its figures are stale. The reconcile log names it and its error (failingSince); a survey too big for the marketplace's answer or the function's memory needs the scale settings (README, Taking ten times the traffic).",
      cataloguedTotal(service, 'SurveysFailingLong', Duration.hours(1)),
      1,
    );
    if (props.schedules?.syncEvery) {
      // Two runs refused within about two hours and a quarter: the listing by date is tried every run, the list of
      // every live survey once an hour (the runs between publish 0), so two refusals of either alarm. One refused
      // listing (a marketplace error) is retried by the next run.
      const every = Duration.minutes(Math.max(5, props.schedules.syncEvery.toMinutes()));
      alarm(
        'redirect-listing-refused',
        "The redirect sync's survey listing was refused or not answered in two runs within about two hours: new surveys are not pointed here and closed ones not seen. A refusal naming the token (401/403) means the marketplace token secret does not hold the real token yet (README, First deployment, step 4); the redirect-sync log says what the marketplace answered (listingError, fullListingError).",
        cataloguedTotal(service, 'RedirectListingRefused', every),
        1,
        { periods: Math.max(2, Math.ceil(135 / every.toMinutes())), datapoints: 2 },
      );
    }
    alarm(
      'redirects-drifted',
      "A survey's redirects were changed at the marketplace (postbacks may have gone elsewhere since its last daily read-back); the sync applied them again, or failed to (then its survey is failing too). Its log names the fields ('redirects changed at the marketplace were applied again', or 'redirect sync finished with failures').",
      cataloguedTotal(service, 'RedirectsDrifted', Duration.hours(1)),
      1,
    );
    alarm(
      'redirects-not-recorded',
      'Redirect hits were neither recorded nor buffered; the log holds them ("redirect hit not recorded").',
      cataloguedTotal(service, 'RedirectNotRecorded'),
      1,
    );
    if (props.attemptFeed) {
      alarm(
        'attempt-feed-behind',
        "The attempt feed's consumer is over 15 minutes behind the table's stream (IteratorAge): its writes fail or it cannot keep up. The stream keeps changes for 24 hours; the attempt-feed log names failed groups.",
        new Metric({
          namespace: 'AWS/Lambda',
          metricName: 'IteratorAge',
          dimensionsMap: { FunctionName: props.attemptFeed.consumer.functionName },
          statistic: 'Maximum',
          period: Duration.minutes(5),
        }),
        15 * 60_000,
      );
      alarm(
        'attempt-feed-failed-batches',
        "A batch of the table's stream kept failing in the attempt feed's consumer and was set aside: the feed lacks those changes (the table has them), so reconciliation and the health check may miss those attempts until `npm run cli -- ledger rebuild-feed` writes their days. The queue's message names the shard and sequence range.",
        // Each batch set aside, not the queue's depth: its messages stay 14 days (nothing takes them), and an alarm
        // left in ALARM that long would not notify of the next one.
        props.attemptFeed.failedBatches.metricNumberOfMessagesSent({
          period: Duration.minutes(5),
          statistic: 'Sum',
        }),
        1,
      );
    }
    for (const [name, fn] of Object.entries(props.functions)) {
      alarm(
        `${name}-errors`,
        `The ${name} function failed (unhandled errors or timeouts).`,
        fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
        1,
      );
    }

    // Dashboard names are unique in the whole account, not per region: the region keeps the same stack deployed in
    // two regions apart.
    this.dashboard = new Dashboard(this, 'dashboard', {
      dashboardName: `${Stack.of(this).stackName}-receiver-${Stack.of(this).region}`,
    });
    this.dashboard.addWidgets(
      new GraphWidget({
        title: 'Requests, 5xx and 429',
        left: [requests],
        right: [serverErrors, ...(throttledRequests ? [throttledRequests] : [])],
        width: 12,
      }),
      new GraphWidget({ title: '5xx rate (%)', left: [errorRate], width: 12 }),
      new GraphWidget({
        title: 'Hits refused, conflicting, buffered',
        left: (
          [
            'RejectedPostback',
            'RejectedRedirect',
            'RejectedSource',
            'RefusalsNotRecorded',
            'RedirectsOverSenderBound',
            'ConflictingHit',
            'BufferedHits',
          ] as const
        ).flatMap((m) => catalogued(service, m)),
        width: 12,
      }),
      new GraphWidget({
        title: 'Buffer',
        left: [
          props.buffer.metricApproximateNumberOfMessagesVisible(),
          props.deadLetters.metricApproximateNumberOfMessagesVisible(),
        ],
        right: [props.buffer.metricApproximateAgeOfOldestMessage()],
        width: 12,
      }),
      new GraphWidget({
        title: 'Reconciliation',
        left: (
          [
            'ReconciledSurveys',
            'ReconcileFailedSurveys',
            'ReconcileHeldOff',
            'SurveysFailingLong',
            'VerdictChanges',
          ] as const
        ).flatMap((m) => catalogued(service, m, Duration.hours(1))),
        width: 12,
      }),
      new GraphWidget({
        title: 'Verdicts per reconciliation run',
        left: catalogued(service, 'Verdicts', Duration.hours(1)),
        width: 12,
      }),
      new GraphWidget({
        title: 'Ledger or keys unavailable, hits not recorded, internal errors',
        left: (
          [
            'StoreUnavailable',
            'KeyRingUnavailable',
            'BufferedHitNotRecorded',
            'RedirectNotRecorded',
            'InternalError',
          ] as const
        ).flatMap((m) => catalogued(service, m)),
        width: 12,
      }),
      new GraphWidget({
        title: 'Redirect sync and reconciliation failures',
        left: (
          [
            'RedirectsApplied',
            'RedirectsDrifted',
            'RedirectSyncFailures',
            'RedirectListingRefused',
            'ReconcileFailures',
            'ReconciledTransactions',
            'AttemptFeedBehind',
          ] as const
        ).flatMap((m) => catalogued(service, m, Duration.hours(1))),
        width: 12,
      }),
      new GraphWidget({
        // Surveys per state, never one line per survey: who is failing is in the notices and `npm run cli -- health`.
        title: 'Survey health (surveys per state, transitions)',
        left: (['SurveysOk', 'SurveysWarning', 'SurveysFailing'] as const).flatMap((m) =>
          catalogued(service, m, Duration.minutes(5)),
        ),
        right: (['SurveysTurnedFailing', 'SurveysRecovered', 'SurveysLeft'] as const).flatMap((m) =>
          catalogued(service, m, Duration.minutes(5)),
        ),
        width: 12,
      }),
      new GraphWidget({
        title: 'Function errors',
        left: Object.values(props.functions).map((fn) => fn.metricErrors({ period: Duration.minutes(5) })),
        width: 12,
      }),
    );
  }
}
