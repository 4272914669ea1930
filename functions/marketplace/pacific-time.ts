/**
 * The marketplace's clock: US Pacific wall time, written `MM/DD/YYYY, h:mm:ss am/pm PST` (labelled PST even
 * while daylight saving time is in force). Parsed here, at the edge, to UTC; everything else stores UTC.
 */

/** The marketplace's time zone: its clock and its calendar days are US Pacific. */
export const PACIFIC_TIME_ZONE = 'America/Los_Angeles';
const wallClock = new Intl.DateTimeFormat('en-US', {
  timeZone: PACIFIC_TIME_ZONE,
  hourCycle: 'h23',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});

/** A marketplace timestamp: the UTC instant, and the string as the marketplace wrote it. */
export interface PacificTime {
  readonly utc: string;
  readonly raw: string;
  /**
   * A wall time of the repeated autumn hour without a `PDT` label or an offset: `utc` is its later (standard)
   * instant, and it may have been the one an hour before (the marketplace labels every time PST).
   */
  readonly ambiguous?: true;
}

/**
 * The Pacific wall time of a UTC instant, as milliseconds of a pretend-UTC clock. The zone's offset only changes
 * on a whole UTC hour, so it is asked of the time zone database once per hour and remembered: parsing a day's
 * transactions was mostly this call.
 */
function wallOf(utcMs: number): number {
  const hour = Math.floor(utcMs / 3_600_000);
  let offset = offsetByHour.get(hour);
  if (offset === undefined) {
    const start = hour * 3_600_000;
    const parts: Record<string, string> = Object.fromEntries(
      wallClock.formatToParts(new Date(start)).map((p) => [p.type, p.value]),
    );
    const n = (type: string) => Number(parts[type]);
    offset = Date.UTC(n('year'), n('month') - 1, n('day'), n('hour'), n('minute'), n('second')) - start;
    if (offsetByHour.size >= 100_000) offsetByHour.clear();
    offsetByHour.set(hour, offset);
  }
  return utcMs + offset;
}
const offsetByHour = new Map<number, number>();

/**
 * The UTC instant of a Pacific wall time. The autumn hour that happens twice is read as its first (daylight)
 * occurrence, or with `repeated` 'second' as the standard one; a spring time that never happened is read with the
 * standard offset (02:30 becomes 03:30 PDT).
 */
export function pacificWallToUtc(
  year: number,
  month: number,
  day: number,
  hour = 0,
  minute = 0,
  second = 0,
  repeated: 'first' | 'second' = 'first',
): number {
  const wall = Date.UTC(year, month - 1, day, hour, minute, second);
  const candidates = [7, 8].map((hours) => wall + hours * 3_600_000).filter((utc) => wallOf(utc) === wall);
  if (candidates.length === 0) return wall + 8 * 3_600_000;
  return repeated === 'first' ? Math.min(...candidates) : Math.max(...candidates);
}

/**
 * `MM/DD/YYYY, h:mm[:ss[.fff]] am/pm [PST|PDT|PT]`; without am/pm only an hour no 12-hour clock shows (0, 13 to 23)
 * is read, on a 24-hour clock. A `UTC` or `GMT` label is taken at its word.
 */
