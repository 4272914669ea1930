/**
 * A fingerprint of the marketplace's transaction rows of one Pacific day, stored on the day's summary: a settled
 * day whose rows still have the fingerprint it was reconciled with need not be read again this run. Canonical
 * and independent of the order the marketplace lists rows in, so only a change in the rows changes it.
 */
import { createHash } from 'node:crypto';
import { filedAt, type Transaction } from '../marketplace/marketplace-records';
import { pacificDayRange } from '../marketplace/pacific-time';

/**
 * The digest of the rows filed under `day`, plus the rows without a day (they take part in matching whatever
 * the window, so a change in them changes every day's digest). Only what reconciliation reads of a row counts:
 * its keys, status, amount, review and times.
 */
export function transactionsDigest(rows: readonly Transaction[], day: string): string {
  const { start, end } = pacificDayRange(day);
  const [from, to] = [start.toISOString(), end.toISOString()];
  const lines: string[] = [];
  for (const t of rows) {
    const filed = filedAt(t);
    if (filed !== undefined && (filed < from || filed >= to)) continue;
    lines.push(
      JSON.stringify([
        t.token,
        t.pid,
        t.status,
        t.cpi,
        t.verifyToken ?? null,
        t.clickedAt?.utc ?? null,
        t.startedAt?.utc ?? null,
        t.completedAt?.utc ?? null,
      ]),
    );
  }
  return createHash('sha256').update(lines.sort().join('\n')).digest('base64url').slice(0, 22);
}

/** JSON with object keys sorted at every level and undefined fields left out: equal data, equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}
