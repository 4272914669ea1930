/**
 * Configuration of the functions, read from the environment once per container. A missing or invalid value
 * fails the cold start with a message naming the variable; no request ever sees a half-configured handler.
 */
import * as z from 'zod/mini';
import { DEFAULT_HEALTH_SETTINGS as H, type HealthSettings } from '../health/health-rules';
import { DEFAULT_FEED_LAG_SECONDS } from '../ledger/feed-keys';
import type { PostbackMethods } from '../marketplace/redirect-settings';
import { type LandingTemplates, templateProblem } from '../receiving/landing-page';
import { OUTCOMES } from '../receiving/outcome';
import { REDIRECTS_PER_SENDER_MINUTE } from '../receiving/sender-limit';
import { describeIssues, filled, optionalWholeNumber, wholeNumber } from '../shared/validation';
import type { KeyRingLocation } from './key-ring-source';

export const LANDING_VARIABLES = {
  success: 'LANDING_URL_SUCCESS',
  fail: 'LANDING_URL_FAIL',
  overquota: 'LANDING_URL_OVERQUOTA',
  quality: 'LANDING_URL_QUALITY',
  termination: 'LANDING_URL_TERMINATION',
} as const;

const landingTemplate = z.pipe(
  z.pipe(
    z.optional(z.string()),
    z.transform((value: string | undefined) => (value === '' ? undefined : value)),
  ),
  z.optional(
    z.string().check(
      z.superRefine((value, ctx) => {
        const problem = templateProblem(value);
        if (problem) ctx.addIssue({ code: 'custom', message: `landing URL template ${problem}` });
      }),
    ),
  ),
);

/** What every function that touches the ledger and the key ring needs. */
const base = z.object({
  TABLE_NAME: filled('is required'),
  AWS_REGION: z._default(filled(), 'us-east-1'),
  /** A local engine; unset in AWS. */
  DYNAMODB_ENDPOINT: z.optional(z.url()),
  STORE_TIMEOUT_MS: wholeNumber(50, 30_000, 1000),
  /** Secrets Manager secret holding the signing key ring (AWS). */
  SIGNING_KEYS_SECRET_ID: z.optional(filled()),
  /** A file holding the signing key ring (the local stack). */
  SIGNING_KEYS_FILE: z.optional(filled()),
  /** The signing key ring itself (tests). */
  SIGNING_KEYS: z.optional(filled()),
  AWS_LAMBDA_FUNCTION_NAME: z.optional(z.string()),
});

function checkKeyRingSource(env: z.infer<typeof base>, ctx: z.core.$RefinementCtx) {
  const sources = [env.SIGNING_KEYS_SECRET_ID, env.SIGNING_KEYS_FILE, env.SIGNING_KEYS].filter(
    Boolean,
  ).length;
  if (sources !== 1) {
    ctx.addIssue({
      code: 'custom',
      path: ['SIGNING_KEYS_SECRET_ID'],
      message: 'set exactly one of SIGNING_KEYS_SECRET_ID, SIGNING_KEYS_FILE, SIGNING_KEYS',
    });
  }
  for (const local of ['SIGNING_KEYS', 'SIGNING_KEYS_FILE'] as const) {
    if (env[local] && env.AWS_LAMBDA_FUNCTION_NAME) {
      ctx.addIssue({
        code: 'custom',
        path: [local],
        message: 'must not be set in Lambda; keep the key ring in Secrets Manager (SIGNING_KEYS_SECRET_ID)',
      });
    }
  }
}

const landingShape = Object.fromEntries(
  Object.values(LANDING_VARIABLES).map((name) => [name, landingTemplate]),
) as Record<(typeof LANDING_VARIABLES)[keyof typeof LANDING_VARIABLES], typeof landingTemplate>;
/** The per-sender bound as written; one that does not read is the default (no bound). */
const perSenderBound = wholeNumber(0, 1_000_000, REDIRECTS_PER_SENDER_MINUTE);

