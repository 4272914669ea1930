/** Whose rows a survey's are: the time it was this stack's, read from its registration. */
import { describe, expect, it } from 'vitest';
import type { SurveyRegistration } from '../../functions/ledger/ledger-store';
import type { Transaction } from '../../functions/marketplace/marketplace-records';
import { servedHere } from '../../functions/reconciliation/serving-time';

const registration = (fields: Partial<SurveyRegistration>): SurveyRegistration => ({
  surveyId: '1',
  state: 'active',
  verified: true,
  failures: 0,
  updatedAt: '2026-11-20T00:00:00.000Z',
  ...fields,
});
const ended = (utc: string, ambiguous = false): Transaction =>
  ({
    token: 't',
    pid: 'p',
    status: 'Completed',
    completedAt: { utc, raw: '', ...(ambiguous ? { ambiguous: true } : {}) },
  }) as unknown as Transaction;

describe('rows served here', () => {
  it('from the first apply taken, less ten minutes, to the removal, and never in a removal between applies', () => {
    const served = servedHere(
      registration({
        servingSince: '2026-11-20T12:00:00.000Z',
        notServing: [{ from: '2026-11-20T14:00:00.000Z', to: '2026-11-20T16:00:00.000Z' }],
        state: 'removed',
        removedAt: '2026-11-20T20:00:00.000Z',
      }),
    );
    const at = (hhmm: string) => served(ended(`2026-11-20T${hhmm}:00.000Z`));
    expect(['11:45', '11:55', '13:00', '14:05', '15:00', '15:55', '17:00', '20:05', '20:15'].map(at)).toEqual(
      [false, true, true, true, false, true, true, true, false],
    );
  });

  it("every row of an older release's registration, none of one whose applies were all refused", () => {
    expect(servedHere(registration({}))(ended('2020-01-01T00:00:00.000Z'))).toBe(true);
    expect(servedHere(undefined)(ended('2020-01-01T00:00:00.000Z'))).toBe(true);
    expect(servedHere(registration({ neverTaken: true }))(ended('2026-11-20T12:00:00.000Z'))).toBe(false);
  });

  it('a completion of the repeated autumn hour if either of its readings was served', () => {
    const removed = servedHere(registration({ state: 'removed', removedAt: '2026-11-01T08:45:00.000Z' }));
    expect(removed(ended('2026-11-01T09:20:00.000Z'))).toBe(false);
    expect(removed(ended('2026-11-01T09:20:00.000Z', true))).toBe(true);
  });
});
