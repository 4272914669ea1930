/**
 * Deployment settings: one typed, validated, checked-in entry per environment under `environments` in cdk.json's
 * context, chosen with `-c env=<name>`. Nothing is read from the shell, so the same command always deploys the
 * same stack: a redeploy from a shell that lacks some variable cannot silently disable the schedules or point at
 * a placeholder marketplace. Without `-c env`, the `example` environment synthesizes offline (CI, the template
 * tests); every other environment must name its account, region and marketplace, or synth fails naming the setting.
 */
import { Duration } from 'aws-cdk-lib';
import * as z from 'zod';
import type { HealthSettings } from '../functions/health/health-rules';
import { templateProblem } from '../functions/receiving/landing-page';
import { healthEnvironmentOf, LANDING_VARIABLES } from '../functions/runtime/runtime-config';
import { parseAllowList } from '../functions/runtime/source-allow-list';
import type { ReceiverStackProps } from './receiver-stack';

/** The room a setting passed to a function as its environment may take (`postbackSourceCidrs`, `landingUrls`). */
export const SETTING_ENVIRONMENT_BYTES = 3_000;

export const EXAMPLE_ENVIRONMENT = 'example';

const method = z.enum(['GET', 'POST']);
/** Account-wide, API Gateway allows 10,000 requests a second by default (a quota AWS can raise). */
const throttle = z
  .object({ rate: z.int().min(1).max(100_000), burst: z.int().min(1).max(200_000) })
  .strict()
  .refine((t) => t.burst >= t.rate, { message: 'burst must be at least rate' });
const landingTemplate = z.string().superRefine((value, ctx) => {
  const problem = templateProblem(value);
  if (problem) ctx.addIssue({ code: 'custom', message: `landing URL template ${problem}` });
});

