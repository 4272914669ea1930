/**
 * The CDK app: one stack, checked by cdk-nag's AwsSolutions rules on every synth. Its settings come from the
 * checked-in environment chosen with `-c env=<name>` (infra/settings.ts), `example` when none is named.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ReceiverStack } from './receiver-stack';
import { EXAMPLE_ENVIRONMENT, readEnvironmentSettings, SettingsError, stackProps } from './settings';

const app = new App();
const name = String(app.node.tryGetContext('env') ?? EXAMPLE_ENVIRONMENT);
try {
  const props = stackProps(readEnvironmentSettings(app.node.tryGetContext('environments'), name));
  new ReceiverStack(app, props.stackName, props);
} catch (error) {
  if (!(error instanceof SettingsError)) throw error;
  console.error(`cdk.json: ${error.message}`);
  process.exit(1);
}
Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
