/** Rows without a click or start time, placed on the day a listing of that day alone shows them. */
import { describe, expect, it } from 'vitest';
import type { Transaction } from '../../functions/marketplace/marketplace-records';
import { filedAt } from '../../functions/marketplace/marketplace-records';
import { pacificDayRange } from '../../functions/marketplace/pacific-time';
import { placedByCreationDay } from '../../functions/reconciliation/creation-days';

const at = (iso: string) => ({ utc: iso, raw: iso });
const row = (token: string, extra: Partial<Transaction> = {}): Transaction => ({
  token,
  pid: token,
  status: 'Completed',
  cpi: '1.50',
  ...extra,
});
const days = ['2026-03-07', '2026-03-08', '2026-03-09'];

describe('placedByCreationDay', () => {
  it('asks nothing when every row says when its respondent came in', async () => {
    const rows = [
      row('a', { clickedAt: at('2026-03-08T20:00:00.000Z') }),
      row('b', { startedAt: at('2026-03-08T21:00:00.000Z') }),
    ];
    const placed = await placedByCreationDay(rows, days, async () => {
      throw new Error('not asked');
    });
    expect(placed).toEqual({ rows, unplaced: [], calls: 0 });
  });

  it("files a row at its completion when that is on its creation day, else at that day's last millisecond", async () => {
    const sameDay = row('same', { completedAt: at('2026-03-08T20:00:00.000Z') });
    const later = row('later', { completedAt: at('2026-03-11T20:00:00.000Z') });
    const none = row('none');
    const lost = row('lost', { completedAt: at('2026-03-11T20:00:00.000Z') });
    const asked: string[] = [];
    const placed = await placedByCreationDay([sameDay, later, none, lost], days, async (day) => {
      asked.push(day);
      return day === '2026-03-08' ? [sameDay, later, none] : [];
    });
    // Every day asked: the fourth row is on none of them.
    expect(asked).toEqual(days);
    const lastMs = new Date(pacificDayRange('2026-03-08').end.getTime() - 1).toISOString();
    expect(placed.rows.map(filedAt)).toEqual([
      '2026-03-08T20:00:00.000Z',
      lastMs,
      lastMs,
      '2026-03-11T20:00:00.000Z',
    ]);
    expect(placed).toMatchObject({ unplaced: [lost], calls: 3 });
  });

  it('stops asking once every such row is placed', async () => {
    const asked: string[] = [];
    await placedByCreationDay([row('x')], days, async (day) => {
      asked.push(day);
      return [row('x')];
    });
    expect(asked).toEqual(['2026-03-07']);
  });

  it("places each copy of a token listed on two days on its own day; a row changed since, on its token's first", async () => {
    const complete = row('t', { completedAt: at('2026-03-07T20:00:00.000Z') });
    const failed = row('t', { status: 'Failed', cpi: '0.00', completedAt: at('2026-03-09T20:00:00.000Z') });
    const clicked = row('t', { clickedAt: at('2026-03-07T19:00:00.000Z') });
    const listings: Record<string, Transaction[]> = {
      '2026-03-07': [clicked, complete],
      '2026-03-09': [failed],
    };
    const placed = await placedByCreationDay(
      [failed, clicked, complete],
      days,
      async (day) => listings[day] ?? [],
    );
    expect(placed.rows.map(filedAt)).toEqual([
      '2026-03-09T20:00:00.000Z',
      '2026-03-07T19:00:00.000Z',
      '2026-03-07T20:00:00.000Z',
    ]);
    // Reviewed between the range's listing and the day's: no day shows the row as read, its token's first does.
    const reviewed = row('r', { verifyToken: 'Valid' });
    const moved = await placedByCreationDay([row('r')], days, async (day) =>
      day === '2026-03-08' ? [reviewed] : [],
    );
    expect(moved).toMatchObject({ unplaced: [], calls: 3 });
    expect(moved.rows.map(filedAt)).toEqual([
      new Date(pacificDayRange('2026-03-08').end.getTime() - 1).toISOString(),
    ]);
  });

  it('the same row twice in the listing: one day asked; a changed copy goes to the day whose copy is unclaimed', async () => {
    const x = row('x', { completedAt: at('2026-03-07T20:00:00.000Z') });
    const asked: string[] = [];
    const twice = await placedByCreationDay([x, { ...x }], days, async (day) => {
      asked.push(day);
      return day === '2026-03-07' ? [x] : [];
    });
    expect(asked).toEqual(['2026-03-07']);
    expect(twice.rows.map(filedAt)).toEqual(['2026-03-07T20:00:00.000Z', '2026-03-07T20:00:00.000Z']);
    // The later copy reviewed between the range's listing and its day's: still its own day, not the first's.
    const first = row('t', { verifyToken: 'Valid', completedAt: at('2026-03-07T20:00:00.000Z') });
    const later = row('t', { verifyToken: 'Pending', completedAt: at('2026-03-09T20:00:00.000Z') });
    const placed = await placedByCreationDay([first, later], days, async (day) =>
      day === '2026-03-07' ? [first] : day === '2026-03-09' ? [{ ...later, verifyToken: 'Invalid' }] : [],
    );
    expect(placed.rows.map(filedAt)).toEqual(['2026-03-07T20:00:00.000Z', '2026-03-09T20:00:00.000Z']);
  });
});