const environmentSchema = z
  .object({
    stackName: z
      .string()
      // The reconcile function is named `<stack>-reconcile`, and a function name holds 64 characters.
      .regex(
        /^[A-Za-z][A-Za-z0-9-]{0,53}$/,
        'must be a letter, then letters, digits or -, 54 characters at most',
      )
      .default('SurveyReceiver'),
    account: z
      .string()
      .regex(/^\d{12}$/, 'must be a 12-digit AWS account id')
      .optional(),
    region: z
      .string()
      .regex(/^[a-z]{2}(-[a-z]+)+-\d$/, 'must be an AWS region such as us-east-1')
      .optional(),
    marketplace: z
      .object({
        // HTTPS only: every request carries the access token.
        baseUrl: z
          .url({
            protocol: /^https$/,
            error: 'must be an https:// URL (every request carries the access token)',
          })
          .check(z.refine((url) => !/\/api\/v\d+\/?$/.test(url), 'is the host, without /api/v1 or /api/v2'))
          .optional(),
        apiVersion: z.enum(['v1', 'v2']).default('v1'),
        tokenSecretName: z
          .string()
          .min(1)
          .check(z.refine((name) => !name.startsWith('arn:'), "is the secret's name, not its ARN"))
          .optional(),
      })
      .strict()
      .default({ apiVersion: 'v1' }),
    postbackMethods: z
      .object({ success: method.default('GET'), fail: method.default('GET') })
      .strict()
      .default({ success: 'GET', fail: 'GET' }),
    // The sync may run five minutes: runs no closer than that never overlap.
    redirectSyncRateMinutes: z.int().min(5).max(1440).default(15),
    /** Off for a second stack on the same marketplace account: the sync points every live survey at its stack. */
    redirectSyncEnabled: z.boolean().default(true),
    reconcileRateMinutes: z.int().min(1).max(1440).default(60),
    reconcileWindowDays: z.int().min(1).max(31).default(7),
    health: z
      .object({
        /** How often the survey health check runs; more than an hour apart it no longer warns within minutes. */
        scheduleMinutes: z.int().min(1).max(60).default(5),
        /** How far back each run looks at a survey's traffic (HEALTH_WINDOW_MINUTES). */
        windowMinutes: z.int().min(1).max(1440).default(15),
        // The rules' thresholds (README, "Survey health"), each its HEALTH_* variable; unset, the default.
        graceMinutes: z.int().optional(),
        stoppedMinutes: z.int().optional(),
        stoppedMinRedirects: z.int().optional(),
        coverageWarnPercent: z.int().optional(),
        coverageFailPercent: z.int().optional(),
        coverageMinSuccess: z.int().optional(),
        uncoveredMin: z.int().optional(),
        refusedWarnAt: z.int().optional(),
        refusedKeyFailAt: z.int().optional(),
        driftFailures: z.int().optional(),
      })
      .strict()
      // A window shorter than the gap between runs would leave traffic that no run ever looks at.
      .refine((h) => h.windowMinutes >= h.scheduleMinutes, {
        message: 'windowMinutes must be at least scheduleMinutes',
        path: ['windowMinutes'],
      })
      .default({ scheduleMinutes: 5, windowMinutes: 15 }),
    postbackSourceCidrs: z.string().min(1).optional(),
    /** Redirects recorded per sender (address, IPv6 /64), container and minute (REDIRECTS_PER_SENDER_MINUTE); 0: none. */
    redirectsPerSenderMinute: z.int().min(0).max(1_000_000).optional(),
    landingUrls: z
      .object({
        success: landingTemplate.optional(),
        fail: landingTemplate.optional(),
        overquota: landingTemplate.optional(),
        quality: landingTemplate.optional(),
        termination: landingTemplate.optional(),
      })
      .strict()
      .default({}),
    receiverReservedConcurrency: z.int().min(0).max(1000).default(50),
    /** The table's stream and the attempt feed's consumer (README, "The attempt feed"); the health check reads it. */
    attemptFeed: z.boolean().default(false),
    /** `implied`: no verdict written on a non-complete that tells its agreement by itself (README, "Matched verdicts"). */
    matchedVerdicts: z.enum(['kept', 'implied']).default('kept'),
    /** The API under the supplier's own host name: the surveys' URLs then outlive a replaced API. */
    customDomain: z
      .object({
        name: z
          .string()
          .regex(
            /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/,
            'must be a lower-case host name such as surveys.panel.example',
          ),
        certificateArn: z
          .string()
          .regex(
            /^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate\/[A-Za-z0-9-]+$/,
            "must be an ACM certificate's ARN",
          ),
        /** The postback API's own host name (the certificate covers it too); unset, its execute-api host. */
        postbackName: z
          .string()
          .regex(
            /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/,
            'must be a lower-case host name such as postbacks.panel.example',
          )
          .optional(),
      })
      .strict()
      .optional(),
    alarmEmail: z.email().optional(),
    /** API Gateway's limit per hit route and per finance route (requests a second, and burst). */
    throttles: z.object({ hits: throttle.optional(), finance: throttle.optional() }).strict().default({}),
    /**
     * What a larger supplier raises (README, "Taking ten times the traffic"): the scheduled functions' memory (and
     * with it their CPU) and how many surveys they work on at once, each its function's variable; unset, the
     * defaults. Bounds as the functions check them at their start.
     */
    scale: z
      .object({
        reconcileMemoryMb: z.int().min(512).max(10_240).optional(),
        reconcileConcurrency: z.int().min(1).max(32).optional(),
        reconcileWindowListHours: z.int().min(1).max(24).optional(),
        healthMemoryMb: z.int().min(256).max(10_240).optional(),
        healthConcurrency: z.int().min(1).max(32).optional(),
        redirectSyncConcurrency: z.int().min(1).max(32).optional(),
        redirectReadbacksPerRun: z.int().min(0).max(10_000).optional(),
        redirectClosureLookupsPerRun: z.int().min(0).max(5_000).optional(),
        marketplaceConcurrency: z.int().min(1).max(64).optional(),
        marketplaceCallsPerSecond: z.int().min(1).max(1_000).optional(),
        marketplaceTimeoutMs: z.int().min(100).max(120_000).optional(),
        marketplaceBodyTimeoutMs: z.int().min(1_000).max(600_000).optional(),
        redirectSyncMemoryMb: z.int().min(256).max(10_240).optional(),
        financeMemoryMb: z.int().min(512).max(10_240).optional(),
        /** Drainer invocations at once, each taking batches of ten buffered hits (SQS's own bounds: 2 to 1,000). */
        drainConcurrency: z.int().min(2).max(1_000).optional(),
      })
      .strict()
      .default({}),
  })
  .strict();

export type EnvironmentSettings = z.infer<typeof environmentSchema>;

