/**
 * Who sent a redirect, as far as the health check needs to know: a short keyed fingerprint of the address API
 * Gateway saw (never `X-Forwarded-For`; for IPv6, its /64), kept on the attempt instead of the address itself.
 * Success redirects are claims anyone holding the static success URL can send; counted per sender, a burst of them
 * from one address is a few claims, not a survey whose postbacks stopped.
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
 * An IPv4 address written as IPv6 (`::ffff:192.0.2.1`, `::ffff:c000:201`, `::ffff:0:192.0.2.1`) is the IPv4 address;
 * a zone (`%eth0`) is no part of it.
 */
export function senderNetwork(sourceIp: string): string {
  const address = sourceIp.split('%', 1)[0] as string;
  if (!isIPv6(address)) return sourceIp;
  const groups = ipv6Groups(address.toLowerCase());
  const zeros = (from: number, to: number) => groups.slice(from, to).every((g) => g === 0);
  // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (translated).
  if (zeros(0, 5) && groups[5] === 0xffff) return ipv4Of(groups[6] as number, groups[7] as number);
  if (zeros(0, 4) && groups[4] === 0xffff && groups[5] === 0)
    return ipv4Of(groups[6] as number, groups[7] as number);
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/**
 * For an IPv6 sender, its /48: the most a site is usually given, so one forger holds 65,536 /64s in it (a tunnel
 * broker hands one out free). Undefined for IPv4 (and IPv4 written as IPv6).
 */
export function senderSite(sourceIp: string): string | undefined {
  return siteOfNetwork(senderNetwork(sourceIp));
}

/** The /48 of a sender's network as `senderNetwork` gives it (an IPv6 /64); undefined for IPv4. */
export function siteOfNetwork(network: string): string | undefined {
  if (!network.endsWith('::/64')) return undefined;
  return `${network.split(':').slice(0, 3).join(':')}::/48`;
}

/** The eight 16-bit groups of a valid IPv6 address (a trailing dotted quad is two of them). */
function ipv6Groups(address: string): number[] {
  const parts = (part: string | undefined) =>
    (part ? part.split(':') : []).flatMap((g) => {
      if (!g.includes('.')) return [Number.parseInt(g, 16)];
      const [a = 0, b = 0, c = 0, d = 0] = g.split('.').map(Number);
      return [(a << 8) | b, (c << 8) | d];
    });
  const [head, tail] = address.split('::');
  const before = parts(head);
  if (tail === undefined) return before;
  const after = parts(tail);
  return [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
}

const ipv4Of = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
