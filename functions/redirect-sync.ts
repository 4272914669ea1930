/**
 * Scheduled redirect sync: every new or changed live survey gets this receiver's redirects and postbacks, and
 * surveys that failed before are retried. Stops taking up surveys 30 s before the Lambda's deadline; the next
 * run continues from the checkpoint.
 */
import { createDayIndexBackfill, createSurveyRegistry } from './ledger/ledger-store';
import { publicHostCheck } from './marketplace/public-host';
import { redirectConfiguration } from './marketplace/redirect-configuration';
import { createRedirectSyncHandler } from './marketplace/redirect-sync-handler';
import { openLedger } from './runtime/aws-clients';
import { keyRingSource } from './runtime/key-ring-source';
import { marketplaceFromEnvironment } from './runtime/marketplace-access';
import { runDeadline } from './runtime/run-deadline';
import { readRedirectSyncConfig } from './runtime/runtime-config';

const config = readRedirectSyncConfig();
const calls = runDeadline();
const keyRing = keyRingSource(config.keyRing);
const { registry, dayIndex } = openLedger(config, {
  registry: createSurveyRegistry,
  dayIndex: createDayIndexBackfill,
});

export const handler = createRedirectSyncHandler({
  dayIndex,
  calls,
  publicHost: publicHostCheck(config.publicBaseUrl, undefined, config.postbackBaseUrl),
  configuration: redirectConfiguration({
    marketplace: marketplaceFromEnvironment(process.env, calls),
    registry,
    // Read afresh each run: a ring cached from before a rotation would put surveys back on the retiring key.
    keyRing: () => keyRing({ fresh: true }),
    publicBaseUrl: config.publicBaseUrl,
    postbackBaseUrl: config.postbackBaseUrl,
    methods: config.methods,
    concurrency: config.concurrency,
    readBacksPerRun: config.readBacksPerRun,
    closureLookupsPerRun: config.closureLookupsPerRun,
    ...(config.initialSince ? { initialSince: config.initialSince } : {}),
  }),
});