/** Thrown when the chosen environment's settings are missing or invalid; the message names each setting. */
export class SettingsError extends Error {
  override readonly name = 'SettingsError';
}

/**
 * The settings of environment `name` from the `environments` context, validated. A real environment (any but
 * `example`) must give account, region and marketplace.baseUrl.
 */
export function readEnvironmentSettings(environments: unknown, name: string): EnvironmentSettings {
  const known = environments && typeof environments === 'object' ? Object.keys(environments) : [];
  const raw = (environments as Record<string, unknown> | undefined)?.[name];
  if (raw === undefined)
    throw new SettingsError(
      `no environment "${name}" under "environments" in cdk.json (known: ${known.join(', ') || 'none'})`,
    );
  const parsed = environmentSchema.safeParse(raw);
  if (!parsed.success)
    throw new SettingsError(
      `environment "${name}": ${parsed.error.issues
        .map((issue) => `${issue.path.join('.') || '(root)'} ${issue.message}`)
        .join('; ')}`,
    );
  const settings = parsed.data;
  try {
    // Bounds and combinations as the health function will check them at its start, so a bad one fails here.
    healthEnvironmentOf(healthRuleSettings(settings));
  } catch (error) {
    throw new SettingsError(`environment "${name}": health: ${(error as Error).message}`);
  }
  try {
    // Read as the postback function reads it at its start: a bad range would fail every postback, not the synth.
    parseAllowList(settings.postbackSourceCidrs);
  } catch (error) {
    throw new SettingsError(`environment "${name}": postbackSourceCidrs: ${(error as Error).message}`);
  }
  // Lambda caps a function's environment at 4 KB, names and values together, and the stack's own variables (the
  // table, the key ring's secret, the buffer's URL, the runtime's settings) take about 1 KB: a list over the rest
  // passes the synth and fails the deploy.
  for (const [setting, text] of [
    ['postbackSourceCidrs', settings.postbackSourceCidrs ?? ''],
    ['landingUrls', Object.values(settings.landingUrls).join('')],
  ] as const)
    if (text.length > SETTING_ENVIRONMENT_BYTES)
      throw new SettingsError(
        `environment "${name}": ${setting}: ${text.length} characters, over the ${SETTING_ENVIRONMENT_BYTES} a function's environment has room for (Lambda caps it at 4 KB): use fewer, wider ranges or shorter URLs`,
      );
  if (name !== EXAMPLE_ENVIRONMENT) {
    const missing = [
      ...(settings.account ? [] : ['account']),
      ...(settings.region ? [] : ['region']),
      ...(settings.marketplace.baseUrl ? [] : ['marketplace.baseUrl']),
    ];
    if (missing.length > 0)
      throw new SettingsError(`environment "${name}" is missing required settings: ${missing.join(', ')}`);
    if (settings.customDomain?.postbackName === settings.customDomain?.name && settings.customDomain)
      throw new SettingsError(
        `environment "${name}": customDomain.postbackName must be a host name of its own, not customDomain.name (the postbacks' API is apart from the public one)`,
      );
    const certificateRegion = settings.customDomain?.certificateArn.split(':')[3];
    if (certificateRegion !== undefined && certificateRegion !== settings.region)
      throw new SettingsError(
        `environment "${name}": customDomain.certificateArn is in ${certificateRegion}; the API's certificate must be in the stack's region (${settings.region})`,
      );
    // An environment copied from another (the README's staging stack) keeps its stack name: deployed, it would update
    // that stack in place (its marketplace, its schedules and alarms), tables and secrets kept, so nothing says so.
    for (const [other, raw] of Object.entries(environments as Record<string, unknown>)) {
      if (other === name || other === EXAMPLE_ENVIRONMENT || !raw || typeof raw !== 'object') continue;
      const { stackName = 'SurveyReceiver', account, region } = raw as Record<string, unknown>;
      if (stackName === settings.stackName && account === settings.account && region === settings.region)
        throw new SettingsError(
          `environment "${name}" deploys to the same stack as "${other}" (${settings.stackName} in account ${settings.account}, ${settings.region}): give one of them a stackName of its own, or it would update the other's stack in place`,
        );
    }
    const placeholders = placeholderSettings(settings);
    if (placeholders.length > 0)
      throw new SettingsError(
        `environment "${name}" still holds placeholder values: ${placeholders.join(', ')}; ` +
          "put the deployment's own there",
      );
  }
  return settings;
}

