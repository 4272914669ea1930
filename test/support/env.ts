import { scratchDirectory } from './scratch';

// Quiet, deterministic defaults for every test file; a test that needs other values sets them itself.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
process.env.AWS_REGION ??= 'us-east-1';
// Local stacks started by tests bind free ports; each test file picks its other ports itself.
process.env.SQS_PORT ??= '0';
// A CDK App given no outdir synthesizes into a new temporary directory of its own: this file's go into the run's.
process.env.CDK_OUTDIR ??= scratchDirectory('cdk-');
