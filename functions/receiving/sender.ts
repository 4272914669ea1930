/**
 * Who sent a redirect, as far as the health check needs to know: a short fingerprint of the address API Gateway saw
 * (never `X-Forwarded-For`), kept on the attempt instead of the address itself. Success redirects are claims
 * anyone holding the static success URL can send; counted per sender, a burst of them from one address is a few
 * claims, not a survey whose postbacks stopped.
 */
import { createHash } from 'node:crypto';

/** Eight characters of the address's SHA-256: enough to tell senders apart within a survey's quarter hour. */
export function senderOf(sourceIp: string | undefined): string | undefined {
  if (!sourceIp) return undefined;
  return createHash('sha256').update(sourceIp).digest('base64url').slice(0, 8);
}
