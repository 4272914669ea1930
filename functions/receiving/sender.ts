/**
 * Who sent a redirect, as far as the health check needs to know: a short keyed fingerprint of the address API
 * Gateway saw (never `X-Forwarded-For`; for IPv6, its /64), kept on the attempt instead of the address itself. Success redirects are
 * claims anyone holding the static success URL can send; counted per sender, a burst of them from one address is a
 * few claims, not a survey whose postbacks stopped.
 *
 * Keyed with the current signing key: an unkeyed hash of an IPv4 address is reversed by hashing all 2^32 of them.
 * Every container holds the same ring, so one address reads as one sender across them (until a key rotation).
 */
import { createHmac } from 'node:crypto';
import { isIPv6 } from 'node:net';

/** Eight characters of an HMAC of the sender: enough to tell senders apart within a survey's quarter hour. */
export function senderOf(sourceIp: string | undefined, secret: string): string | undefined {
  if (!sourceIp) return undefined;
  return createHmac('sha256', secret)
    .update(`sender:${senderNetwork(sourceIp)}`)
    .digest('base64url')
    .slice(0, 8);
}

/**
 * The network a sender is counted by: an IPv4 address itself; for IPv6 its /64, the block one subscriber is given
 * (a host picks any of its 2^64 addresses at will, so counted per address one forger would be countless senders).
 * An IPv4 address written as IPv6 (`::ffff:192.0.2.1`) is the IPv4 address.
 */
export function senderNetwork(sourceIp: string): string {
  if (!isIPv6(sourceIp)) return sourceIp;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(sourceIp);
  if (mapped) return mapped[1] as string;
  const [head = '', tail] = sourceIp.toLowerCase().split('::');
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const before = groups(head);
  // A trailing dotted quad stands for two groups; only the first four groups matter here.
  const after = groups(tail).flatMap((g) => (g.includes('.') ? ['0', '0'] : [g]));
  const full =
    tail === undefined ? before : [...before, ...Array(8 - before.length - after.length).fill('0'), ...after];
  return `${full
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
