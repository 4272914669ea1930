/**
 * What an operator watches: alarms on what would lose money or hide a failure, published to an encrypted SNS
 * topic, and one CloudWatch dashboard with the same figures.
 */
import { Duration, Stack } from 'aws-cdk-lib';
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
} from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import { Alias } from 'aws-cdk-lib/aws-kms';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { Topic } from 'aws-cdk-lib/aws-sns';
import type { Queue } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

export interface OperationsProps {
  readonly api: HttpApi;
  readonly buffer: Queue;
  readonly deadLetters: Queue;
  readonly functions: Record<string, IFunction>;
}

const NAMESPACE = 'SurveyReceiver';
const appMetric = (metricName: string, period = Duration.minutes(5)) =>
  new Metric({
    namespace: NAMESPACE,
    metricName,
    dimensionsMap: { service: 'survey-receiver' },
    statistic: 'Sum',
    period,
  });

export class Operations extends Construct {
  readonly topic: Topic;
  readonly alarms: Alarm[] = [];
  readonly dashboard: Dashboard;

  constructor(scope: Construct, id: string, props: OperationsProps) {
    super(scope, id);
    this.topic = new Topic(this, 'alarms', {
      displayName: 'Survey receiver alarms',
      enforceSSL: true,
      masterKey: Alias.fromAliasName(this, 'sns-key', 'alias/aws/sns'),
    });
    const alarm = (name: string, description: string, metric: IMetric, threshold: number) => {
      const created = new Alarm(this, name, {
        alarmDescription: description,
        metric,
        threshold,
        evaluationPeriods: 1,
        comparisonOperator: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: TreatMissingData.NOT_BREACHING,
      });
      created.addAlarmAction(new SnsAction(this.topic));
      this.alarms.push(created);
      return created;
    };

    const requests = props.api.metricCount({ period: Duration.minutes(5), statistic: 'Sum' });
    const serverErrors = props.api.metricServerError({ period: Duration.minutes(5), statistic: 'Sum' });
    const errorRate = new MathExpression({
      expression: 'IF(requests >= 20, 100 * errors / requests, 0)',
      usingMetrics: { requests, errors: serverErrors },
      label: '5xx %',
      period: Duration.minutes(5),
    });
    alarm(
      'server-error-rate',
      'More than 1% of requests answered 5xx over 5 minutes (at least 20 requests): the ledger and the buffer may both be failing.',
      errorRate,
      1,
    );
    alarm(
      'buffer-age',
      'A hit has waited in the buffer for over 15 minutes: the drainer cannot write to the ledger.',
      props.buffer.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(5), statistic: 'Maximum' }),
      900,
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
    alarm(
      'reconciliation-failures',
      'Reconciliation could not reconcile a survey (the marketplace answered with errors); it retries every run.',
      appMetric('ReconcileFailedSurveys', Duration.hours(1)),
      1,
    );
    alarm(
      'redirects-not-recorded',
      'Redirect hits were neither recorded nor buffered; the log holds them ("redirect hit not recorded").',
      appMetric('RedirectNotRecorded'),
      1,
    );
    for (const [name, fn] of Object.entries(props.functions)) {
      alarm(
        `${name}-errors`,
        `The ${name} function failed (unhandled errors or timeouts).`,
        fn.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
        1,
      );
    }

    this.dashboard = new Dashboard(this, 'dashboard', {
      dashboardName: `${Stack.of(this).stackName}-receiver`,
    });
    this.dashboard.addWidgets(
      new GraphWidget({ title: 'Requests and 5xx', left: [requests], right: [serverErrors], width: 12 }),
      new GraphWidget({ title: '5xx rate (%)', left: [errorRate], width: 12 }),
      new GraphWidget({
        title: 'Hits refused, conflicting, buffered',
        left: [
          'RejectedPostback',
          'RejectedRedirect',
          'RejectedSource',
          'ConflictingHit',
          'BufferedHits',
        ].map((m) => appMetric(m)),
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
        left: ['ReconciledSurveys', 'ReconcileFailedSurveys', 'VerdictChanges'].map((m) =>
          appMetric(m, Duration.hours(1)),
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