const US_PATTERN =
  /^\s*(\d{1,2})\/(\d{1,2})\/(\d{4}),?\s+(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?\s*(?:([ap])\.?m\.?)?\s*(?:(P[SD]?T)|(UTC|GMT))?\s*$/i;
/** ISO 8601: with `Z` or an offset the instant it names; without, a Pacific wall time (the marketplace's clock). */
const ISO_PATTERN =
  /^\s*(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?\s*(Z|[+-]\d{2}:?\d{2})?\s*$/i;

const MIN_YEAR = 2000;
const MAX_YEAR = 2199;

/**
 * Parses a marketplace timestamp, or undefined when the string is not one. The documented form is the US one
 * labelled PST; read tolerantly besides: seconds or their fractions left out or given, an unmistakable 24-hour clock, ISO 8601.
 */
export function parsePacificTime(raw: string): PacificTime | undefined {
  const us = US_PATTERN.exec(raw);
  const iso = us ? undefined : ISO_PATTERN.exec(raw);
  if (!us && !iso) return undefined;
  const [year, month, day, h, minute, second, fraction, half, label, zone] = us
    ? [us[3], us[1], us[2], us[4], us[5], us[6], us[7], us[8], us[9], us[10]]
    : [iso?.[1], iso?.[2], iso?.[3], iso?.[4], iso?.[5], iso?.[6], iso?.[7], undefined, undefined, iso?.[8]];
  const n = (v: string | undefined) => Number(v ?? 0);
  let hour = n(h);
  if (half ? hour < 1 || hour > 12 : hour > 23) return undefined;
  // The documented clock is 12-hour: a US-form time of 1 to 12 without am/pm more likely lost its half of the day
  // than changed clocks, so it is not read (ISO 8601 is 24-hour by definition).
  if (us && !half && hour >= 1 && hour <= 12) return undefined;
  if (zone && offsetMinutes(zone) === undefined) return undefined;
  if (n(month) < 1 || n(month) > 12 || n(day) < 1 || n(day) > 31 || n(minute) > 59 || n(second) > 59)
    return undefined;
  // A year no marketplace time has (a garbled `0026`, which Date.UTC would read as 1926): refused, so the row is
  // named unreadable instead of filed on a day no run looks at.
  if (n(year) < MIN_YEAR || n(year) > MAX_YEAR) return undefined;
  if (new Date(Date.UTC(n(year), n(month) - 1, n(day))).getUTCDate() !== n(day)) return undefined;
  if (half) hour = (hour % 12) + (half.toLowerCase() === 'p' ? 12 : 0);
  const ms = Math.floor(Number(`0.${fraction ?? '0'}`) * 1000);
  const wall = Date.UTC(n(year), n(month) - 1, n(day), hour, n(minute), n(second), ms);
  if (zone) return { utc: new Date(wall - (offsetMinutes(zone) as number) * 60_000).toISOString(), raw };
  // The repeated autumn hour: the later (standard) instant unless labelled PDT. Either may be meant (the
  // marketplace labels every time PST); the later one never makes a transaction look settled before it is.
  const at = (occurrence: 'first' | 'second') =>
    pacificWallToUtc(n(year), n(month), n(day), hour, n(minute), n(second), occurrence) + ms;
  if (label?.toUpperCase() === 'PDT') return { utc: new Date(at('first')).toISOString(), raw };
  const utc = at('second');
  // Only a 1 o'clock wall time can repeat (the clocks go back from 2:00 to 1:00).
  return {
    utc: new Date(utc).toISOString(),
    raw,
    ...(hour === 1 && at('first') !== utc ? { ambiguous: true as const } : {}),
  };
}

/**
 * Minutes east of UTC a zone suffix names: `Z`, `UTC` and `GMT` none, `-08:00` or `-0800` -480; undefined for an
 * offset no zone has (past 14 hours, or 60 minutes and more).
 */
function offsetMinutes(zone: string): number | undefined {
  const match = /^([+-])(\d{2}):?(\d{2})$/.exec(zone);
  if (!match) return 0;
  const [hours, minutes] = [Number(match[2]), Number(match[3])];
  if (hours > 14 || minutes > 59) return undefined;
  return (match[1] === '-' ? -1 : 1) * (hours * 60 + minutes);
}

/** Formats a UTC instant the way the marketplace writes it. */
export function formatPacificTime(utc: Date): string {
  const wall = new Date(wallOf(utc.getTime()));
  const hour = wall.getUTCHours();
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${pad(wall.getUTCMonth() + 1)}/${pad(wall.getUTCDate())}/${wall.getUTCFullYear()}, ${hour % 12 || 12}:${pad(
    wall.getUTCMinutes(),
  )}:${pad(wall.getUTCSeconds())} ${hour < 12 ? 'am' : 'pm'} PST`;
}

/** The Pacific calendar day (YYYY-MM-DD) an instant falls on. */
export function pacificDay(utc: Date): string {
  return new Date(wallOf(utc.getTime())).toISOString().slice(0, 10);
}

/** The UTC instants where a Pacific calendar day begins (inclusive) and ends (exclusive): 23, 24 or 25 hours. */
export function pacificDayRange(day: string): { start: Date; end: Date } {
  const [year, month, date] = day.split('-').map(Number) as [number, number, number];
  const next = new Date(Date.UTC(year, month - 1, date + 1));
  return {
    start: new Date(pacificWallToUtc(year, month, date)),
    end: new Date(pacificWallToUtc(next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate())),
  };
}

/** A real calendar date written YYYY-MM-DD (no 2026-02-30). */
/** Why a value is not a day `YYYY-MM-DD`, or undefined when it is one: its form, or a day no calendar has. */
export function dayProblem(value: string): string | undefined {
  if (isCalendarDay(value)) return undefined;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return 'must be a date YYYY-MM-DD';
  return withinYears(value)
    ? `is not a day of the calendar (${value})`
    : `is outside the years ${MIN_YEAR}-${MAX_YEAR} (${value})`;
}

/** A year this product reads times of: `0026-03-08`, a year mistyped, would be read as 1926 by `Date.UTC`. */
const withinYears = (day: string) =>
  Number(day.slice(0, 4)) >= MIN_YEAR && Number(day.slice(0, 4)) <= MAX_YEAR;

export function isCalendarDay(value: string): boolean {
  const date = new Date(`${value}T12:00:00Z`);
  return (
    /^\d{4}-\d{2}-\d{2}$/.test(value) &&
    withinYears(value) &&
    !Number.isNaN(date.getTime()) &&
    date.toISOString().slice(0, 10) === value
  );
}
