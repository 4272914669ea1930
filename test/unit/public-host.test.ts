import { describe, expect, it } from 'vitest';
import { PublicHostUnresolved, publicHostCheck } from '../../functions/marketplace/public-host';

describe('the public host check before surveys are pointed here', () => {
  const resolving = (known: string[]) => {
    const asked: string[] = [];
    const resolve = async (host: string) => {
      asked.push(host);
      if (!known.includes(host)) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    };
    return { asked, resolve };
  };

  it('resolves the public host and the postbacks own, each once', async () => {
    const { asked, resolve } = resolving(['surveys.acme.net', 'pb.acme.net']);
    await publicHostCheck('https://surveys.acme.net/', resolve, 'https://pb.acme.net/')();
    expect(asked).toEqual(['surveys.acme.net', 'pb.acme.net']);
    const same = resolving(['surveys.acme.net']);
    await publicHostCheck('https://surveys.acme.net/', same.resolve)();
    expect(same.asked).toEqual(['surveys.acme.net']);
  });

  it('names the postback host when it is the one that does not resolve', async () => {
    const { resolve } = resolving(['surveys.acme.net']);
    const check = publicHostCheck('https://surveys.acme.net/', resolve, 'https://pb.acme.net/');
    await expect(check()).rejects.toThrow(PublicHostUnresolved);
    await expect(check()).rejects.toThrow(/public host pb\.acme\.net does not resolve \(ENOTFOUND\)/);
  });
});
