/**
 * Postbacks: the marketplace's server reporting an attempt's success or fail, over GET or POST.
 * Answers 200 only once the outcome is durably in the ledger; 403 for a bad signature, stored nowhere.
 */
import { readClaim, readIdentity } from './core/hit-request';
import { Rejection } from './core/rejection';
import { createDocumentClient, createLedgerStore } from './core/store';
import { readReceiverConfig } from './lambda/config';
import { hitRequestFrom, json, jsonRoute } from './lambda/http';
import { checkSignature, keyRingSource } from './lambda/key-ring-source';
import { count, logger } from './lambda/observability';

const config = readReceiverConfig();
const store = createLedgerStore(
  createDocumentClient({
    region: config.region,
    endpoint: config.dynamoEndpoint,
    requestTimeoutMs: config.storeTimeoutMs,
  }),
  config.tableName,
);
const keyRing = keyRingSource(config.keyRing);

export const handler = jsonRoute(async (event) => {
  const request = hitRequestFrom(event);
  const sourceIp = event.requestContext.http.sourceIp;
  try {
    const { claim, query } = readClaim('postback', request);
    const check = await checkSignature(keyRing, claim, new Date());
    if (!check.valid) {
      logger.warn('postback refused: signature', {
        reason: check.reason,
        ...claim.target,
        kid: claim.kid,
        sourceIp,
      });
      count('RejectedPostback', { reason: 'signature' });
      throw new Rejection(
        403,
        'forbidden',
        check.reason === 'missing' ? 'signature is missing' : 'signature is not valid',
      );
    }
    const identity = readIdentity(request, query);
    const { attempt, effect } = await store.recordHit({ ...claim.target, ...identity }, new Date());
    if (effect === 'conflict') {
      logger.warn('postback conflicts with the standing outcome', {
        ...claim.target,
        pid: identity.pid,
        token: identity.token,
        standing: attempt.postback?.outcome,
      });
      count('ConflictingHit', { channel: 'postback' });
    } else {
      logger.debug('postback recorded', {
        ...claim.target,
        pid: identity.pid,
        token: identity.token,
        effect,
      });
    }
    return json(200, { ok: true, effect, outcome: attempt.postback?.outcome });
  } catch (error) {
    if (error instanceof Rejection && error.status !== 403) {
      logger.warn('postback refused: input', { status: error.status, message: error.message, sourceIp });
      count('RejectedPostback', { reason: 'input' });
    }
    throw error;
  }
});
