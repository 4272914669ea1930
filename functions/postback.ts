/**
 * Postbacks: the marketplace's server reporting an attempt's success or fail, over GET or POST. The Lambda entry:
 * wires the handler (receiving/postback-handler.ts) to the ledger, key ring, buffer and allow-list the
 * configuration names, once per container.
 */
import { createPostbackHandler } from './receiving/postback-handler';
import { receiverContext } from './runtime/aws-clients';

export const handler = createPostbackHandler(receiverContext());
