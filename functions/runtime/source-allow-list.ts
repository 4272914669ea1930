/**
 * An optional allow-list of the address ranges postbacks may come from (the marketplace's servers). The address
 * checked is the one API Gateway saw the connection come from (`requestContext.http.sourceIp`), never a header a
 * sender can write, such as X-Forwarded-For.
 */
import { BlockList, isIP } from 'node:net';

export type SourceAllowList = (address: string) => boolean;

/** Parses `203.0.113.0/24, 2001:db8::/32, 198.51.100.7`; throws naming the entry that is not a range. */
export function parseAllowList(value: string | undefined): SourceAllowList | undefined {
  if (!value || value.trim() === '') return undefined;
  const list = new BlockList();
  for (const entry of value
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    // An address, and a prefix length of digits if any: `203.0.113.7/` (Number('') is 0) must not allow every
    // address, nor a second `/` pass unread.
    const [, address = '', bits] = /^([^/]*)(?:\/(\d{1,3}))?$/.exec(entry) ?? [];
    const family = isIP(address);
    const prefix = bits === undefined ? (family === 6 ? 128 : 32) : Number(bits);
    if (family === 0 || (bits === undefined && entry.includes('/')) || prefix > (family === 6 ? 128 : 32)) {
      throw new Error(`POSTBACK_SOURCE_CIDRS: "${entry.slice(0, 60)}" is not an address range`);
    }
    list.addSubnet(address, prefix, family === 6 ? 'ipv6' : 'ipv4');
  }
  return (source) => {
    const family = isIP(source);
    return family !== 0 && list.check(source, family === 6 ? 'ipv6' : 'ipv4');
  };
}
