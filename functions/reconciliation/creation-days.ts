/**
 * Rows the marketplace lists without a click time, nor a start that tells the click's day (one just after a
 * midnight may be of a click before it: `entryTime`). It files a transaction under the day its respondent
 * clicked in, and a listing of several days does not say which: filed by its completion, a respondent who finished
 * days later would land on a day past the listing's range, in no window, and a paid complete would be owed on no
 * day. The listing of each day of the range alone does say it (its filter is the creation time), so such rows are
 * placed by asking for those days one by one: a few calls, only when such a row is listed.
 */
import type { Transaction } from '../marketplace/marketplace-records';
import { copyKey, hasEntryTime } from '../marketplace/marketplace-records';
import { pacificDayRange } from '../marketplace/pacific-time';

export interface CreationDayPlacement {
  readonly rows: Transaction[];
  /** Rows without an entry time that no day's listing showed (left as listed). */
  readonly unplaced: readonly Transaction[];
  /** Listing calls made to place them (0 when every row has an entry time). */
  readonly calls: number;
}

/**
 * The rows with every row lacking an entry time placed on its creation day (`createdWithin`: its completion when
 * that is on the day, else the day's last millisecond). `listDay` lists one Pacific day's rows; `days` are the
 * days the rows were listed for, oldest first.
 */
export async function placedByCreationDay(
  rows: readonly Transaction[],
  days: readonly string[],
  listDay: (day: string) => Promise<readonly Transaction[]>,
): Promise<CreationDayPlacement> {
  const wanted = rows.filter((t) => !hasEntryTime(t) && t.createdWithin === undefined);
  if (wanted.length === 0) return { rows: [...rows], unplaced: [], calls: 0 };
  // Each row by the day that lists that very row (one token may be listed on two days, a copy on each: each copy
  // keeps its own day; the same row twice in the listing, one day); failing that (the row changed between the two
  // listings), by the first day its token is on whose copy no other row was found as.
  const keyDay = new Map<string, string>();
  const keys = new Set(wanted.map(copyKey));
  const tokens = new Set(wanted.map((t) => t.token));
  const tokenDays = new Map<string, { day: string; key: string }[]>();
  let calls = 0;
  for (const day of days) {
    if (keyDay.size === keys.size) break;
    calls++;
    for (const listed of await listDay(day)) {
      if (!tokens.has(listed.token)) continue;
      const key = copyKey(listed);
      tokenDays.set(listed.token, [...(tokenDays.get(listed.token) ?? []), { day, key }]);
      if (keys.has(key) && !keyDay.has(key)) keyDay.set(key, day);
    }
  }
  const unclaimedDay = (token: string) =>
    (tokenDays.get(token) ?? []).find(({ key }) => !keyDay.has(key))?.day ?? tokenDays.get(token)?.[0]?.day;
  const isWanted = new Set(wanted);
  const unplaced: Transaction[] = [];
  const placed = rows.map((t) => {
    if (!isWanted.has(t)) return t;
    const day = keyDay.get(copyKey(t)) ?? unclaimedDay(t.token);
    if (day === undefined) {
      unplaced.push(t);
      return t;
    }
    return onCreationDay(t, day);
  });
  return { rows: placed, unplaced, calls };
}

/**
 * A row without an entry time placed on the day a listing of that day alone showed it: filed at its start or else
 * its completion when that is on the day (created before it), else the day's last millisecond. Rows with an entry
 * time stand.
 */
export function onCreationDay(t: Transaction, day: string): Transaction {
  if (hasEntryTime(t)) return t;
  const { start, end } = pacificDayRange(day);
  const last = new Date(end.getTime() - 1).toISOString();
  // Its start (just after a midnight, `entryTime`) or its completion, within the day.
  const known = t.startedAt?.utc ?? t.completedAt?.utc ?? last;
  const within = known < start.toISOString() ? start.toISOString() : known > last ? last : known;
  return { ...t, createdWithin: within };
}
