/**
 * Deployment settings: one checked-in environment per deployment, validated at synth, so a redeploy from any
 * shell deploys the same stack, and a real environment missing a required setting fails synth naming it.
 */

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEALTH_SETTINGS } from '../../functions/health/health-rules';
import { healthEnvironmentOf, readHealthSettings } from '../../functions/runtime/runtime-config';
import { ReceiverStack } from '../../infra/receiver-stack';
import { readEnvironmentSettings, SettingsError, stackProps } from '../../infra/settings';

const run = promisify(execFile);
const environments = JSON.parse(readFileSync('cdk.json', 'utf8')).context.environments as Record<
  string,
  Record<string, unknown>
>;
/** What a supplier puts in place of the template's placeholders. */
const placeholdersFilled = {
  account: '210987654321',
  alarmEmail: 'oncall@panel.acme-research.net',
  marketplace: { baseUrl: 'https://supply.samplemarket.net', apiVersion: 'v1' },
  landingUrls: { success: 'https://panel.acme-research.net/thanks?pid={pid}' },
};

/** The checked-in `production` template, filled in as a supplier would before the first deploy. */
const production: Record<string, unknown> = { ...environments.production, ...placeholdersFilled };

describe('readEnvironmentSettings', () => {
  it('reads the example environment, and the production template once filled in', () => {
    expect(() => readEnvironmentSettings(environments, 'example')).not.toThrow();
    expect(() => readEnvironmentSettings({ production }, 'production')).not.toThrow();
  });

  it("the example environment (a plain `cdk deploy`) reserves no concurrency, so a new account's limit of 10 takes it", () => {
    expect(stackProps(readEnvironmentSettings(environments, 'example')).receiverReservedConcurrency).toBe(0);
  });

  it('the checked-in production template fails until its placeholders are replaced, naming each', () => {
    expect(() => readEnvironmentSettings(environments, 'production')).toThrow(
      'environment "production" still holds placeholder values: account (123456789012), marketplace.baseUrl ' +
        '(marketplace.example.com), landingUrls.success (panel.example.com), alarmEmail (panel.example.com)',
    );
  });

  it.each([
    ['an account of the documentation', { account: '111122223333' }, 'account (111122223333)'],
    [
      'a .test marketplace',
      { marketplace: { baseUrl: 'https://api.marketplace.test' } },
      'marketplace.baseUrl',
    ],
    [
      'an example.org landing page',
      { landingUrls: { fail: 'https://www.EXAMPLE.org/x?p={pid}' } },
      'landingUrls.fail',
    ],
    ['an .invalid alarm address', { alarmEmail: 'ops@alerts.invalid' }, 'alarmEmail (alerts.invalid)'],
  ])('a real environment with %s fails, naming it', (_, change, named) => {
    expect(() => readEnvironmentSettings({ prod: { ...production, ...change } }, 'prod')).toThrow(
      new RegExp(`still holds placeholder values: ${named.replace(/[().]/g, '\\$&')}`),
    );
  });

  it("takes a custom domain whose certificate is in the stack's region, and names what is wrong with another", () => {
    const certificateArn = (region: string) =>
      `arn:aws:acm:${region}:210987654321:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789`;
    const withDomain = (customDomain: unknown) =>
      readEnvironmentSettings({ prod: { ...production, customDomain } }, 'prod');
    const domain = { name: 'surveys.acme-research.net', certificateArn: certificateArn('us-east-1') };
    expect(stackProps(withDomain(domain)).customDomain).toEqual(domain);
    expect(() => withDomain({ ...domain, certificateArn: certificateArn('eu-west-1') })).toThrow(
      "customDomain.certificateArn is in eu-west-1; the API's certificate must be in the stack's region (us-east-1)",
    );
    expect(() =>
      withDomain({ ...domain, certificateArn: 'arn:aws:iam::210987654321:server-certificate/x' }),
    ).toThrow(/customDomain\.certificateArn must be an ACM certificate's ARN/);
    expect(() => withDomain({ ...domain, name: 'https://surveys.acme-research.net/' })).toThrow(
      /customDomain\.name must be a lower-case host name/,
    );
    expect(() => withDomain({ ...domain, name: 'surveys.panel.example' })).toThrow(
      'still holds placeholder values: customDomain.name (surveys.panel.example)',
    );
    const postbacks = { ...domain, postbackName: 'pb.acme-research.net' };
    expect(stackProps(withDomain(postbacks)).customDomain).toEqual(postbacks);
    expect(() => withDomain({ ...domain, postbackName: domain.name })).toThrow(
      'customDomain.postbackName must be a host name of its own',
    );
    expect(() => withDomain({ ...domain, postbackName: 'PB.acme' })).toThrow(
      /customDomain\.postbackName must be a lower-case host name/,
    );
  });

  it('a host that merely contains "example" is not a placeholder', () => {
    const settings = { ...production, marketplace: { baseUrl: 'https://api.examplemarket.com' } };
    expect(() => readEnvironmentSettings({ prod: settings }, 'prod')).not.toThrow();
  });

  it('fills defaults and turns them into stack properties', () => {
    const props = stackProps(readEnvironmentSettings({ production }, 'production'));
    expect(props.env).toEqual({ account: '210987654321', region: 'us-east-1' });
    expect(props.marketplace?.baseUrl).toBe('https://supply.samplemarket.net');
    expect(props.reconcileRate?.toMinutes()).toBe(60);
    expect(props.landingUrls).toEqual({
      LANDING_URL_SUCCESS: 'https://panel.acme-research.net/thanks?pid={pid}',
    });
    expect(props.receiverReservedConcurrency).toBe(50);
    expect(props.redirectSyncEnabled).toBe(true);
    const second = { ...production, redirectSyncEnabled: false };
    expect(stackProps(readEnvironmentSettings({ second }, 'second')).redirectSyncEnabled).toBe(false);
  });

  it('refuses an environment copied from another without a stack name of its own: it would update that stack in place', () => {
    const staging = {
      ...production,
      redirectSyncEnabled: false,
      marketplace: { ...(production.marketplace as object), baseUrl: 'https://sandbox.samplemarket.net' },
    };
    expect(() => readEnvironmentSettings({ production, staging }, 'staging')).toThrow(
      'environment "staging" deploys to the same stack as "production" (SurveyReceiver in account 210987654321, us-east-1)',
    );
    expect(() => readEnvironmentSettings({ production, staging }, 'production')).toThrow(SettingsError);
    // Named apart, or in another region or account: its own stack.
    for (const own of [
      { stackName: 'SurveyReceiverStaging' },
      { region: 'eu-west-1' },
      { account: '210987654322' },
    ])
      expect(() =>
        readEnvironmentSettings({ production, staging: { ...staging, ...own } }, 'staging'),
      ).not.toThrow();
  });

  it.each([
    ['account', { account: undefined }],
    ['region', { region: undefined }],
    ['marketplace.baseUrl', { marketplace: { apiVersion: 'v1' } }],
  ])('a real environment without %s fails, naming it', (setting, change) => {
    const broken = { prod: { ...production, ...change } };
    expect(() => readEnvironmentSettings(broken, 'prod')).toThrow(SettingsError);
    expect(() => readEnvironmentSettings(broken, 'prod')).toThrow(`missing required settings: ${setting}`);
  });

  it('an invalid or unknown setting fails, naming it', () => {
    expect(() =>
      readEnvironmentSettings({ prod: { ...production, reconcileWindowDays: 0 } }, 'prod'),
    ).toThrow(/reconcileWindowDays/);
    expect(() =>
      readEnvironmentSettings({ prod: { ...production, postbackMethods: { success: 'PUT' } } }, 'prod'),
    ).toThrow(/postbackMethods\.success/);
    expect(() => readEnvironmentSettings({ prod: { ...production, schedule: 'x' } }, 'prod')).toThrow(
      /schedule/,
    );
    expect(() =>
      readEnvironmentSettings(
        { prod: { ...production, landingUrls: { success: 'ftp://x/{nope}' } } },
        'prod',
      ),
    ).toThrow(/landingUrls\.success/);
  });

  it.each([
    [
      'a plain-http marketplace',
      { marketplace: { baseUrl: 'http://marketplace.example.com' } },
      /baseUrl must be an https/,
    ],
    [
      'a base URL with the API prefix',
      { marketplace: { baseUrl: 'https://m.example.com/api/v1' } },
      /without \/api\/v1/,
    ],
    [
      'a token secret given by ARN',
      {
        marketplace: {
          baseUrl: 'https://m.example.com',
          tokenSecretName: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:token-AbCdEf',
        },
      },
      /tokenSecretName is the secret's name, not its ARN/,
    ],
    [
      'an address range that does not read',
      { postbackSourceCidrs: '10.0.0.0/8, not-a-cidr' },
      /postbackSourceCidrs: .*"not-a-cidr"/,
    ],
    [
      'a sync schedule closer than its run may last',
      { redirectSyncRateMinutes: 1 },
      /redirectSyncRateMinutes/,
    ],
    ['a stack name too long for its functions', { stackName: `S${'x'.repeat(54)}` }, /stackName must be/],
    [
      // 230 ranges of a cloud's published egress: about 3,700 characters, past Lambda's 4 KB environment with the
      // postback function's own variables (a deploy that fails at the function, not the synth).
      'an address list longer than a function environment has room for',
      {
        postbackSourceCidrs: Array.from({ length: 230 }, (_, i) => `10.${i}.128.0/26`).join(', '),
      },
      /postbackSourceCidrs: \d+ characters, over the 3000 .* 4 KB/,
    ],
    [
      'landing pages whose URLs together are longer than that',
      { landingUrls: { success: `https://thanks.example.com/${'x'.repeat(3_000)}` } },
      /landingUrls: \d+ characters/,
    ],
  ])('%s fails synth, naming it', (_, change, message) => {
    expect(() => readEnvironmentSettings({ prod: { ...production, ...change } }, 'prod')).toThrow(message);
  });

  it('the example environment deploys under a stack name of its own, never over a real one', () => {
    const real = Object.keys(environments).filter((name) => name !== 'example');
    const example = readEnvironmentSettings(environments, 'example').stackName;
    for (const name of real)
      expect(
        readEnvironmentSettings(
          { [name]: { ...production, ...environments[name], ...placeholdersFilled } },
          name,
        ).stackName,
      ).not.toBe(example);
  });

  it('an environment that is not there fails, listing those that are', () => {
    expect(() => readEnvironmentSettings(environments, 'staging')).toThrow(
      'no environment "staging" under "environments" in cdk.json (known: example, production)',
    );
  });
});

describe('cdk synth', () => {
  it('fails for an environment missing a required setting, naming it, whatever the shell holds', async () => {
    const broken = JSON.stringify({ prod: { ...production, marketplace: { apiVersion: 'v1' } } });
    const failure = await run('node_modules/.bin/tsx', ['infra/app.ts'], {
      env: {
        ...process.env,
        MARKETPLACE_BASE_URL: 'https://ignored.example.com',
        CDK_CONTEXT_JSON: JSON.stringify({ env: 'prod', environments: JSON.parse(broken) }),
        CDK_OUTDIR: '/tmp/cdk-settings-test',
      },
    }).then(
      () => undefined,
      (error: { stderr: string; code: number }) => error,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stderr).toContain('environment "prod" is missing required settings: marketplace.baseUrl');
  }, 60_000);
});

describe('throttles', () => {
  it('are read from settings and passed to the stack; a burst below the rate is refused, naming it', () => {
    const props = stackProps(
      readEnvironmentSettings(
        { prod: { ...production, throttles: { hits: { rate: 5000, burst: 10_000 } } } },
        'prod',
      ),
    );
    expect(props.throttles).toEqual({ hits: { rate: 5000, burst: 10_000 } });
    expect(() =>
      readEnvironmentSettings(
        { prod: { ...production, throttles: { hits: { rate: 50, burst: 10 } } } },
        'prod',
      ),
    ).toThrow(/throttles\.hits.*burst must be at least rate/);
  });
});

describe('scale settings', () => {
  it("the README's example for ten times the traffic is accepted as it stands", () => {
    const readme = readFileSync('README.md', 'utf8');
    const section = readme.slice(readme.indexOf('### Taking ten times the traffic'));
    const block = /```json\n([\s\S]*?)```/.exec(section)?.[1];
    expect(block).toBeDefined();
    const example = JSON.parse(`{${block}}`) as Record<string, unknown>;
    const props = stackProps(readEnvironmentSettings({ prod: { ...production, ...example } }, 'prod'));
    expect(props.scale).toMatchObject({ reconcileMemoryMb: 4096, financeMemoryMb: 1769 });
    expect(props.receiverReservedConcurrency).toBe(200);
  });

  it("reach the scheduled functions as their memory and the variables they read; unset ones keep the functions' defaults", () => {
    const scale = {
      reconcileMemoryMb: 2048,
      reconcileConcurrency: 8,
      reconcileWindowListHours: 6,
      healthMemoryMb: 1024,
      healthConcurrency: 12,
      redirectSyncConcurrency: 6,
      redirectReadbacksPerRun: 400,
      redirectClosureLookupsPerRun: 200,
      marketplaceConcurrency: 10,
      marketplaceCallsPerSecond: 5,
      marketplaceTimeoutMs: 30_000,
      marketplaceBodyTimeoutMs: 300_000,
      redirectSyncMemoryMb: 1024,
      financeMemoryMb: 1769,
    };
    const synthesized = (settings: Record<string, unknown>) => {
      const props = stackProps(readEnvironmentSettings({ prod: { ...production, ...settings } }, 'prod'));
      const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
      const functions = Template.fromStack(new ReceiverStack(app, 'Scaled', props)).findResources(
        'AWS::Lambda::Function',
      );
      const named = (id: string) =>
        Object.entries(functions).find(([logicalId]) => logicalId.startsWith(id))?.[1].Properties as {
          MemorySize: number;
          Environment: { Variables: Record<string, unknown> };
        };
      return {
        reconcile: named('reconcile'),
        health: named('health'),
        sync: named('redirectsync'),
        finance: named('finance'),
      };
    };
    const { reconcile, health, sync, finance } = synthesized({ scale });
    expect(reconcile.MemorySize).toBe(2048);
    expect(reconcile.Environment.Variables).toMatchObject({
      RECONCILE_CONCURRENCY: '8',
      RECONCILE_WINDOW_LIST_HOURS: '6',
      MARKETPLACE_CONCURRENCY: '10',
      MARKETPLACE_CALLS_PER_SECOND: '5',
      MARKETPLACE_TIMEOUT_MS: '30000',
      MARKETPLACE_BODY_TIMEOUT_MS: '300000',
    });
    expect(health.MemorySize).toBe(1024);
    // The health check may run as long as the gap between its runs allows (5 minutes: 4.5).
    expect((health as unknown as { Timeout: number }).Timeout).toBe(270);
    expect(health.Environment.Variables).toMatchObject({ HEALTH_CONCURRENCY: '12' });
    expect(sync.Environment.Variables).toMatchObject({
      REDIRECT_SYNC_CONCURRENCY: '6',
      REDIRECT_READBACKS_PER_RUN: '400',
      REDIRECT_CLOSURE_LOOKUPS_PER_RUN: '200',
      MARKETPLACE_CONCURRENCY: '10',
      MARKETPLACE_CALLS_PER_SECOND: '5',
      MARKETPLACE_TIMEOUT_MS: '30000',
      MARKETPLACE_BODY_TIMEOUT_MS: '300000',
    });
    expect(sync.MemorySize).toBe(1024);
    expect(finance.MemorySize).toBe(1769);
    const defaults = synthesized({});
    expect(defaults.reconcile.MemorySize).toBe(512);
    expect(defaults.sync.MemorySize).toBe(256);
    expect(defaults.finance.MemorySize).toBe(512);
    expect(defaults.reconcile.Environment.Variables).not.toHaveProperty('RECONCILE_CONCURRENCY');
    expect(() =>
      readEnvironmentSettings({ prod: { ...production, scale: { reconcileConcurrency: 0 } } }, 'prod'),
    ).toThrow(/scale\.reconcileConcurrency/);
  }, 60_000); // Three stacks synthesized with their bundles: about 16 s alone, more beside other suites.
});

describe('health settings', () => {
  it('are passed to the health function as the variables it reads; a bad value or combination fails synth, naming it', () => {
    const health = { windowMinutes: 20, stoppedMinutes: 45, coverageFailPercent: 40, driftFailures: 3 };
    const props = stackProps(readEnvironmentSettings({ prod: { ...production, health } }, 'prod'));
    expect(props.healthSettings).toEqual(health);
    const env = healthEnvironmentOf(props.healthSettings ?? {});
    expect(env).toEqual({
      HEALTH_WINDOW_MINUTES: '20',
      HEALTH_STOPPED_MINUTES: '45',
      HEALTH_COVERAGE_FAIL_PERCENT: '40',
      HEALTH_DRIFT_FAILURES: '3',
    });
    expect(readHealthSettings(env)).toEqual({ ...DEFAULT_HEALTH_SETTINGS, ...health });
    const refused = (change: Record<string, number>) => () =>
      readEnvironmentSettings({ prod: { ...production, health: change } }, 'prod');
    expect(refused({ graceMinutes: 30, stoppedMinutes: 20 })).toThrow(
      /environment "prod": health: .*HEALTH_STOPPED_MINUTES must be longer than HEALTH_GRACE_MINUTES/,
    );
    expect(refused({ coverageWarnPercent: 101 })).toThrow(/HEALTH_COVERAGE_WARN_PERCENT/);
    expect(refused({ uncoveredMin: 0 })).toThrow(SettingsError);
  });
});

describe('feature flags', () => {
  it('cdk.json sets every flag `cdk init` writes for the installed aws-cdk-lib, at its recommended value', () => {
    // An upgrade of aws-cdk-lib that recommends new flags fails here until they are reviewed and adopted.
    const recommended = JSON.parse(
      readFileSync('node_modules/aws-cdk-lib/recommended-feature-flags.json', 'utf8'),
    ) as Record<string, unknown>;
    const { environments: _, ...context } = JSON.parse(readFileSync('cdk.json', 'utf8')).context as Record<
      string,
      unknown
    >;
    expect(context).toEqual(recommended);
  });
});
