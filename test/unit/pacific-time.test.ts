import { describe, expect, it } from 'vitest';
import {
  formatPacificTime,
  pacificDay,
  pacificDayRange,
  parsePacificTime,
} from '../../functions/marketplace/pacific-time';

const utcOf = (raw: string) => parsePacificTime(raw)?.utc;

describe('marketplace timestamps', () => {
  it('read standard time as UTC-8 and daylight time as UTC-7, whatever the label says', () => {
    expect(utcOf('01/15/2026, 3:04:05 pm PST')).toBe('2026-01-15T23:04:05.000Z');
    expect(utcOf('07/04/2026, 11:59:59 pm PST')).toBe('2026-07-05T06:59:59.000Z');
    expect(utcOf('07/04/2026, 11:59:59 PM PDT')).toBe('2026-07-05T06:59:59.000Z');
  });

  it('handle midnight and noon in 12-hour form', () => {
    expect(utcOf('11/21/2026, 12:00:00 am PST')).toBe('2026-11-21T08:00:00.000Z');
    expect(utcOf('11/21/2026, 12:00:00 pm PST')).toBe('2026-11-21T20:00:00.000Z');
  });

  it('keep the raw string beside the UTC instant', () => {
    expect(parsePacificTime('3/8/2026, 1:59:59 am PST')).toEqual({
      utc: '2026-03-08T09:59:59.000Z',
      raw: '3/8/2026, 1:59:59 am PST',
    });
  });

  it('read the spring-forward gap with the standard offset and the repeated autumn hour as its later occurrence unless labelled PDT', () => {
    expect(utcOf('03/08/2026, 2:30:00 am PST')).toBe('2026-03-08T10:30:00.000Z');
    expect(utcOf('03/08/2026, 3:00:00 am PST')).toBe('2026-03-08T10:00:00.000Z');
    // Completed 1:52 in the repeated hour, read at 2:00 PST: completed 8 minutes ago, not 68 (not settled early).
    expect(utcOf('11/01/2026, 1:52:00 am PST')).toBe('2026-11-01T09:52:00.000Z');
    expect(utcOf('11/01/2026, 1:30:00 am')).toBe('2026-11-01T09:30:00.000Z');
    expect(utcOf('2026-11-01T01:30:00')).toBe('2026-11-01T09:30:00.000Z');
    expect(utcOf('11/01/2026, 1:30:00 am PDT')).toBe('2026-11-01T08:30:00.000Z');
    expect(utcOf('11/01/2026, 0:59:59')).toBe('2026-11-01T07:59:59.000Z');
    expect(utcOf('11/01/2026, 2:00:00 am PST')).toBe('2026-11-01T10:00:00.000Z');
    // Read so, a time of the repeated hour says it may have been an hour earlier; labelled or outside it, not.
    expect(parsePacificTime('11/01/2026, 1:30:00 am PST')?.ambiguous).toBe(true);
    for (const raw of [
      '11/01/2026, 1:30:00 am PDT',
      '11/01/2026, 2:00:00 am PST',
      '11/01/2026, 0:59:59',
      '2026-11-01T01:30:00Z',
    ])
      expect(parsePacificTime(raw)?.ambiguous, raw).toBeUndefined();
  });

  it('read the forms a marketplace may drift to: fractions of a second, a 24-hour clock, ISO 8601, a UTC label', () => {
    expect(utcOf('01/15/2026, 3:04:05.250 pm PST')).toBe('2026-01-15T23:04:05.250Z');
    expect(utcOf('01/15/2026 15:04:05')).toBe('2026-01-15T23:04:05.000Z');
    expect(utcOf('01/15/2026 0:30')).toBe('2026-01-15T08:30:00.000Z');
    expect(utcOf('07/04/2026, 23:59')).toBe('2026-07-05T06:59:00.000Z');
    // ISO 8601 with a zone is the instant it names; without one it is the marketplace's wall clock.
    expect(utcOf('2026-11-21T10:00:00Z')).toBe('2026-11-21T10:00:00.000Z');
    expect(utcOf('2026-11-21T10:00:00.5-08:00')).toBe('2026-11-21T18:00:00.500Z');
    expect(utcOf('2026-07-04 23:59:59')).toBe('2026-07-05T06:59:59.000Z');
    expect(utcOf('01/15/2026, 3:04:05 pm UTC')).toBe('2026-01-15T15:04:05.000Z');
  });

  it.each([
    '',
    'yesterday',
    '13/01/2026, 1:00:00 am PST',
    '02/30/2026, 1:00:00 am PST',
    '01/01/2026, 13:00:00 pm PST',
    '01/01/2026, 0:30:00 am PST',
    '01/01/2026, 24:00:00',
    '2026-02-30T10:00:00Z',
    '2026-11-21T10:00:00+5',
    // Without am/pm, 1 to 12 could be either half of the day: not guessed.
    '11/20/2026, 05:30:00 PST',
    '11/20/2026 12:15',
    // No zone is this far from UTC.
    '2026-11-20T17:30:00+99:99',
    '2026-11-20T17:30:00+15:00',
    // A year no marketplace time has (Date.UTC would read 0026 as 1926).
    '03/20/0026, 10:00:00 am PST',
    '0026-03-20T10:00:00Z',
    '03/20/1999, 10:00:00 am PST',
    '03/20/2200, 10:00:00 am PST',
  ])('refuse %j', (raw) => {
    expect(parsePacificTime(raw)).toBeUndefined();
  });

  it('format back the way the marketplace writes them', () => {
    expect(formatPacificTime(new Date('2026-07-05T06:59:59Z'))).toBe('07/04/2026, 11:59:59 pm PST');
    expect(formatPacificTime(new Date('2026-11-21T08:00:00Z'))).toBe('11/21/2026, 12:00:00 am PST');
    const now = new Date('2026-11-21T21:49:58Z');
    expect(parsePacificTime(formatPacificTime(now))?.utc).toBe(now.toISOString());
  });
});

