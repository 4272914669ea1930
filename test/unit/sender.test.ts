/** Senders of redirects are counted by network: an IPv4 address, an IPv6 /64. */
import { describe, expect, it } from 'vitest';
import { senderNetwork, senderOf, senderSite } from '../../functions/receiving/sender';

describe('senderSite', () => {
  it("is an IPv6 sender's /48, none for IPv4 however written", () => {
    expect(senderSite('2001:db8:77:5::1')).toBe('2001:db8:77::/48');
    expect(senderSite('2001:DB8:0077:ffff:1:2:3:4')).toBe('2001:db8:77::/48');
    expect(senderSite('2001:db8::1')).toBe('2001:db8:0::/48');
    expect(senderSite('198.51.100.23')).toBeUndefined();
    expect(senderSite('::ffff:192.0.2.1')).toBeUndefined();
  });
});

describe('senderNetwork', () => {
  it('is an IPv4 address itself, also written as IPv6', () => {
    expect(senderNetwork('198.51.100.23')).toBe('198.51.100.23');
    for (const mapped of [
      '::ffff:198.51.100.23',
      '::FFFF:c633:6417',
      '0:0:0:0:0:ffff:198.51.100.23',
      '::ffff:0:198.51.100.23',
      '::ffff:198.51.100.23%eth0',
    ])
      expect(senderNetwork(mapped), mapped).toBe('198.51.100.23');
  });

  it("is an IPv6 address's /64, however it is written", () => {
    for (const address of [
      '2001:db8:1:2::1',
      '2001:db8:1:2::15',
      '2001:0db8:0001:0002:ffff:eeee:dddd:cccc',
      '2001:DB8:1:2:0:0:0:9',
      '2001:db8:1:2::192.0.2.1',
    ])
      expect(senderNetwork(address)).toBe('2001:db8:1:2::/64');
    expect(senderNetwork('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(senderNetwork('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(senderNetwork('::1')).toBe('0:0:0:0::/64');
    expect(senderNetwork('2001:db8:1:3::1')).not.toBe(senderNetwork('2001:db8:1:2::1'));
  });
});

describe('senderOf', () => {
  it('gives every address of one IPv6 /64 one fingerprint, so a forger cannot be countless senders', () => {
    const fingerprints = new Set(
      Array.from({ length: 15 }, (_, i) => senderOf(`2001:db8:1:2::${(i + 1).toString(16)}`, 'k'.repeat(32))),
    );
    expect(fingerprints.size).toBe(1);
    expect(senderOf('2001:db8:1:3::1', 'k'.repeat(32))).not.toBe([...fingerprints][0]);
    expect(senderOf('198.51.100.1', 'k'.repeat(32))).not.toBe(senderOf('198.51.100.2', 'k'.repeat(32)));
  });
});
