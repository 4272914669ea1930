/**
 * The receiver, deployed: the ledger table, the signing key ring, the receiver functions and the HTTP API in
 * front, and the scheduled redirect sync with the marketplace token it needs.
 */
import {
  Annotations,
  type CfnElement,
  CfnOutput,
  Duration,
  Stack,
  type StackProps,
  Validations,
} from 'aws-cdk-lib';
import type { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { Schedule, ScheduleExpression } from 'aws-cdk-lib/aws-scheduler';
import { LambdaInvoke } from 'aws-cdk-lib/aws-scheduler-targets';
import { type ISecret, Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import type { HealthSettings } from '../functions/health/health-rules';
import { FEED_PARTITION_PREFIX, FEED_PROBE_SEEN_KEY, FEED_START_KEY } from '../functions/ledger/feed-keys';
import {
  ATTEMPT_PARTITION_PREFIX,
  CHECKPOINT_PARTITION_PREFIX,
  LEDGER,
  RUN_PARTITION_PREFIX,
  SUMMARY_PARTITION_PREFIX,
  SURVEY_PARTITION_PREFIX,
} from '../functions/ledger/ledger-schema';
import { templateProblem } from '../functions/receiving/landing-page';
import { healthEnvironmentOf, type LANDING_VARIABLES } from '../functions/runtime/runtime-config';
import { AttemptFeed, FEED_BATCHING_WINDOW, FEED_LAG_MARGIN } from './constructs/attempt-feed';
import { type CustomDomain, HitApi, type RouteThrottles } from './constructs/hit-api';
import { DRAINER_TIMEOUT, HitBuffer } from './constructs/hit-buffer';
import { LedgerTable } from './constructs/ledger-table';
import { Operations } from './constructs/operations';
import { ReceiverFunction } from './constructs/receiver-function';
import { RETAIN_UNLESS_CREATE_FAILS } from './constructs/retention';
import { FUNCTIONS, QUEUE_FUNCTIONS, ROUTES, SCHEDULED_FUNCTIONS } from './routes';
import type { EnvironmentSettings } from './settings';

export interface MarketplaceSettings {
  /** The supplier host; without it the sync is deployed with its schedule disabled. */
  readonly baseUrl?: string;
  readonly apiVersion?: 'v1' | 'v2';
  /** An existing secret holding the access token; by default the stack creates one to be filled in. */
  readonly tokenSecretName?: string;
}

export interface ReceiverStackProps extends StackProps {
  /** Landing URL templates by environment variable name (LANDING_URL_SUCCESS ...), for the redirect function. */
  readonly landingUrls?: Partial<Record<(typeof LANDING_VARIABLES)[keyof typeof LANDING_VARIABLES], string>>;
  readonly marketplace?: MarketplaceSettings;
  /** How often reconciliation runs (default hourly) and how many trailing Pacific days it re-checks (default 7). */
  readonly reconcileRate?: Duration;
  readonly reconcileWindowDays?: number;
  /** How often the survey health check runs (default 5 minutes). */
  readonly healthCheckRate?: Duration;
  /** The health rules' settings (window, thresholds) given to the health function; unset ones keep defaults. */
  readonly healthSettings?: Partial<HealthSettings>;
  /** Address ranges postbacks may come from (POSTBACK_SOURCE_CIDRS); default any. */
  readonly postbackSourceCidrs?: string;
  /** Redirects recorded per sender, container and minute (REDIRECTS_PER_SENDER_MINUTE); unset: 600; 0: no bound. */
  readonly redirectsPerSenderMinute?: number;
  /** How often the redirect sync runs (default 15 minutes). */
  readonly redirectSyncRate?: Duration;
  /**
   * Whether the scheduled redirect sync runs (default true, with a marketplace). It points every live survey of the
   * marketplace account at this stack: a second stack on the same account (staging, a migration) turns it off and
   * is given its surveys with `redirects apply`.
   */
  readonly redirectSyncEnabled?: boolean;
  /** Postback methods configured at the marketplace (default GET for both). */
  readonly postbackMethods?: { readonly success?: 'GET' | 'POST'; readonly fail?: 'GET' | 'POST' };
  /**
   * Concurrency reserved for each receiver (default 50; 0 reserves none), so the drainer and the scheduled jobs
   * can never take the executions the hits need. The account needs this much twice plus 100 unreserved.
   */
  readonly receiverReservedConcurrency?: number;
  /** An address subscribed to the alarm topic. */
  readonly alarmEmail?: string;
  /** API Gateway limits per hit route and per finance route, instead of the route table's defaults. */
  readonly throttles?: RouteThrottles;
  /** The supplier's own host name for the API, with its certificate (hit-api.ts): the surveys' URLs are built on it. */
  readonly customDomain?: CustomDomain | undefined;
  /** The scheduled functions' memory and concurrency, for a larger supplier; unset ones keep the defaults. */
  readonly scale?: ScaleSettings;
  /**
   * Keep the attempt feed (default off): the table's stream and its consumer (constructs/attempt-feed.ts), which
   * packs each batch's attempt changes per UTC day and bucket of surveys; the survey health check reads its window
   * from it.
   */
  readonly attemptFeed?: boolean;
  /**
   * `implied`: reconciliation writes no verdict on a non-complete that agrees with the marketplace where the
   * attempt tells the agreement by itself (README, "Matched verdicts"); `kept` (default): every verdict is written.
   */
  readonly matchedVerdicts?: 'kept' | 'implied';
}

/** The environment's `scale` settings (settings.ts validates them), each optional: unset, the function's default. */
export type ScaleSettings = Readonly<EnvironmentSettings['scale']>;

/**
 * The deployed redirects' bound per sender (an address, an IPv6 /64), container and minute, unless the environment
 * says otherwise: a script replaying a success URL with made-up ids from one address makes an attempt a hit (about
 * USD 100 a day at the route's limit); no carrier's shared address brings one supplier's redirects near 600 a minute
 * in one container. The function's own default is none (the local stack and tests send everything from one address).
 */
export const DEPLOYED_REDIRECTS_PER_SENDER_MINUTE = 600;

/** The variables of the settings given (a function reads its defaults for the rest). */
const variables = (entries: Record<string, number | undefined>): Record<string, string> =>
  Object.fromEntries(
    Object.entries(entries)
      .filter((entry): entry is [string, number] => entry[1] !== undefined)
      .map(([name, value]) => [name, String(value)]),
  );

/**
 * A scheduled run that fails or is missed is not run again, neither by its schedule nor by Lambda: the schedules
 * invoke their functions asynchronously, and Lambda would otherwise run a failed or timed-out invocation twice more
 * (up to six hours later, beside the next scheduled run). Reconcile's own resume call is invoked alike. Returns
 * the schedule target's retry policy, the same; `maxEventAge` is how long a run may wait to start before it is
 * dropped (the next one does its work).
 */
function noRetry(scheduled: ReceiverFunction, maxEventAge: Duration) {
  const policy = { retryAttempts: 0, maxEventAge };
  scheduled.function.configureAsyncInvoke(policy);
  return policy;
}

export class ReceiverStack extends Stack {
  readonly ledger: LedgerTable;
  readonly signingKeys: Secret;
  readonly redirect: ReceiverFunction;
  readonly postback: ReceiverFunction;
  readonly api: HitApi;
  /**
   * The postbacks' own API: a host no respondent's browser is sent to, with throttles of its own, so junk sent to
   * the public host (whose name every redirect shows) cannot use up the limits the marketplace's postbacks need.
   */
  readonly postbackApi: HitApi;
  readonly finance: ReceiverFunction;
  readonly buffer: HitBuffer;
  readonly drainer: ReceiverFunction;
  readonly operations: Operations;
  readonly marketplaceToken: ISecret;
  readonly redirectSync: ReceiverFunction;
  readonly redirectSyncSchedule: Schedule;
  readonly reconcile: ReceiverFunction;
  readonly reconcileSchedule: Schedule;
  readonly health: ReceiverFunction;
  readonly healthSchedule: Schedule;
  readonly attemptFeed: AttemptFeed | undefined;

  constructor(scope: Construct, id: string, props: ReceiverStackProps = {}) {
    super(scope, id, props);
    const scale = props.scale ?? {};
    const landingUrls = props.landingUrls ?? {};
    for (const [name, template] of Object.entries(landingUrls)) {
      const problem = template ? templateProblem(template) : undefined;
      if (problem) throw new Error(`${name} ${problem}`);
    }

    this.ledger = new LedgerTable(this, 'ledger', { stream: props.attemptFeed === true });
    this.signingKeys = new Secret(this, 'signing-keys', {
      description: 'Key ring that signs the redirect and postback URLs handed to the marketplace',
      generateSecretString: {
        secretStringTemplate: JSON.stringify({ current: 'k1' }),
        generateStringKey: 'k1',
        passwordLength: 64,
        excludePunctuation: true,
      },
      // Losing the ring would invalidate every URL configured at the marketplace (constructs/retention.ts).
      removalPolicy: RETAIN_UNLESS_CREATE_FAILS,
    });

    this.redirect = new ReceiverFunction(this, 'redirect', {
      ...FUNCTIONS.redirect,
      environment: Object.fromEntries(Object.entries(landingUrls).filter(([, value]) => value)) as Record<
        string,
        string
      >,
    })
      .bindHitPath(this.ledger.table)
      .bindSigningKeys(this.signingKeys);
    this.postback = new ReceiverFunction(this, 'postback', FUNCTIONS.postback)
      .bindHitPath(this.ledger.table)
      .bindSigningKeys(this.signingKeys);

    const reserved = props.receiverReservedConcurrency ?? 50;
    if (!Number.isInteger(reserved) || reserved < 0)
      throw new Error('receiverReservedConcurrency must be a whole number, 0 or more');
    if (reserved > 0)
      for (const receiver of [this.redirect, this.postback])
        (receiver.function.node.defaultChild as CfnFunction).reservedConcurrentExecutions = reserved;

    this.buffer = new HitBuffer(this, 'hit-buffer');
    for (const receiver of [this.redirect, this.postback]) this.buffer.bindSender(receiver);
    if (props.postbackSourceCidrs)
      this.postback.function.addEnvironment('POSTBACK_SOURCE_CIDRS', props.postbackSourceCidrs);
    this.redirect.function.addEnvironment(
      'REDIRECTS_PER_SENDER_MINUTE',
      String(props.redirectsPerSenderMinute ?? DEPLOYED_REDIRECTS_PER_SENDER_MINUTE),
    );
    this.drainer = new ReceiverFunction(this, 'drain-buffer', {
      ...QUEUE_FUNCTIONS['drain-buffer'],
      timeout: DRAINER_TIMEOUT,
    }).bindHitPath(this.ledger.table, { refusals: false });
    this.buffer.bindDrainer(this.drainer, { maxConcurrency: scale.drainConcurrency });
    this.attemptFeed = props.attemptFeed
      ? new AttemptFeed(this, 'attempt-feed', { table: this.ledger.table })
      : undefined;
    if (props.attemptFeed)
      // Attempts the feed covers stay out of the day index (ledger/feed-coverage.ts): its start mark and the
      // probe's note are read, nothing else of it.
      for (const receiver of [this.redirect, this.postback, this.drainer])
        receiver
          .allowLedgerItems(
            this.ledger.table,
            ['dynamodb:GetItem'],
            [FEED_START_KEY.pk, FEED_PROBE_SEEN_KEY.pk],
          )
          .function.addEnvironment('ATTEMPT_FEED', 'on')
          // Only this stream's feed covers: one an earlier stream left (turned off and on again) does not.
          .addEnvironment('ATTEMPT_FEED_STREAM', this.ledger.table.tableStreamArn as string);

    this.finance = new ReceiverFunction(this, 'finance', {
      ...FUNCTIONS.finance,
      memorySize: scale.financeMemoryMb ?? 512,
      timeout: Duration.seconds(29),
    })
      .bindLedger(this.ledger.table, ['dynamodb:Query', 'dynamodb:BatchGetItem'], {
        indexQuery: true,
        discrepancyIndexQuery: true,
      })
      // The day index's backfill checkpoint, which the attempts' readers look at once.
      .allowLedgerItems(this.ledger.table, ['dynamodb:GetItem'], CHECKPOINT_PARTITION_PREFIX);

    this.api = new HitApi(this, 'hit-api', {
      functions: {
        redirect: this.redirect.function,
        postback: this.postback.function,
        finance: this.finance.function,
      },
      ...(props.throttles ? { throttles: props.throttles } : {}),
      ...(props.customDomain ? { customDomain: props.customDomain } : {}),
    });
    if (props.customDomain && !props.customDomain.postbackName)
      Annotations.of(this).addWarning(
        "customDomain without postbackName: the surveys' postbacks move to the postback API's execute-api host, which a replaced API would change (the redirect sync re-points them at its daily read-back); set customDomain.postbackName to keep them on a name of your own",
      );
    // The public API keeps its postback routes: URLs the marketplace already holds keep working until the redirect
    // sync has pointed each survey's postbacks at the postback API (an apply, as for any change of our settings).
    this.postbackApi = new HitApi(this, 'postback-api', {
      description: "Survey postback receiver (the marketplace's server calls only)",
      functions: { postback: this.postback.function },
      routes: ROUTES.filter((route) => route.function === 'postback'),
      ...(props.throttles ? { throttles: props.throttles } : {}),
      ...(props.customDomain?.postbackName
        ? {
            customDomain: {
              name: props.customDomain.postbackName,
              certificateArn: props.customDomain.certificateArn,
            },
          }
        : {}),
    });

    const marketplace = props.marketplace ?? {};
    this.marketplaceToken = marketplace.tokenSecretName
      ? Secret.fromSecretNameV2(this, 'marketplace-token', marketplace.tokenSecretName)
      : new Secret(this, 'marketplace-token', {
          description:
            "The marketplace's supplier API access token (x-access-token); put the real value after deploying",
          removalPolicy: RETAIN_UNLESS_CREATE_FAILS,
        });
    this.redirectSync = new ReceiverFunction(this, 'redirect-sync', {
      ...SCHEDULED_FUNCTIONS['redirect-sync'],
      timeout: Duration.minutes(5),
      memorySize: scale.redirectSyncMemoryMb ?? 256,
      environment: {
        PUBLIC_BASE_URL: this.api.url,
        POSTBACK_BASE_URL: this.postbackApi.url,
        MARKETPLACE_BASE_URL: marketplace.baseUrl ?? 'https://marketplace.invalid',
        MARKETPLACE_API_VERSION: marketplace.apiVersion ?? 'v1',
        POSTBACK_METHOD_SUCCESS: props.postbackMethods?.success ?? 'GET',
        POSTBACK_METHOD_FAIL: props.postbackMethods?.fail ?? 'GET',
        ...variables({
          REDIRECT_SYNC_CONCURRENCY: scale.redirectSyncConcurrency,
          REDIRECT_READBACKS_PER_RUN: scale.redirectReadbacksPerRun,
          REDIRECT_CLOSURE_LOOKUPS_PER_RUN: scale.redirectClosureLookupsPerRun,
          MARKETPLACE_CONCURRENCY: scale.marketplaceConcurrency,
          MARKETPLACE_CALLS_PER_SECOND: scale.marketplaceCallsPerSecond,
          MARKETPLACE_TIMEOUT_MS: scale.marketplaceTimeoutMs,
          MARKETPLACE_BODY_TIMEOUT_MS: scale.marketplaceBodyTimeoutMs,
        }),
      },
    })
      // The registrations and checkpoints it keeps, and of an attempt only the day-index keys its backfill moves: the
      // function that holds the marketplace token and parses the marketplace's answers cannot write an attempt's
      // outcomes, a day's summary or any other item.
      .bindLedger(this.ledger.table, [], { indexQuery: true })
      .allowLedgerItems(
        this.ledger.table,
        ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:PutItem'],
        [SURVEY_PARTITION_PREFIX, CHECKPOINT_PARTITION_PREFIX],
      )
      .allowLedgerItems(this.ledger.table, ['dynamodb:UpdateItem'], CHECKPOINT_PARTITION_PREFIX)
      .allowLedgerItems(this.ledger.table, ['dynamodb:UpdateItem'], ATTEMPT_PARTITION_PREFIX, {
        attributes: ['pk', 'sk', LEDGER.index.partitionKey, LEDGER.index.sortKey],
      })
      .bindSigningKeys(this.signingKeys)
      .bindSecret('MARKETPLACE_TOKEN_SECRET_ID', this.marketplaceToken);
    this.redirectSyncSchedule = new Schedule(this, 'redirect-sync-schedule', {
      description: 'Runs the redirect sync',
      schedule: ScheduleExpression.rate(props.redirectSyncRate ?? Duration.minutes(15)),
      // A missed run is not retried: the next one starts from the same checkpoint.
      target: new LambdaInvoke(this.redirectSync.function, noRetry(this.redirectSync, Duration.minutes(10))),
      enabled: marketplace.baseUrl !== undefined && props.redirectSyncEnabled !== false,
    });
    const marketplaceEnvironment = {
      MARKETPLACE_BASE_URL: marketplace.baseUrl ?? 'https://marketplace.invalid',
      MARKETPLACE_API_VERSION: marketplace.apiVersion ?? 'v1',
    };
    /** The scheduled readers' switch onto the attempt feed, and how far it may trail the table. */
    const feedReaders: Record<string, string> = props.attemptFeed
      ? {
          ATTEMPT_FEED: 'on',
          ATTEMPT_FEED_LAG_SECONDS: String(FEED_BATCHING_WINDOW.toSeconds() + FEED_LAG_MARGIN.toSeconds()),
          // Only this stream's feed is read: a start an earlier stream left (turned off and on again) is not.
          ATTEMPT_FEED_STREAM: this.ledger.table.tableStreamArn as string,
        }
      : {};
    this.reconcile = new ReceiverFunction(this, 'reconcile', {
      ...SCHEDULED_FUNCTIONS.reconcile,
      functionName: `${this.stackName}-reconcile`,
      timeout: Duration.minutes(15),
      memorySize: scale.reconcileMemoryMb ?? 512,
      environment: {
        ...marketplaceEnvironment,
        RECONCILE_WINDOW_DAYS: String(props.reconcileWindowDays ?? 7),
        ...(props.matchedVerdicts === 'implied' ? { RECONCILE_MATCHED_VERDICTS: 'implied' } : {}),
        // With the attempt feed, a survey's attempts come from its bucket's days (feed-attempts.ts).
        ...feedReaders,
        ...variables({
          RECONCILE_CONCURRENCY: scale.reconcileConcurrency,
          RECONCILE_WINDOW_LIST_HOURS: scale.reconcileWindowListHours,
          MARKETPLACE_CONCURRENCY: scale.marketplaceConcurrency,
          MARKETPLACE_CALLS_PER_SECOND: scale.marketplaceCallsPerSecond,
          MARKETPLACE_TIMEOUT_MS: scale.marketplaceTimeoutMs,
          MARKETPLACE_BODY_TIMEOUT_MS: scale.marketplaceBodyTimeoutMs,
        }),
      },
    })
      // The discrepancy index: a complete reversed and its late postback, judged on days apart, find each other.
      .bindLedger(this.ledger.table, [], { indexQuery: true, discrepancyIndexQuery: true })
      // Attempts and the items made for transactions, the days' summaries, flags and outsiders, the surveys'
      // registrations and reconciliation state, the run's records, the day index's backfill checkpoint (and, with
      // the attempt feed, its start mark): not the health records, nor the refused hits.
      .allowLedgerItems(
        this.ledger.table,
        ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchGetItem'],
        [
          ATTEMPT_PARTITION_PREFIX,
          SUMMARY_PARTITION_PREFIX,
          SURVEY_PARTITION_PREFIX,
          RUN_PARTITION_PREFIX,
          CHECKPOINT_PARTITION_PREFIX,
          ...(props.attemptFeed ? [FEED_PARTITION_PREFIX] : []),
        ],
      )
      // A day's outsiders, one item each beside its summary, read by their sort keys' prefix (ledger-schema.ts);
      // with the attempt feed, a survey's attempts from its bucket's days (feed-attempts.ts).
      .allowLedgerItems(
        this.ledger.table,
        ['dynamodb:Query'],
        props.attemptFeed ? [SUMMARY_PARTITION_PREFIX, FEED_PARTITION_PREFIX] : SUMMARY_PARTITION_PREFIX,
      )
      .bindSecret('MARKETPLACE_TOKEN_SECRET_ID', this.marketplaceToken)
      .allowSelfInvoke();
    this.reconcileSchedule = new Schedule(this, 'reconcile-schedule', {
      description: 'Runs reconciliation over the trailing window',
      schedule: ScheduleExpression.rate(props.reconcileRate ?? Duration.hours(1)),
      target: new LambdaInvoke(this.reconcile.function, noRetry(this.reconcile, Duration.minutes(30))),
      enabled: marketplace.baseUrl !== undefined,
    });
    if (!marketplace.baseUrl) {
      Annotations.of(this.reconcileSchedule).addInfo(
        'marketplace.baseUrl is not set for this environment: the reconciliation schedule is disabled',
      );
      Annotations.of(this.redirectSyncSchedule).addInfo(
        'marketplace.baseUrl is not set for this environment: the redirect sync schedule is disabled',
      );
    }

    // The health check reads only the ledger: its schedule runs whether or not the marketplace is configured.
    // As long as the gap between runs allows (30 s less, 4.5 minutes at most): a run that cannot judge every
    // survey in it leaves the rest to the next, which starts with them (health-check.ts).
    const healthEvery = (props.healthCheckRate ?? Duration.minutes(5)).toSeconds();
    this.health = new ReceiverFunction(this, 'health', {
      ...SCHEDULED_FUNCTIONS.health,
      timeout: Duration.seconds(Math.max(30, Math.min(270, healthEvery - 30))),
      ...(scale.healthMemoryMb ? { memorySize: scale.healthMemoryMb } : {}),
      environment: {
        ...healthEnvironmentOf(props.healthSettings ?? {}),
        ...variables({ HEALTH_CONCURRENCY: scale.healthConcurrency }),
        // With the attempt feed, the window's attempts come from it (a Query per bucket of surveys and day).
        ...feedReaders,
      },
    })
      .bindLedger(this.ledger.table, ['dynamodb:Query', 'dynamodb:BatchGetItem'], { indexQuery: true })
      .allowLedgerItems(this.ledger.table, ['dynamodb:GetItem'], CHECKPOINT_PARTITION_PREFIX)
      .allowLedgerItems(this.ledger.table, ['dynamodb:PutItem'], 'HEALTH#');
    this.healthSchedule = new Schedule(this, 'health-schedule', {
      description: "Evaluates each active survey's postback health",
      schedule: ScheduleExpression.rate(props.healthCheckRate ?? Duration.minutes(5)),
      // A missed run is not retried: the next one, minutes later, sees the same traffic and more.
      target: new LambdaInvoke(this.health.function, noRetry(this.health, Duration.minutes(5))),
    });

    this.operations = new Operations(this, 'operations', {
      api: this.api.api,
      accessLogs: this.api.accessLogs,
      postbackApi: { api: this.postbackApi.api, accessLogs: this.postbackApi.accessLogs },
      buffer: this.buffer.queue,
      deadLetters: this.buffer.deadLetters,
      functions: {
        redirect: this.redirect.function,
        postback: this.postback.function,
        'drain-buffer': this.drainer.function,
        'redirect-sync': this.redirectSync.function,
        reconcile: this.reconcile.function,
        health: this.health.function,
        finance: this.finance.function,
        ...(this.attemptFeed ? { 'attempt-feed': this.attemptFeed.consumer.function } : {}),
      },
      ...(this.attemptFeed
        ? {
            attemptFeed: {
              consumer: this.attemptFeed.consumer.function,
              failedBatches: this.attemptFeed.failedBatches,
            },
          }
        : {}),
      ...(props.alarmEmail ? { alarmEmail: props.alarmEmail } : {}),
      // The health check runs whether or not the marketplace is configured; the other two only with it.
      schedules: {
        healthEvery: props.healthCheckRate ?? Duration.minutes(5),
        ...(marketplace.baseUrl
          ? {
              reconcileEvery: props.reconcileRate ?? Duration.hours(1),
              ...(props.redirectSyncEnabled !== false
                ? { syncEvery: props.redirectSyncRate ?? Duration.minutes(15) }
                : {}),
            }
          : {}),
      },
    });
    // Per-survey notices (failing, recovered) come from the function: an alarm on an aggregate cannot name the survey.
    this.health.bindAlarmTopic(this.operations.topic, this.operations.key);
    new CfnOutput(this, 'AlarmTopicArn', {
      value: this.operations.topic.topicArn,
      description: 'Subscribe to receive alarms',
    });
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: this.buffer.deadLetters.queueUrl });

    new CfnOutput(this, 'ApiUrl', { value: this.api.url, description: 'PUBLIC_BASE_URL for the CLI' });
    if (this.api.domain)
      new CfnOutput(this, 'CustomDomainTarget', {
        value: this.api.domain.regionalDomainName,
        description: `Point ${props.customDomain?.name} here (a CNAME, or an alias record in the zone of hosted zone id below)`,
      });
    if (this.api.domain)
      new CfnOutput(this, 'CustomDomainHostedZoneId', { value: this.api.domain.regionalHostedZoneId });
    new CfnOutput(this, 'PostbackApiUrl', {
      value: this.postbackApi.url,
      description: "POSTBACK_BASE_URL for the CLI: where the surveys' postbacks point",
    });
    if (this.postbackApi.domain)
      new CfnOutput(this, 'PostbackDomainTarget', {
        value: this.postbackApi.domain.regionalDomainName,
        description: `Point ${props.customDomain?.postbackName} here (a CNAME, or an alias record in the zone of the hosted zone id below)`,
      });
    if (this.postbackApi.domain)
      new CfnOutput(this, 'PostbackDomainHostedZoneId', {
        value: this.postbackApi.domain.regionalHostedZoneId,
      });
    new CfnOutput(this, 'TableName', { value: this.ledger.table.tableName });
    new CfnOutput(this, 'SigningKeysSecretArn', { value: this.signingKeys.secretArn });
    // A secret given by name (`marketplace.tokenSecretName`) has only a partial ARN here, which Secrets Manager reads
    // as a complete one when the name ends in a hyphen and six characters: its name is what finds it.
    new CfnOutput(this, 'MarketplaceTokenSecretArn', {
      value: marketplace.tokenSecretName ?? this.marketplaceToken.secretArn,
      description:
        'MARKETPLACE_TOKEN_SECRET_ID for the CLI: the secret ARN, or the name of a secret given by name',
    });

    this.suppressAcceptedFindings();
  }

  /** cdk-nag findings that are decisions, each acknowledged with its reason. */
  private suppressAcceptedFindings() {
    Validations.of(this.api.api).acknowledge({
      id: 'AwsSolutions-APIG4',
      reason:
        "The marketplace and respondents' browsers cannot sign requests. Every route authenticates in the handler with the HMAC signature carried in the URL.",
    });
    Validations.of(this.postbackApi.api).acknowledge({
      id: 'AwsSolutions-APIG4',
      reason:
        'The marketplace cannot sign requests. The postback routes authenticate in the handler with the HMAC signature carried in the URL.',
    });
    Validations.of(this.signingKeys).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The ring is rotated by key id (a new key is added and surveys are re-pointed before the old one retires); an automatic rotation would invalidate URLs already configured at the marketplace.',
    });
    const syncFunctionId = this.getLogicalId(this.redirectSync.function.node.defaultChild as CfnElement);
    Validations.of(this).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${syncFunctionId}.Arn>:*]`,
      reason:
        "The scheduler's target role may invoke the sync function's versions and aliases; the wildcard is limited to that one function.",
    });
    if (this.marketplaceToken instanceof Secret) {
      Validations.of(this.marketplaceToken).acknowledge({
        id: 'AwsSolutions-SMG4',
        reason:
          'The token is issued by the marketplace; it is replaced by hand when the marketplace issues a new one.',
      });
    }
    const reconcileFunctionId = this.getLogicalId(this.reconcile.function.node.defaultChild as CfnElement);
    Validations.of(this).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${reconcileFunctionId}.Arn>:*]`,
      reason:
        "The scheduler's target role may invoke the reconcile function's versions and aliases; the wildcard is limited to that one function.",
    });
    const healthFunctionId = this.getLogicalId(this.health.function.node.defaultChild as CfnElement);
    Validations.of(this).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${healthFunctionId}.Arn>:*]`,
      reason:
        "The scheduler's target role may invoke the health function's versions and aliases; the wildcard is limited to that one function.",
    });
    Validations.of(this.buffer.deadLetters).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason:
        'This is the dead-letter queue of the hit buffer; what lands here waits for an operator (alarm dead-letters).',
    });
    if (this.attemptFeed)
      Validations.of(this.attemptFeed.failedBatches).acknowledge({
        id: 'AwsSolutions-SQS3',
        reason:
          "This is the attempt feed consumer's on-failure destination: it describes batches that kept failing, for an operator (alarm attempt-feed-failed-batches).",
      });
    for (const fn of [
      this.redirect,
      this.postback,
      this.redirectSync,
      this.reconcile,
      this.health,
      this.finance,
      this.drainer,
      ...(this.attemptFeed ? [this.attemptFeed.consumer] : []),
    ]) {
      Validations.of(fn).acknowledge({
        id: 'AwsSolutions-L1',
        reason: 'nodejs22.x is the runtime this product is built and tested for.',
      });
    }
  }
}
