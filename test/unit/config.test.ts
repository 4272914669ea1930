import { describe, expect, it } from 'vitest';
import { DEFAULT_HEALTH_SETTINGS } from '../../functions/health/health-rules';
import {
  CLOSURE_LOOKUPS_PER_RUN,
  closureLookupsPerRunFor,
  READ_BACK_RUNS_PER_DAY,
  REVERIFY_PER_RUN,
  readBacksPerRunFor,
} from '../../functions/marketplace/redirect-configuration';
import {
  readFinanceConfig,
  readHealthConfig,
  readReceiverConfig,
  readReconcileConfig,
  readRedirectSyncConfig,
} from '../../functions/runtime/runtime-config';

const receiver = { TABLE_NAME: 'ledger', SIGNING_KEYS: '{"current":"k1"}' };

describe('configuration', () => {
  it("reads the redirects' per-sender bound, no bound when unset or unreadable (the redirect function still starts)", () => {
    expect(readReceiverConfig(receiver).perSenderMinute).toBe(0);
    expect(readReceiverConfig({ ...receiver, REDIRECTS_PER_SENDER_MINUTE: '120' }).perSenderMinute).toBe(120);
    for (const bad of ['abc', '120.5', '-1'])
      expect(readReceiverConfig({ ...receiver, REDIRECTS_PER_SENDER_MINUTE: bad }).perSenderMinute, bad).toBe(
        0,
      );
  });

  it('applies defaults and treats an empty landing URL as unset', () => {
    expect(readReceiverConfig({ ...receiver, LANDING_URL_SUCCESS: '' })).toMatchObject({
      tableName: 'ledger',
      region: 'us-east-1',
      storeTimeoutMs: 1000,
      keyRing: { inline: receiver.SIGNING_KEYS },
      landing: {},
    });
    expect(readReconcileConfig({ TABLE_NAME: 'ledger', RECONCILE_WINDOW_DAYS: '' })).toMatchObject({
      windowDays: 7,
    });
    expect(readReconcileConfig({ TABLE_NAME: 'ledger', RECONCILE_SETTLE_SECONDS: '30' })).toMatchObject({
      windowDays: 7,
      concurrency: 4,
      continueSelf: true,
      settleMs: 30_000,
      lookbackDays: 7,
    });
    expect(readReconcileConfig({ TABLE_NAME: 'ledger' })).toMatchObject({
      freshDays: 1,
      settledRecheckMs: 24 * 3_600_000,
    });
    expect(
      readReconcileConfig({
        TABLE_NAME: 'ledger',
        RECONCILE_FRESH_DAYS: '7',
        RECONCILE_SETTLED_RECHECK_HOURS: '6',
      }),
    ).toMatchObject({ freshDays: 7, settledRecheckMs: 6 * 3_600_000 });
    expect(readReconcileConfig({ TABLE_NAME: 'ledger' }).windowListHours).toBe(1);
    expect(
      readReconcileConfig({ TABLE_NAME: 'ledger', RECONCILE_WINDOW_LIST_HOURS: '6' }).windowListHours,
    ).toBe(6);
    expect(() => readReconcileConfig({ TABLE_NAME: 'ledger', RECONCILE_WINDOW_LIST_HOURS: '25' })).toThrow(
      /RECONCILE_WINDOW_LIST_HOURS Too big/,
    );
    expect(() => readReconcileConfig({ TABLE_NAME: 'ledger', RECONCILE_FRESH_DAYS: '0' })).toThrow(
      /RECONCILE_FRESH_DAYS Too small/,
    );
    expect(readReconcileConfig({ TABLE_NAME: 'ledger' }).impliedMatches).toBe(false);
    expect(
      readReconcileConfig({ TABLE_NAME: 'ledger', RECONCILE_MATCHED_VERDICTS: 'implied' }).impliedMatches,
    ).toBe(true);
    expect(() => readReconcileConfig({ TABLE_NAME: 'ledger', RECONCILE_MATCHED_VERDICTS: 'some' })).toThrow(
      /RECONCILE_MATCHED_VERDICTS/,
    );
    expect(readReconcileConfig({ TABLE_NAME: 'ledger', RECONCILE_LOOKBACK_DAYS: '0' }).lookbackDays).toBe(0);
    expect(() => readReconcileConfig({ TABLE_NAME: 'ledger', RECONCILE_LOOKBACK_DAYS: '63' })).toThrow(
      /RECONCILE_LOOKBACK_DAYS Too big/,
    );
  });

  it.each([
    [{ SIGNING_KEYS: 'x' }, /TABLE_NAME Invalid input: expected string/],
    [{ ...receiver, TABLE_NAME: '' }, /TABLE_NAME is required/],
    [{ ...receiver, STORE_TIMEOUT_MS: 'soon' }, /STORE_TIMEOUT_MS Invalid input: expected number/],
    [{ ...receiver, STORE_TIMEOUT_MS: '12.5' }, /STORE_TIMEOUT_MS Invalid input: expected int/],
    [{ ...receiver, STORE_TIMEOUT_MS: '10' }, /STORE_TIMEOUT_MS Too small: expected number to be >=50/],
    [{ ...receiver, LANDING_URL_FAIL: 'ftp://x' }, /LANDING_URL_FAIL landing URL template/],
    [{ ...receiver, SIGNING_KEYS_FILE: 'ring.json' }, /set exactly one of SIGNING_KEYS_SECRET_ID/],
    [{ ...receiver, AWS_LAMBDA_FUNCTION_NAME: 'redirect' }, /SIGNING_KEYS must not be set in Lambda/],
  ])('names the variable and the problem: %o', (env, message) => {
    expect(() => readReceiverConfig(env)).toThrow(message);
  });

  it('requires a bearer token of some length locally and IAM in Lambda', () => {
    expect(() => readFinanceConfig({ TABLE_NAME: 't', FINANCE_AUTH: 'bearer' })).toThrow(
      /FINANCE_API_TOKEN is required when FINANCE_AUTH is bearer/,
    );
    expect(() =>
      readFinanceConfig({ TABLE_NAME: 't', FINANCE_AUTH: 'bearer', FINANCE_API_TOKEN: 'short' }),
    ).toThrow(/at least 16 characters/);
    expect(() =>
      readFinanceConfig({
        TABLE_NAME: 't',
        FINANCE_AUTH: 'bearer',
        FINANCE_API_TOKEN: 'x'.repeat(16),
        AWS_LAMBDA_FUNCTION_NAME: 'finance',
      }),
    ).toThrow(/FINANCE_AUTH must be iam in Lambda/);
    expect(readFinanceConfig({ TABLE_NAME: 't' }).auth).toEqual({ mode: 'iam' });
  });
});

