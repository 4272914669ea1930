/**
 * Before surveys are pointed at the receiver's public URL, its host must resolve: a custom domain whose DNS record
 * is not made yet (the stack creates the domain, the supplier points a name at it) would otherwise take every
 * survey's redirects and postbacks to a name that leads nowhere, and those hits are lost.
 */
import { lookup } from 'node:dns/promises';

export class PublicHostUnresolved extends Error {
  override readonly name = 'PublicHostUnresolved';
}

/**
 * A check that throws `PublicHostUnresolved`, naming the host, when a URL's host name does not resolve: the public
 * URL's, and the postbacks' own when they have one.
 */
export function publicHostCheck(
  publicBaseUrl: string,
  resolve: (host: string) => Promise<unknown> = (host) => lookup(host),
  postbackBaseUrl: string = publicBaseUrl,
): () => Promise<void> {
  const hosts = [...new Set([publicBaseUrl, postbackBaseUrl].map((url) => new URL(url).hostname))];
  return async () => {
    for (const host of hosts)
      try {
        await resolve(host);
      } catch (error) {
        const code = (error as { code?: string }).code ?? (error as Error).message;
        throw new PublicHostUnresolved(
          `the receiver's public host ${host} does not resolve (${code}): no survey is pointed at it until it does (create its DNS record: the stack outputs CustomDomainTarget and PostbackDomainTarget)`,
        );
      }
  };
}