/** The example account ids of AWS's documentation. */
const PLACEHOLDER_ACCOUNTS = new Set(['123456789012', '111122223333', '444455556666', '000000000000']);

/** Names reserved for examples and tests (RFC 2606, RFC 6761): nothing real answers there. */
function isPlaceholderHost(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return /(^|\.)example\.(com|net|org)$/.test(name) || /(^|\.)(example|invalid|test|localhost)$/.test(name);
}

function hostOf(url: string): string | undefined {
  try {
    return new URL(url).hostname;
  } catch {
    return undefined;
  }
}

/**
 * The settings of a real environment that still hold the template's placeholder values (an example account, a
 * host reserved for examples): a deploy with them would send respondents, the marketplace's calls or the alarms
 * where nothing answers, and the missing-settings check cannot see it, since each is set.
 */
function placeholderSettings(settings: EnvironmentSettings): string[] {
  const found: string[] = [];
  if (settings.account && PLACEHOLDER_ACCOUNTS.has(settings.account))
    found.push(`account (${settings.account})`);
  const urls: [string, string | undefined][] = [
    ['marketplace.baseUrl', settings.marketplace.baseUrl],
    ...Object.entries(settings.landingUrls).map(([outcome, url]): [string, string | undefined] => [
      `landingUrls.${outcome}`,
      url,
    ]),
  ];
  for (const [setting, url] of urls) {
    const host = url === undefined ? undefined : hostOf(url);
    if (host && isPlaceholderHost(host)) found.push(`${setting} (${host})`);
  }
  const apiHost = settings.customDomain?.name;
  if (apiHost && isPlaceholderHost(apiHost)) found.push(`customDomain.name (${apiHost})`);
  const mailHost = settings.alarmEmail?.split('@').pop();
  if (mailHost && isPlaceholderHost(mailHost)) found.push(`alarmEmail (${mailHost})`);
  return found;
}

/** The health rules' settings of an environment (its schedule aside). */
function healthRuleSettings(settings: EnvironmentSettings): Partial<HealthSettings> {
  const { scheduleMinutes: _, ...rules } = settings.health;
  return rules;
}

/** The stack's properties for an environment's settings. */
export function stackProps(settings: EnvironmentSettings): ReceiverStackProps & { stackName: string } {
  const landingUrls = Object.fromEntries(
    Object.entries(settings.landingUrls)
      .filter(([, template]) => template)
      .map(([outcome, template]) => [LANDING_VARIABLES[outcome as keyof typeof LANDING_VARIABLES], template]),
  );
  return {
    stackName: settings.stackName,
    landingUrls,
    marketplace: {
      apiVersion: settings.marketplace.apiVersion,
      ...(settings.marketplace.baseUrl ? { baseUrl: settings.marketplace.baseUrl } : {}),
      ...(settings.marketplace.tokenSecretName
        ? { tokenSecretName: settings.marketplace.tokenSecretName }
        : {}),
    },
    redirectSyncRate: Duration.minutes(settings.redirectSyncRateMinutes),
    redirectSyncEnabled: settings.redirectSyncEnabled,
    reconcileRate: Duration.minutes(settings.reconcileRateMinutes),
    reconcileWindowDays: settings.reconcileWindowDays,
    healthCheckRate: Duration.minutes(settings.health.scheduleMinutes),
    healthSettings: healthRuleSettings(settings),
    ...(settings.postbackSourceCidrs ? { postbackSourceCidrs: settings.postbackSourceCidrs } : {}),
    ...(settings.redirectsPerSenderMinute !== undefined
      ? { redirectsPerSenderMinute: settings.redirectsPerSenderMinute }
      : {}),
    postbackMethods: settings.postbackMethods,
    receiverReservedConcurrency: settings.receiverReservedConcurrency,
    attemptFeed: settings.attemptFeed,
    matchedVerdicts: settings.matchedVerdicts,
    ...(settings.alarmEmail ? { alarmEmail: settings.alarmEmail } : {}),
    throttles: settings.throttles,
    ...(settings.customDomain ? { customDomain: settings.customDomain } : {}),
    scale: settings.scale,
    ...(settings.account && settings.region
      ? { env: { account: settings.account, region: settings.region } }
      : {}),
  };
}