describe('the sizes the sync gives itself where the settings leave them', () => {
  it("reads every verified live survey back within three quarters of the day's runs, at least 50 a run", () => {
    expect(readBacksPerRunFor(0)).toBe(REVERIFY_PER_RUN);
    expect(readBacksPerRunFor(3_600)).toBe(50);
    expect(readBacksPerRunFor(3_601)).toBe(51);
    expect(readBacksPerRunFor(10_000)).toBe(139);
    expect(readBacksPerRunFor(20_000) * READ_BACK_RUNS_PER_DAY).toBeGreaterThanOrEqual(20_000);
  });

  it('looks up one in a hundred open active surveys a run, at least 50', () => {
    expect(closureLookupsPerRunFor(0)).toBe(CLOSURE_LOOKUPS_PER_RUN);
    expect(closureLookupsPerRunFor(5_000)).toBe(50);
    expect(closureLookupsPerRunFor(20_000)).toBe(200);
  });
});

describe('the redirect sync configuration', () => {
  const sync = {
    TABLE_NAME: 'ledger',
    SIGNING_KEYS: '{"current":"k1"}',
    PUBLIC_BASE_URL: 'https://hits.example',
  };
  it('leaves the read-backs a run to the sync unless set (unset or empty), any other number, or none', () => {
    expect(readRedirectSyncConfig(sync).readBacksPerRun).toBeUndefined();
    expect(
      readRedirectSyncConfig({ ...sync, REDIRECT_READBACKS_PER_RUN: ' ' }).readBacksPerRun,
    ).toBeUndefined();
    expect(readRedirectSyncConfig({ ...sync, REDIRECT_READBACKS_PER_RUN: '120' }).readBacksPerRun).toBe(120);
    expect(readRedirectSyncConfig({ ...sync, REDIRECT_READBACKS_PER_RUN: '0' }).readBacksPerRun).toBe(0);
    expect(() => readRedirectSyncConfig({ ...sync, REDIRECT_READBACKS_PER_RUN: '-1' })).toThrow(
      /REDIRECT_READBACKS_PER_RUN/,
    );
  });

  it("points the postbacks at POSTBACK_BASE_URL when set (the stack's postback API), else at PUBLIC_BASE_URL", () => {
    expect(readRedirectSyncConfig(sync).postbackBaseUrl).toBe('https://hits.example');
    expect(
      readRedirectSyncConfig({ ...sync, POSTBACK_BASE_URL: 'https://pb.example/' }).postbackBaseUrl,
    ).toBe('https://pb.example/');
    expect(() => readRedirectSyncConfig({ ...sync, POSTBACK_BASE_URL: 'pb.example' })).toThrow(
      /POSTBACK_BASE_URL/,
    );
  });

  it('leaves the closure lookups a run to the sync unless set, or as many as a supplier closing more sets', () => {
    expect(readRedirectSyncConfig(sync).closureLookupsPerRun).toBeUndefined();
    const many = { ...sync, REDIRECT_CLOSURE_LOOKUPS_PER_RUN: '400' };
    expect(readRedirectSyncConfig(many).closureLookupsPerRun).toBe(400);
    expect(() => readRedirectSyncConfig({ ...sync, REDIRECT_CLOSURE_LOOKUPS_PER_RUN: '9999' })).toThrow(
      /REDIRECT_CLOSURE_LOOKUPS_PER_RUN/,
    );
  });
});

