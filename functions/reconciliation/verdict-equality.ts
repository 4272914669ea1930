/**
 * Whether a verdict is the one its attempt already carries: pure, with no import but types, so the ledger's
 * reconciliation store (bundled into every function through the ledger module) does not pull the verdict rules and
 * the marketplace's record schemas into the receivers.
 */
import type { AttemptVerdict } from './verdict-rules';

/**
 * The verdict its attempt already carries, facts and all: recording it again would change nothing. The steady
 * hourly run finds almost every verdict so, and tells them apart here before any write is set up. So is an implied
 * agreement on an attempt that carries no verdict (the `matchedVerdicts` setting `implied`): it stays without one.
 *
 * One change of facts is not written either: a matched complete's review moving on from Pending to Valid (the
 * buyer's acceptance, days after the click). The stored verdict already holds what a later run needs from it (that
 * the row was listed as an earning complete, and at what price: a reversal is priced from it), the day's figures
 * count the complete as owed from the row itself, and finance lists no matched attempt; the write would be one more
 * unit for most completes in their week. The attempt shows the review as it stood when judged (`verdictAt`). Any
 * other change (Invalid, a price, a time, a status) is written as before.
 */
export function verdictUnchanged({ verdict, attempt }: AttemptVerdict): boolean {
  const existing = attempt?.reconciliation;
  // An agreement the attempt tells again by itself (verdict-rules.ts `impliedMatch`): nothing to write on it.
  if (!existing) return verdict.implied === true && attempt !== undefined;
  if (existing.verdict !== verdict.kind || existing.day !== verdict.day) return false;
  if (sameData(existing.detail, verdict.detail) && sameData(existing.marketplace, verdict.marketplace))
    return true;
  const listed = existing.marketplace?.verifyToken;
  const now = verdict.marketplace?.verifyToken;
  if (verdict.kind !== 'matched' || !reviewedValid(listed, now)) return false;
  // The same verdict but for the review: compared with the stored review put in place of the new one.
  return (
    sameData(existing.detail, { ...verdict.detail, verifyToken: existing.detail.verifyToken }) &&
    sameData(existing.marketplace, { ...verdict.marketplace, verifyToken: listed })
  );
}

/** A complete's review gone from Pending (or not given yet) to Valid. */
const reviewedValid = (listed: string | undefined, now: string | undefined): boolean =>
  now?.toLowerCase() === 'valid' && (listed === undefined || listed.toLowerCase() === 'pending');

/**
 * Equal as data, whatever order the store returned the keys in (undefined and null alike). Compared in place:
 * a steady run compares two small objects per attempt, and building strings for it was most of its own CPU.
 */
function sameData(a: unknown, b: unknown): boolean {
  if (a === b || (a == null && b == null)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((value, i) => sameData(value, b[i]));
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let defined = 0;
  for (const k in x) {
    if (!Object.hasOwn(x, k) || x[k] === undefined) continue;
    if (!Object.hasOwn(y, k) || !sameData(x[k], y[k])) return false;
    defined++;
  }
  for (const k in y) if (Object.hasOwn(y, k) && y[k] !== undefined) defined--;
  return defined === 0;
}
