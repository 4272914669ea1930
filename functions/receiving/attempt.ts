/**
 * An attempt: one respondent's (pid) try at one survey, identified by the marketplace's transaction token.
 * What each channel said about it, derived views finance relies on, and what a new hit did to it.
 */
import type { HitSource } from './hit-request';
import type { Channel, Outcome } from './outcome';

/** One outcome a channel reported, with when it was first reported and how often. */
export interface Sighting {
  readonly outcome: Outcome;
  readonly firstAt: string;
  readonly hits: number;
}

/** Everything one channel said about an attempt. The first outcome stands; later different ones are conflicts. */
export interface ChannelRecord {
  readonly outcome: Outcome;
  readonly firstAt: string;
  readonly hits: number;
  /** Every outcome the channel reported, the standing one first. */
  readonly sightings: readonly Sighting[];
  /** True when the channel reported more than one outcome. */
  readonly conflict: boolean;
}

/**
 * `postback-confirmed`: the marketplace's server reported success. `redirect-only`: only the respondent's
 * browser did, which anyone can forge, so it is never payable on its own. `none`: no complete claimed.
 */
export type CompleteEvidence = 'postback-confirmed' | 'redirect-only' | 'none';

export interface Attempt {
  readonly surveyId: string;
  readonly pid: string;
  readonly token: string;
  /** UTC ISO-8601 of the first hit on either channel; absent for an attempt only the marketplace reported. */
  readonly firstSeenAt?: string;
  readonly lastSeenAt?: string;
  /** `from`: the first redirect's sender (a fingerprint of its address, sender.ts). */
  readonly redirect?: ChannelRecord & { readonly from?: string };
  readonly postback?: ChannelRecord & { readonly source?: HitSource };
  readonly complete: CompleteEvidence;
  /** A channel reported conflicting outcomes, or the two channels disagree on success. */
  readonly conflict: boolean;
  /** The latest reconciliation verdict and how it got there. */
  readonly reconciliation?: AttemptReconciliation;
  /**
   * On an item reconciliation created for a transaction: the pid its attempt arrived here under (another
   * spelling), found by a later day's run; the transaction's own day reads that attempt by key.
   */
  readonly arrivedAs?: string;
  /**
   * When a hit of it last came through the buffer (an outage): its sightings keep when the hits were made, so
   * this says when the ledger learned of them.
   */
  readonly drainedAt?: string;
  /**
   * The time the day index (or the attempt feed) files it by, when that is not its first sighting: an item made for
   * a transaction, its click when made (kept when the row moves, or a hit comes later); which day's reading reaches it.
   */
  readonly placedAt?: string;
}

/** Reconciliation's word on an attempt, kept on the attempt: the verdict, what the marketplace said, history. */
export interface AttemptReconciliation {
  readonly verdict: string;
  readonly day: string;
  readonly detail: Readonly<Record<string, string | boolean>>;
  readonly at: string;
  readonly marketplace?: {
    readonly status: string;
    readonly verifyToken?: string;
    readonly cpi: string;
    readonly clickedAt?: string;
    readonly completedAt?: string;
  };
  /** Every verdict this attempt has had, oldest first; a re-run with the same verdict adds nothing. */
  readonly history: readonly { readonly verdict: string; readonly day: string; readonly at: string }[];
}

/** What one hit did: first report of the channel, a repeat of the standing outcome, or a contradiction. */
export type HitEffect = 'recorded' | 'duplicate' | 'conflict';

/** Builds a channel's record from its sightings (any order). Undefined when the channel never reported. */
export function channelRecord(
  standing: Outcome | undefined,
  sightings: readonly Sighting[],
): ChannelRecord | undefined {
  const first = sightings.find((s) => s.outcome === standing);
  if (!standing || !first) return undefined;
  const others = sightings.filter((s) => s !== first).sort((a, b) => a.firstAt.localeCompare(b.firstAt));
  return {
    outcome: standing,
    firstAt: first.firstAt,
    hits: sightings.reduce((sum, s) => sum + s.hits, 0),
    sightings: [first, ...others],
    conflict: others.length > 0,
  };
}

/**
 * Completes only the marketplace's server confirmed are payable evidence. A browser's success claim that the
 * server's postback contradicts is no evidence at all.
 */
export function completeEvidence(redirect?: ChannelRecord, postback?: ChannelRecord): CompleteEvidence {
  if (postback) return postback.outcome === 'success' ? 'postback-confirmed' : 'none';
  if (redirect?.outcome === 'success') return 'redirect-only';
  return 'none';
}

/** A redirect's outcome seen from the postbacks' two-valued view. */
const asPostbackOutcome = (outcome: Outcome): Outcome => (outcome === 'success' ? 'success' : 'fail');

/** Whether the record holds a contradiction within a channel or between the two. */
export function hasConflict(redirect?: ChannelRecord, postback?: ChannelRecord): boolean {
  if (redirect?.conflict || postback?.conflict) return true;
  return !!redirect && !!postback && asPostbackOutcome(redirect.outcome) !== postback.outcome;
}

/** Classifies a hit by the attempt as it stood right after the hit was applied. */
export function hitEffect(after: Attempt, channel: Channel, outcome: Outcome): HitEffect {
  const record = after[channel];
  if (!record || record.outcome !== outcome) return 'conflict';
  const sighting = record.sightings.find((s) => s.outcome === outcome);
  return sighting && sighting.hits > 1 ? 'duplicate' : 'recorded';
}
