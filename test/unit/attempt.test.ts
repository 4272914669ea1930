import { describe, expect, it } from 'vitest';
import { attemptFromItem } from '../../functions/ledger/ledger-store';
import { channelRecord, completeEvidence, hasConflict, hitEffect } from '../../functions/receiving/attempt';

const at = (minute: number) => `2026-11-21T10:${String(minute).padStart(2, '0')}:00.000Z`;

describe('channel records', () => {
  it('put the standing outcome first and flag later different ones as conflicts', () => {
    const record = channelRecord('success', [
      { outcome: 'fail', firstAt: at(5), hits: 1 },
      { outcome: 'success', firstAt: at(1), hits: 3 },
    ]);
    expect(record).toMatchObject({ outcome: 'success', firstAt: at(1), hits: 4, conflict: true });
    expect(record?.sightings.map((s) => s.outcome)).toEqual(['success', 'fail']);
  });

  it('are absent when the channel never reported', () => {
    expect(channelRecord(undefined, [])).toBeUndefined();
  });
});

describe('complete evidence', () => {
  const success = channelRecord('success', [{ outcome: 'success', firstAt: at(1), hits: 1 }]);
  const fail = channelRecord('fail', [{ outcome: 'fail', firstAt: at(1), hits: 1 }]);
  const overquota = channelRecord('overquota', [{ outcome: 'overquota', firstAt: at(1), hits: 1 }]);

  it('tells a postback-confirmed complete from a redirect-only one', () => {
    expect(completeEvidence(success, success)).toBe('postback-confirmed');
    expect(completeEvidence(undefined, success)).toBe('postback-confirmed');
    expect(completeEvidence(success, undefined)).toBe('redirect-only');
    expect(completeEvidence(fail, fail)).toBe('none');
    expect(completeEvidence(success, fail)).toBe('none');
  });

  it('flags channels that disagree on success', () => {
    expect(hasConflict(success, fail)).toBe(true);
    expect(hasConflict(overquota, fail)).toBe(false);
    expect(hasConflict(overquota, success)).toBe(true);
    expect(hasConflict(success, success)).toBe(false);
  });
});

describe('hit effects', () => {
  const item = (extra: Record<string, unknown>) =>
    attemptFromItem({ surveyId: '1', pid: 'p', token: 't', firstSeenAt: at(1), lastSeenAt: at(2), ...extra });

  it('first report, repeat and contradiction', () => {
    const first = item({ postbackOutcome: 'success', postback_success_at: at(1), postback_success_hits: 1 });
    expect(hitEffect(first, 'postback', 'success')).toBe('recorded');
    const repeat = item({ postbackOutcome: 'success', postback_success_at: at(1), postback_success_hits: 2 });
    expect(hitEffect(repeat, 'postback', 'success')).toBe('duplicate');
    const contradicted = item({
      postbackOutcome: 'success',
      postback_success_at: at(1),
      postback_success_hits: 1,
      postback_fail_at: at(2),
      postback_fail_hits: 1,
    });
    expect(hitEffect(contradicted, 'postback', 'fail')).toBe('conflict');
    expect(contradicted.conflict).toBe(true);
  });
});