describe('the survey health check configuration', () => {
  it('defaults every threshold and sends notices locally without a topic', () => {
    expect(readHealthConfig({ TABLE_NAME: 'ledger' })).toMatchObject({
      settings: DEFAULT_HEALTH_SETTINGS,
      concurrency: 4,
      notices: { mode: 'local', timeoutMs: 5000 },
    });
    expect(
      readHealthConfig({
        TABLE_NAME: 'ledger',
        HEALTH_WINDOW_MINUTES: '5',
        ALARM_TOPIC_ARN: 'arn:aws:sns:eu-west-1:123456789012:alarms',
      }),
    ).toMatchObject({
      settings: { ...DEFAULT_HEALTH_SETTINGS, windowMinutes: 5 },
      notices: { mode: 'sns', topicArn: 'arn:aws:sns:eu-west-1:123456789012:alarms' },
    });
  });

  it.each([
    [{ HEALTH_STOPPED_MINUTES: '10' }, /HEALTH_STOPPED_MINUTES must be longer than HEALTH_GRACE_MINUTES/],
    [{ HEALTH_COVERAGE_FAIL_PERCENT: '95' }, /HEALTH_COVERAGE_FAIL_PERCENT must not be above/],
    [{ HEALTH_WINDOW_MINUTES: '0' }, /HEALTH_WINDOW_MINUTES Too small/],
    [{ ALARM_TOPIC_ARN: 'alarms' }, /ALARM_TOPIC_ARN must be an SNS topic ARN/],
    [{ AWS_LAMBDA_FUNCTION_NAME: 'health' }, /ALARM_TOPIC_ARN is required in Lambda/],
    [{ HEALTH_WEBHOOK_URL: 'not a url' }, /HEALTH_WEBHOOK_URL/],
  ])('refuses %j', (env, message) => {
    expect(() => readHealthConfig({ TABLE_NAME: 'ledger', ...env })).toThrow(message);
  });
});