describe('Pacific calendar days', () => {
  it('name the day an instant falls on', () => {
    expect(pacificDay(new Date('2026-11-22T07:59:59Z'))).toBe('2026-11-21');
    expect(pacificDay(new Date('2026-11-22T08:00:00Z'))).toBe('2026-11-22');
  });

  it('span 24 hours, 23 on the spring-forward day and 25 on the fall-back day', () => {
    const hours = (day: string) => {
      const { start, end } = pacificDayRange(day);
      return (end.getTime() - start.getTime()) / 3_600_000;
    };
    expect(hours('2026-11-21')).toBe(24);
    expect(hours('2026-03-08')).toBe(23);
    expect(hours('2026-11-01')).toBe(25);
    expect(pacificDayRange('2026-11-21').start.toISOString()).toBe('2026-11-21T08:00:00.000Z');
    expect(pacificDayRange('2026-07-04').start.toISOString()).toBe('2026-07-04T07:00:00.000Z');
  });
});

describe('the Pacific wall clock', () => {
  const zone = new Intl.DateTimeFormat('en-US', {
    timeZone: 'America/Los_Angeles',
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });

  it('agrees with the time zone database at every instant across both changes of a year, to the second', () => {
    // Every 7 minutes 13 seconds from a day before spring-forward 2026 to a day after fall-back, and around them.
    const from = Date.parse('2026-03-07T00:00:00Z');
    const to = Date.parse('2026-11-02T12:00:00Z');
    for (let ms = from; ms < to; ms += 433_000) {
      const at = new Date(ms);
      const parts = Object.fromEntries(zone.formatToParts(at).map((p) => [p.type, p.value]));
      const hour = Number(parts.hour);
      const expected = `${parts.month}/${parts.day}/${parts.year}, ${hour % 12 || 12}:${parts.minute}:${parts.second} ${hour < 12 ? 'am' : 'pm'} PST`;
      expect(formatPacificTime(at), at.toISOString()).toBe(expected);
      expect(pacificDay(at)).toBe(`${parts.year}-${parts.month}-${parts.day}`);
    }
  });
});
