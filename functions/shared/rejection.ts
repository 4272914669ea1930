/**
 * A request refused for what it is, not for anything that went wrong here. Carries the HTTP status and a
 * message that names the problem; the message never echoes a secret.
 */
import type { SignatureCheck } from '../receiving/signing';

/** The codes a refusal answers with (`error` in the JSON body): a short, fixed set. */
export type RejectionCode =
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'payload_too_large'
  | 'unsupported_media_type';

export class Rejection extends Error {
  override readonly name = 'Rejection';
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 405 | 413 | 415,
    readonly code: RejectionCode,
    message: string,
  ) {
    super(message);
  }
}

export const badRequest = (message: string) => new Rejection(400, 'bad_request', message);

const SIGNATURE_REFUSALS = {
  missing: 'signature_missing',
  malformed: 'signature_malformed',
  'unknown-key': 'signature_unknown_key',
  'retired-key': 'signature_retired_key',
  mismatch: 'signature_mismatch',
} as const satisfies Record<Extract<SignatureCheck, { valid: false }>['reason'], string>;

/**
 * Why a hit was refused, as a short stable code: a Rejection's code, or what was wrong with its signature. Refused
 * redirect hits are counted per source, code and minute, so the set must stay small and fixed.
 */
export type RefusalCode =
  | RejectionCode
  | (typeof SIGNATURE_REFUSALS)[keyof typeof SIGNATURE_REFUSALS]
  | SignedRefusalCode;

/**
 * A postback whose signature holds, refused all the same: from an address outside the allow-list
 * (`signed_forbidden`), or for what it carries (`signed_input`: a placeholder left unsubstituted, a body that does not
 * read). Only the holder of a genuine URL can send one: the marketplace's postbacks are being lost.
 */
export type SignedRefusalCode = 'signed_forbidden' | 'signed_input';

/** The refusal code of a signature that did not check out. */
export const signatureRefusal = (
  problem: keyof typeof SIGNATURE_REFUSALS,
): (typeof SIGNATURE_REFUSALS)[keyof typeof SIGNATURE_REFUSALS] => SIGNATURE_REFUSALS[problem];
