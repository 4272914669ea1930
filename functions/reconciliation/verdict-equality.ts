/**
 * Whether a verdict is the one its attempt already carries: pure, with no import but types, so the ledger's
 * reconciliation store (bundled into every function through the ledger module) does not pull the verdict rules and
 * the marketplace's record schemas into the receivers.
 */
import type { AttemptVerdict } from './verdict-rules';

/**
 * The verdict its attempt already carries, facts and all: recording it again would change nothing. The steady
 * hourly run finds almost every verdict so, and tells them apart here before any write is set up.
 */
export function verdictUnchanged({ verdict, attempt }: AttemptVerdict): boolean {
  const existing = attempt?.reconciliation;
  return (
    existing?.verdict === verdict.kind &&
    existing.day === verdict.day &&
    sameData(existing.detail, verdict.detail) &&
    sameData(existing.marketplace, verdict.marketplace)
  );
}

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
  const keys = Object.keys(x).filter((k) => x[k] !== undefined);
  if (keys.length !== Object.keys(y).filter((k) => y[k] !== undefined).length) return false;
  return keys.every((k) => Object.hasOwn(y, k) && sameData(x[k], y[k]));
}
