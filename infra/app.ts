/**
 * The CDK app: one stack, checked by cdk-nag's AwsSolutions rules on every synth.
 * Landing URL templates are read from the environment at synth time (LANDING_URL_SUCCESS ...).
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { LANDING_VARIABLES } from '../functions/lambda/config';
import { ReceiverStack } from './receiver-stack';

const app = new App();
const landingUrls = Object.fromEntries(
  Object.values(LANDING_VARIABLES)
    .map((name) => [name, process.env[name]] as const)
    .filter(([, value]) => value),
);
new ReceiverStack(app, process.env.STACK_NAME ?? 'SurveyReceiver', {
  landingUrls,
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