/**
 * `on` (the stack's `attemptFeed`): the table keeps the attempt feed. Its scheduled readers read attempts from it
 * instead of the day index and their items; the receivers leave the attempts it covers out of the day index
 * (ledger/feed-coverage.ts).
 */
const attemptFeedSwitch = {
  ATTEMPT_FEED: z._default(z.enum(['on', 'off']), 'off'),
  /** The table's stream ARN (the stack sets it for the receivers): only a feed marked for it covers their hits. */
  ATTEMPT_FEED_STREAM: z.optional(z.string()),
};

const receiverEnvironment = z
  .extend(base, {
    ...landingShape,
    ...attemptFeedSwitch,
    /** The durable buffer for hits the ledger cannot take right now (SQS queue URL). */
    HIT_BUFFER_QUEUE_URL: z.optional(z.url()),
    /** A local SQS stand-in; unset in AWS. */
    SQS_ENDPOINT: z.optional(z.url()),
    /** Address ranges postbacks may come from, comma-separated; unset: any. */
    POSTBACK_SOURCE_CIDRS: z.optional(z.string()),
    /**
     * Redirects recorded per sender (address, IPv6 /64), container and minute; 0: no bound (sender-limit.ts). A value
     * that does not read is no bound, not a redirect function that cannot start (respondents not forwarded).
     */
    REDIRECTS_PER_SENDER_MINUTE: z.transform((value: unknown) => {
      // Read by hand rather than with z.catch, which brings 8 kB of zod into every receiver's cold start.
      const read = perSenderBound.safeParse(value);
      return read.success ? read.data : REDIRECTS_PER_SENDER_MINUTE;
    }),
  })
  .check(z.superRefine(checkKeyRingSource));

const method = z._default(z.enum(['GET', 'POST']), 'GET');
const syncEnvironment = z
  .extend(base, {
    /** The receiver's public URL, which the survey URLs are built on. */
    PUBLIC_BASE_URL: z.url('must be the receiver API URL'),
    /** The postbacks' own host (the stack's postback API): unset, the postbacks are on PUBLIC_BASE_URL too. */
    POSTBACK_BASE_URL: z.optional(z.url('must be the receiver postback API URL')),
    POSTBACK_METHOD_SUCCESS: method,
    POSTBACK_METHOD_FAIL: method,
    REDIRECT_SYNC_CONCURRENCY: wholeNumber(1, 32, 4),
    /**
     * Verified surveys read back per run at most (each once a day); 0 turns it off; unset, the sync sizes it to the
     * verified live surveys (redirect-configuration.ts `readBacksPerRunFor`).
     */
    REDIRECT_READBACKS_PER_RUN: optionalWholeNumber(0, 10_000),
    /**
     * Active surveys the hourly list of live surveys leaves out, looked up per run (closures; resumed ones after);
     * unset, the sync sizes it to the open active surveys (redirect-configuration.ts `closureLookupsPerRunFor`).
     */
    REDIRECT_CLOSURE_LOOKUPS_PER_RUN: optionalWholeNumber(0, 5_000),
    /** Where the first sync starts looking (default: every live survey). */
    REDIRECT_SYNC_INITIAL_SINCE: z.optional(z.iso.datetime()),
  })
  .check(z.superRefine(checkKeyRingSource));

/** Where the ledger is and how long a request to it may take: what every function's configuration starts with. */
export interface LedgerConnection {
  readonly tableName: string;
  readonly region: string;
  readonly dynamoEndpoint?: string | undefined;
  readonly storeTimeoutMs: number;
}

export interface StoreConfig extends LedgerConnection {
  readonly keyRing: KeyRingLocation;
}

