/**
 * The CDK app: one stack, checked by cdk-nag's AwsSolutions rules on every synth.
 * Settings are read from the environment at synth time: landing URL templates (LANDING_URL_SUCCESS ...), the
 * marketplace (MARKETPLACE_BASE_URL, MARKETPLACE_API_VERSION, MARKETPLACE_TOKEN_SECRET_NAME), the redirect sync
 * rate (REDIRECT_SYNC_RATE_MINUTES) and the postback methods (POSTBACK_METHOD_SUCCESS, POSTBACK_METHOD_FAIL).
 */
import { App, Duration, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { LANDING_VARIABLES } from '../functions/lambda/config';
import { ReceiverStack } from './receiver-stack';

const app = new App();
const landingUrls = Object.fromEntries(
  Object.values(LANDING_VARIABLES)
    .map((name) => [name, process.env[name]] as const)
    .filter(([, value]) => value),
);
const method = (value: string | undefined) => (value?.toUpperCase() === 'POST' ? 'POST' : 'GET');
new ReceiverStack(app, process.env.STACK_NAME ?? 'SurveyReceiver', {
  landingUrls,
  marketplace: {
    ...(process.env.MARKETPLACE_BASE_URL ? { baseUrl: process.env.MARKETPLACE_BASE_URL } : {}),
    apiVersion: process.env.MARKETPLACE_API_VERSION === 'v2' ? 'v2' : 'v1',
    ...(process.env.MARKETPLACE_TOKEN_SECRET_NAME
      ? { tokenSecretName: process.env.MARKETPLACE_TOKEN_SECRET_NAME }
      : {}),
  },
  ...(process.env.REDIRECT_SYNC_RATE_MINUTES
    ? { redirectSyncRate: Duration.minutes(Number(process.env.REDIRECT_SYNC_RATE_MINUTES)) }
    : {}),
  ...(process.env.RECONCILE_RATE_MINUTES
    ? { reconcileRate: Duration.minutes(Number(process.env.RECONCILE_RATE_MINUTES)) }
    : {}),
  ...(process.env.RECONCILE_WINDOW_DAYS
    ? { reconcileWindowDays: Number(process.env.RECONCILE_WINDOW_DAYS) }
    : {}),
  ...(process.env.RECEIVER_RESERVED_CONCURRENCY
    ? { receiverReservedConcurrency: Number(process.env.RECEIVER_RESERVED_CONCURRENCY) }
    : {}),
  ...(process.env.POSTBACK_SOURCE_CIDRS ? { postbackSourceCidrs: process.env.POSTBACK_SOURCE_CIDRS } : {}),
  postbackMethods: {
    success: method(process.env.POSTBACK_METHOD_SUCCESS),
    fail: method(process.env.POSTBACK_METHOD_FAIL),
  },
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
