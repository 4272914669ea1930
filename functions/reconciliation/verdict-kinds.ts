/**
 * The one list of reconciliation verdicts, and which of them are money: reconciliation writes them, finance
 * counts, filters and renders them, the CLI prints them and the reconcile function emits a metric per kind.
 * Defining them once keeps those from drifting apart (a kind the report forgets, a money flag the CSV disagrees
 * with).
 */

export const VERDICT_KINDS = [
  'matched',
  'complete_not_received',
  'complete_not_paid',
  'invalidated',
  'status_mismatch',
  'cpi_mismatch',
  'not_received',
  'not_in_marketplace',
  // Added after the others: its summary CSV column comes last (report-csv.ts), so the others keep their places.
  'unknown_status',
  'unverified_claim',
  'contradicted_claim',
] as const;
export type VerdictKind = (typeof VERDICT_KINDS)[number];

/**
 * Kinds where money is at stake: a complete one side counts and the other does not, or at another price, or a
 * transaction under a status this product does not know (`unknown_status`: it may be a complete the marketplace
 * pays, yet it is in no owed figure). Each needs a signed postback or a marketplace transaction: a browser's claim
 * alone is never money.
 */
export const MONEY_KINDS: ReadonlySet<VerdictKind> = new Set([
  'complete_not_received',
  'complete_not_paid',
  'invalidated',
  'cpi_mismatch',
  'unknown_status',
]);

/**
 * A success redirect nothing else backs: anyone who has seen the static success URL can send one with made-up
 * ids. Shown apart from the discrepancies (a burst of them is a forgery signal, not a debt) and never money.
 * `unverified_claim`: the redirect alone, no postback and no transaction. `contradicted_claim`: the fail
 * postback or the marketplace's transaction (another status) says the attempt did not complete.
 */
export const CLAIM_KINDS: ReadonlySet<VerdictKind> = new Set(['unverified_claim', 'contradicted_claim']);

/** Every kind but agreement: what the discrepancy index holds. */
export const DISCREPANCY_KINDS: readonly VerdictKind[] = VERDICT_KINDS.filter((kind) => kind !== 'matched');

/** Discrepancies proper: what finance lists by default (claims are listed apart). */
export const LISTED_DISCREPANCY_KINDS: readonly VerdictKind[] = DISCREPANCY_KINDS.filter(
  (kind) => !CLAIM_KINDS.has(kind),
);

export const isVerdictKind = (value: string): value is VerdictKind =>
  (VERDICT_KINDS as readonly string[]).includes(value);

export const isMoneyKind = (kind: string): boolean => MONEY_KINDS.has(kind as VerdictKind);
export const isClaimKind = (kind: string): boolean => CLAIM_KINDS.has(kind as VerdictKind);