export interface ReceiverConfig extends StoreConfig {
  readonly landing: LandingTemplates;
  readonly buffer?: { readonly queueUrl: string; readonly endpoint?: string | undefined } | undefined;
  readonly postbackSources?: string | undefined;
  /** Redirects recorded per sender and minute in a container (0: no bound). */
  readonly perSenderMinute: number;
  /** The table keeps the attempt feed: attempts it covers stay out of the day index. */
  readonly attemptFeed: boolean;
  /** The table's stream, whose feed alone covers (ledger/feed-coverage.ts). */
  readonly feedStream?: string | undefined;
}

export interface RedirectSyncConfig extends StoreConfig {
  readonly publicBaseUrl: string;
  /** Where the postback URLs point: PUBLIC_BASE_URL unless POSTBACK_BASE_URL says otherwise. */
  readonly postbackBaseUrl: string;
  readonly methods: PostbackMethods;
  readonly concurrency: number;
  /** Unset: sized by the sync to the surveys it reads back. */
  readonly readBacksPerRun: number | undefined;
  /** Unset: sized by the sync to the open active surveys. */
  readonly closureLookupsPerRun: number | undefined;
  readonly initialSince?: Date | undefined;
}

function parse<T extends z.ZodMiniType>(schema: T, env: NodeJS.ProcessEnv): z.infer<T> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) throw new Error(`invalid configuration: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/** The ledger's part of any function's environment: the one mapping from variables to settings. */
function ledgerConnection(values: z.infer<typeof base>): LedgerConnection {
  return {
    tableName: values.TABLE_NAME,
    region: values.AWS_REGION,
    dynamoEndpoint: values.DYNAMODB_ENDPOINT,
    storeTimeoutMs: values.STORE_TIMEOUT_MS,
  };
}

function storeConfig(values: z.infer<typeof base>): StoreConfig {
  return { ...ledgerConnection(values), keyRing: keyRingLocation(values) };
}

/** The redirect and postback receivers' configuration. Throws an Error naming every bad variable. */
export function readReceiverConfig(env: NodeJS.ProcessEnv = process.env): ReceiverConfig {
  const values = parse(receiverEnvironment, env);
  const landing: LandingTemplates = {};
  for (const outcome of OUTCOMES) {
    const template = values[LANDING_VARIABLES[outcome]];
    if (template) landing[outcome] = template;
  }
  return {
    ...storeConfig(values),
    landing,
    ...(values.HIT_BUFFER_QUEUE_URL
      ? { buffer: { queueUrl: values.HIT_BUFFER_QUEUE_URL, endpoint: values.SQS_ENDPOINT } }
      : {}),
    postbackSources: values.POSTBACK_SOURCE_CIDRS,
    perSenderMinute: values.REDIRECTS_PER_SENDER_MINUTE,
    attemptFeed: values.ATTEMPT_FEED === 'on',
    feedStream: values.ATTEMPT_FEED_STREAM,
  };
}

/** The redirect sync function's configuration (the marketplace's is read by marketplace-access). */
export function readRedirectSyncConfig(env: NodeJS.ProcessEnv = process.env): RedirectSyncConfig {
  const values = parse(syncEnvironment, env);
  return {
    ...storeConfig(values),
    publicBaseUrl: values.PUBLIC_BASE_URL,
    postbackBaseUrl: values.POSTBACK_BASE_URL ?? values.PUBLIC_BASE_URL,
    methods: { success: values.POSTBACK_METHOD_SUCCESS, fail: values.POSTBACK_METHOD_FAIL },
    concurrency: values.REDIRECT_SYNC_CONCURRENCY,
    readBacksPerRun: values.REDIRECT_READBACKS_PER_RUN,
    closureLookupsPerRun: values.REDIRECT_CLOSURE_LOOKUPS_PER_RUN,
    initialSince: values.REDIRECT_SYNC_INITIAL_SINCE
      ? new Date(values.REDIRECT_SYNC_INITIAL_SINCE)
      : undefined,
  };
}

/** Where the environment says the key ring lives (exactly one of the three variables is set). */
export function keyRingLocation(env: {
  SIGNING_KEYS_SECRET_ID?: string | undefined;
  SIGNING_KEYS_FILE?: string | undefined;
  SIGNING_KEYS?: string | undefined;
}): KeyRingLocation {
  if (env.SIGNING_KEYS_SECRET_ID) return { secretId: env.SIGNING_KEYS_SECRET_ID };
  if (env.SIGNING_KEYS_FILE) return { file: env.SIGNING_KEYS_FILE };
  return { inline: env.SIGNING_KEYS as string };
}

/** The scheduled readers' switch onto the attempt feed (the stack sets both with `attemptFeed`). */
const feedVariables = {
  ...attemptFeedSwitch,
  /** How far behind the table the feed may be: with it, a run judges as of that much earlier. */
  ATTEMPT_FEED_LAG_SECONDS: wholeNumber(0, 3_600, DEFAULT_FEED_LAG_SECONDS),
};

const reconcileEnvironment = z.extend(base, {
  ...feedVariables,
  /** The trailing window each scheduled run re-checks, in Pacific days including today. */
  RECONCILE_WINDOW_DAYS: wholeNumber(1, 62, 7),
  RECONCILE_CONCURRENCY: wholeNumber(1, 32, 4),
  /** `self`: a run cut short by the Lambda's deadline invokes the function again to resume at once. */
  RECONCILE_CONTINUE: z._default(z.enum(['self', 'next-schedule']), 'self'),
  /** A discrepancy must have been quiet this long before it is judged (postback retries, list lag). */
  RECONCILE_SETTLE_SECONDS: wholeNumber(0, 86_400, 600),
  /** How many Pacific days before a window an attempt's transaction is looked for (0: none). */
  RECONCILE_LOOKBACK_DAYS: wholeNumber(0, 62, 7),
  /** The newest Pacific days every scheduled run reconciles in full (DEFAULT_FRESH_DAYS: today; older days when changed). */
  RECONCILE_FRESH_DAYS: wholeNumber(1, 62, 1),
  /** An older day whose transactions did not change is re-checked after this many hours. */
  RECONCILE_SETTLED_RECHECK_HOURS: wholeNumber(1, 720, 24),
  /** The whole window's transactions are listed by the first run of every this many hours (1: every run). */
  RECONCILE_WINDOW_LIST_HOURS: wholeNumber(1, 24, 1),
  /**
   * `implied`: the agreement of a non-complete that tells it again by itself is written on no attempt without a
   * verdict (verdict-rules.ts `impliedMatch`); `kept`: every verdict is written on its attempt.
   */
  RECONCILE_MATCHED_VERDICTS: z._default(z.enum(['kept', 'implied']), 'kept'),
});

export interface ReconcileConfig extends LedgerConnection {
  readonly windowDays: number;
  readonly concurrency: number;
  readonly continueSelf: boolean;
  readonly settleMs: number;
  readonly lookbackDays: number;
  readonly freshDays: number;
  readonly settledRecheckMs: number;
  readonly windowListHours: number;
  /** Leave agreements the attempt tells again by itself without a verdict (RECONCILE_MATCHED_VERDICTS=implied). */
  readonly impliedMatches: boolean;
  /** Read the window's attempts from the attempt feed instead of their items. */
  readonly readsFeed: boolean;
  /** The table's stream: a start mark of another (the feed turned off and on again) is no start. */
  readonly feedStream?: string | undefined;
  readonly feedLagMs: number;
}

/** The reconciliation function's configuration (it needs no signing keys). */
export function readReconcileConfig(env: NodeJS.ProcessEnv = process.env): ReconcileConfig {
  const values = parse(reconcileEnvironment, env);
  return {
    ...ledgerConnection(values),
    windowDays: values.RECONCILE_WINDOW_DAYS,
    concurrency: values.RECONCILE_CONCURRENCY,
    continueSelf: values.RECONCILE_CONTINUE === 'self',
    settleMs: values.RECONCILE_SETTLE_SECONDS * 1000,
    lookbackDays: values.RECONCILE_LOOKBACK_DAYS,
    freshDays: values.RECONCILE_FRESH_DAYS,
    settledRecheckMs: values.RECONCILE_SETTLED_RECHECK_HOURS * 3_600_000,
    windowListHours: values.RECONCILE_WINDOW_LIST_HOURS,
    impliedMatches: values.RECONCILE_MATCHED_VERDICTS === 'implied',
    readsFeed: values.ATTEMPT_FEED === 'on',
    feedStream: values.ATTEMPT_FEED_STREAM,
    feedLagMs: values.ATTEMPT_FEED_LAG_SECONDS * 1000,
  };
}

const financeEnvironment = z
  .extend(base, {
    /** `iam`: API Gateway checks SigV4 and the handler insists it did (AWS); `bearer`: FINANCE_API_TOKEN (local). */
    FINANCE_AUTH: z._default(z.enum(['iam', 'bearer']), 'iam'),
    FINANCE_API_TOKEN: z.optional(z.string().check(z.minLength(16, 'must be at least 16 characters'))),
  })
  .check(
    z.superRefine((env, ctx) => {
      if (env.FINANCE_AUTH === 'bearer' && !env.FINANCE_API_TOKEN) {
        ctx.addIssue({
          code: 'custom',
          path: ['FINANCE_API_TOKEN'],
          message: 'is required when FINANCE_AUTH is bearer',
        });
      }
      if (env.FINANCE_AUTH === 'bearer' && env.AWS_LAMBDA_FUNCTION_NAME) {
        ctx.addIssue({ code: 'custom', path: ['FINANCE_AUTH'], message: 'must be iam in Lambda' });
      }
    }),
  );

export interface FinanceConfig extends LedgerConnection {
  readonly auth: { readonly mode: 'iam' } | { readonly mode: 'bearer'; readonly token: string };
}

/** The finance API's configuration. */
export function readFinanceConfig(env: NodeJS.ProcessEnv = process.env): FinanceConfig {
  const values = parse(financeEnvironment, env);
  return {
    ...ledgerConnection(values),
    auth:
      values.FINANCE_AUTH === 'bearer'
        ? { mode: 'bearer', token: values.FINANCE_API_TOKEN as string }
        : { mode: 'iam' },
  };
}

/** The attempt feed's stream consumer (feed/stream-consumer.ts): the ledger, nothing else. */
export function readFeedConfig(env: NodeJS.ProcessEnv = process.env): LedgerConnection {
  return ledgerConnection(parse(base, env));
}

/** The drainer's configuration: the ledger, and how it backs off while the ledger is down. */
export interface DrainConfig extends LedgerConnection {
  /** The buffer's URL, for stretching a failed message's visibility; unset, SQS's own timeout applies. */
  readonly queueUrl: string | undefined;
  readonly sqsEndpoint: string | undefined;
  readonly backoff: { readonly baseSeconds: number; readonly maxSeconds: number };
  /** How long the drainer leaves the ledger alone after it answered StoreUnavailable. */
  readonly circuitSeconds: number;
  /** The table keeps the attempt feed: attempts it covers stay out of the day index. */
  readonly attemptFeed: boolean;
  /** The table's stream, whose feed alone covers (ledger/feed-coverage.ts). */
  readonly feedStream?: string | undefined;
}

const drain = z.object({
  ...base.shape,
  HIT_BUFFER_QUEUE_URL: z.optional(z.url()),
  SQS_ENDPOINT: z.optional(z.url()),
  DRAIN_BACKOFF_BASE_SECONDS: wholeNumber(1, 43_200, 60),
  DRAIN_BACKOFF_MAX_SECONDS: wholeNumber(1, 43_200, 7_200),
  DRAIN_CIRCUIT_SECONDS: wholeNumber(0, 3_600, 30),
  ...attemptFeedSwitch,
});

export function readDrainConfig(env: NodeJS.ProcessEnv = process.env): DrainConfig {
  const values = parse(drain, env);
  return {
    ...ledgerConnection(values),
    storeTimeoutMs: Math.max(values.STORE_TIMEOUT_MS, 3000),
    queueUrl: values.HIT_BUFFER_QUEUE_URL,
    sqsEndpoint: values.SQS_ENDPOINT,
    backoff: {
      baseSeconds: values.DRAIN_BACKOFF_BASE_SECONDS,
      maxSeconds: Math.max(values.DRAIN_BACKOFF_MAX_SECONDS, values.DRAIN_BACKOFF_BASE_SECONDS),
    },
    circuitSeconds: values.DRAIN_CIRCUIT_SECONDS,
    attemptFeed: values.ATTEMPT_FEED === 'on',
    feedStream: values.ATTEMPT_FEED_STREAM,
  };
}

/** The survey health rules' thresholds (`HEALTH_*`); the CLI reads them too, so both judge alike. */
const healthSettingsEnvironment = z
  .object({
    HEALTH_WINDOW_MINUTES: wholeNumber(1, 1440, H.windowMinutes),
    HEALTH_GRACE_MINUTES: wholeNumber(0, 1440, H.graceMinutes),
    HEALTH_STOPPED_MINUTES: wholeNumber(1, 1440, H.stoppedMinutes),
    HEALTH_STOPPED_MIN_REDIRECTS: wholeNumber(1, 100_000, H.stoppedMinRedirects),
    HEALTH_COVERAGE_WARN_PERCENT: wholeNumber(0, 100, H.coverageWarnPercent),
    HEALTH_COVERAGE_FAIL_PERCENT: wholeNumber(0, 100, H.coverageFailPercent),
    HEALTH_COVERAGE_MIN_SUCCESS: wholeNumber(1, 100_000, H.coverageMinSuccess),
    HEALTH_UNCOVERED_MIN: wholeNumber(1, 100_000, H.uncoveredMin),
    HEALTH_REFUSED_WARN: wholeNumber(1, 1_000_000, H.refusedWarnAt),
    HEALTH_REFUSED_KEY_FAIL: wholeNumber(1, 1_000_000, H.refusedKeyFailAt),
    HEALTH_DRIFT_FAILURES: wholeNumber(1, 1000, H.driftFailures),
  })
  .check(
    z.superRefine((env, ctx) => {
      if (env.HEALTH_STOPPED_MINUTES <= env.HEALTH_GRACE_MINUTES)
        ctx.addIssue({
          code: 'custom',
          path: ['HEALTH_STOPPED_MINUTES'],
          message:
            'must be longer than HEALTH_GRACE_MINUTES (redirects younger than the grace are not judged)',
        });
      if (env.HEALTH_COVERAGE_FAIL_PERCENT > env.HEALTH_COVERAGE_WARN_PERCENT)
        ctx.addIssue({
          code: 'custom',
          path: ['HEALTH_COVERAGE_FAIL_PERCENT'],
          message: 'must not be above HEALTH_COVERAGE_WARN_PERCENT',
        });
    }),
  );

/** Each health setting's variable: the one mapping, read here and written by the stack (healthEnvironmentOf). */
export const HEALTH_VARIABLES = {
  windowMinutes: 'HEALTH_WINDOW_MINUTES',
  graceMinutes: 'HEALTH_GRACE_MINUTES',
  stoppedMinutes: 'HEALTH_STOPPED_MINUTES',
  stoppedMinRedirects: 'HEALTH_STOPPED_MIN_REDIRECTS',
  coverageWarnPercent: 'HEALTH_COVERAGE_WARN_PERCENT',
  coverageFailPercent: 'HEALTH_COVERAGE_FAIL_PERCENT',
  coverageMinSuccess: 'HEALTH_COVERAGE_MIN_SUCCESS',
  uncoveredMin: 'HEALTH_UNCOVERED_MIN',
  refusedWarnAt: 'HEALTH_REFUSED_WARN',
  refusedKeyFailAt: 'HEALTH_REFUSED_KEY_FAIL',
  driftFailures: 'HEALTH_DRIFT_FAILURES',
} as const satisfies Record<keyof HealthSettings, keyof z.infer<typeof healthSettingsEnvironment>>;

/** The survey health rules' settings from the environment. Throws naming every bad variable. */
export function readHealthSettings(env: NodeJS.ProcessEnv = process.env): HealthSettings {
  const values = parse(healthSettingsEnvironment, env);
  return Object.fromEntries(
    Object.entries(HEALTH_VARIABLES).map(([setting, variable]) => [setting, values[variable]]),
  ) as unknown as HealthSettings;
}

/**
 * The variables that give a function these health settings (those set; the rest keep their defaults), checked
 * as the function will read them: throws naming every bad value or combination.
 */
export function healthEnvironmentOf(settings: Partial<HealthSettings>): Record<string, string> {
  const env = Object.fromEntries(
    Object.entries(settings)
      .filter(([, value]) => value !== undefined)
      .map(([setting, value]) => [HEALTH_VARIABLES[setting as keyof HealthSettings], String(value)]),
  );
  readHealthSettings(env);
  return env;
}

const healthEnvironment = z
  .extend(base, {
    HEALTH_CONCURRENCY: wholeNumber(1, 32, 4),
    /** The alarm topic the notices go to (AWS); unset, they go to the log and HEALTH_WEBHOOK_URL. */
    ALARM_TOPIC_ARN: z.optional(
      z.string().check(z.regex(/^arn:aws[a-z-]*:sns:/, 'must be an SNS topic ARN')),
    ),
    /** Locally: where each notice is also POSTed as JSON. */
    HEALTH_WEBHOOK_URL: z.optional(z.url()),
    HEALTH_WEBHOOK_TIMEOUT_MS: wholeNumber(100, 30_000, 5000),
    ...feedVariables,
  })
  .check(
    z.superRefine((env, ctx) => {
      if (env.AWS_LAMBDA_FUNCTION_NAME && !env.ALARM_TOPIC_ARN)
        ctx.addIssue({
          code: 'custom',
          path: ['ALARM_TOPIC_ARN'],
          message: 'is required in Lambda (the notices go to the alarm topic)',
        });
    }),
  );

export interface HealthConfig extends LedgerConnection {
  readonly settings: HealthSettings;
  readonly concurrency: number;
  /** Read the window's attempts from the attempt feed instead of their items. */
  readonly readsFeed: boolean;
  /** The table's stream: a start mark of another (the feed turned off and on again) is no start. */
  readonly feedStream?: string | undefined;
  readonly feedLagMs: number;
  readonly notices:
    | { readonly mode: 'sns'; readonly topicArn: string }
    | { readonly mode: 'local'; readonly webhookUrl?: string | undefined; readonly timeoutMs: number };
}

/** The survey health function's configuration (it needs no signing keys and no marketplace). */
export function readHealthConfig(env: NodeJS.ProcessEnv = process.env): HealthConfig {
  const values = parse(healthEnvironment, env);
  return {
    ...ledgerConnection(values),
    settings: readHealthSettings(env),
    concurrency: values.HEALTH_CONCURRENCY,
    readsFeed: values.ATTEMPT_FEED === 'on',
    feedStream: values.ATTEMPT_FEED_STREAM,
    feedLagMs: values.ATTEMPT_FEED_LAG_SECONDS * 1000,
    notices: values.ALARM_TOPIC_ARN
      ? { mode: 'sns', topicArn: values.ALARM_TOPIC_ARN }
      : { mode: 'local', webhookUrl: values.HEALTH_WEBHOOK_URL, timeoutMs: values.HEALTH_WEBHOOK_TIMEOUT_MS },
  };
}
