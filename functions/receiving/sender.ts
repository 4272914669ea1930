/**
 * Who sent a redirect, as far as the health check needs to know: a short keyed fingerprint of the address API
 * Gateway saw (never `X-Forwarded-For`), kept on the attempt instead of the address itself. Success redirects are
 * claims anyone holding the static success URL can send; counted per sender, a burst of them from one address is a
 * few claims, not a survey whose postbacks stopped.
 *
 * Keyed with the current signing key: an unkeyed hash of an IPv4 address is reversed by hashing all 2^32 of them.
 * Every container holds the same ring, so one address reads as one sender across them (until a key rotation).
 */
import { createHmac } from 'node:crypto';

/** Eight characters of an HMAC of the address: enough to tell senders apart within a survey's quarter hour. */
export function senderOf(sourceIp: string | undefined, secret: string): string | undefined {
  if (!sourceIp) return undefined;
  return createHmac('sha256', secret).update(`sender:${sourceIp}`).digest('base64url').slice(0, 8);
}
