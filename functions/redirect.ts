/**
 * Redirect hits: a respondent's browser arriving at the end of a survey. The Lambda entry: wires the handler
 * (receiving/redirect-handler.ts) to the ledger, key ring, buffer and landing pages the configuration names, once
 * per container.
 */
import { createRedirectHandler } from './receiving/redirect-handler';
import { receiverContext } from './runtime/aws-clients';

const { config, ...dependencies } = receiverContext();

export const handler = createRedirectHandler({
  ...dependencies,
  landing: config.landing,
  perSenderMinute: config.perSenderMinute,
});
