/**
 * A bound on the redirects one sender gets recorded, off unless set (the deployed stack sets 600:
 * DEPLOYED_REDIRECTS_PER_SENDER_MINUTE in infra/receiver-stack.ts). The success URL is the same for every
 * respondent of a survey, signature included, so anyone who completed it once can send it again with made-up ids,
 * from a script: each would be a new attempt (a write, its index entry) that reconciliation and the health check
 * then read, a claim finance lists. With a bound, past it a sender's redirects are answered as usual and not
 * recorded. It is off by default here because a redirect is evidence too: respondents behind one carrier's shared
 * address can pass any bound together, and a success redirect missing here turns a reversed complete the
 * marketplace lists into one never seen (`not_received` instead of `invalidated`). Counted per container and
 * minute, by the sender's network (an IPv4 address, an IPv6 /64), and an IPv6 sender's /48 besides at
 * `SITE_SHARE` times the bound (one forger's /48 is 65,536 /64s). Postbacks (the marketplace's servers) are never
 * bounded.
 */
import { senderNetwork, siteOfNetwork } from './sender';

/** Redirects recorded per sender, container and minute at most (REDIRECTS_PER_SENDER_MINUTE); 0: no bound. */
export const REDIRECTS_PER_SENDER_MINUTE = 0;
/** Senders counted per minute at most: past that (a flood from countless addresses) no one is held back. */
const SENDERS_TRACKED = 50_000;
/**
 * An IPv6 /48's bound, in senders' bounds: a carrier or a campus puts many subscribers' /64s in one /48, each of
 * whom sends a few redirects, so the site's bound is wide; one forger rotating /64s within it is held to it.
 */
export const SITE_SHARE = 16;

export type SenderVerdict = 'record' | 'first-over' | 'over';

/** Whether this sender's redirect is recorded; `first-over` for the first one past the bound in its minute. */
export function senderLimiter(perMinute = REDIRECTS_PER_SENDER_MINUTE, now: () => number = Date.now) {
  let minute = -1;
  const counts = new Map<string, number>();
  return (sourceIp: string | undefined): SenderVerdict => {
    if (!sourceIp || perMinute === 0) return 'record';
    const current = Math.floor(now() / 60_000);
    if (current !== minute) {
      minute = current;
      counts.clear();
    }
    const network = senderNetwork(sourceIp);
    const seen = counts.get(network);
    if (seen === undefined && counts.size >= SENDERS_TRACKED) return 'record';
    const count = (seen ?? 0) + 1;
    counts.set(network, count);
    if (count > perMinute) return count === perMinute + 1 ? 'first-over' : 'over';
    // The site counts what its /64s had recorded: one of them past its own bound does not hold the others back.
    const site = siteOfNetwork(network);
    const siteCount = site === undefined ? 0 : (counts.get(site) ?? 0) + 1;
    if (site !== undefined) counts.set(site, siteCount);
    const siteBound = perMinute * SITE_SHARE;
    if (siteCount > siteBound) return siteCount === siteBound + 1 ? 'first-over' : 'over';
    return 'record';
  };
}
