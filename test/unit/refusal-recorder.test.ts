/**
 * Counting refusals never costs a genuine hit: at most a few writes a second per container, and an answer after a
 * bounded wait whatever the ledger does.
 */
import { describe, expect, it, vi } from 'vitest';
import type { RejectedHit } from '../../functions/ledger/ledger-store';
import {
  GENUINE_REFUSALS_PER_SECOND,
  REFUSAL_WAIT_MS,
  REFUSALS_RECORDED_PER_SECOND,
  REFUSED_SURVEYS_PER_MINUTE,
  refusalRecorder,
} from '../../functions/receiving/refusal-recorder';

const rejected: RejectedHit = {
  at: '2026-11-23T10:00:00.000Z',
  requestId: 'r',
  channel: 'postback',
  code: 'signature_mismatch',
  reason: 'signature mismatch',
  sourceIp: '203.0.113.9',
};

describe('refusal recorder', () => {
  it('writes at most its rate in one second, and again the next second', async () => {
    let clock = 1_000_000;
    const writes: RejectedHit[] = [];
    const record = refusalRecorder(
      { recordRejectedHit: async (r) => void writes.push(r) },
      { now: () => clock },
    );
    const first = await Promise.all(Array.from({ length: 40 }, () => record(rejected)));
    expect(writes).toHaveLength(REFUSALS_RECORDED_PER_SECOND);
    expect(first.filter((r) => r === 'not-recorded')).toHaveLength(40 - REFUSALS_RECORDED_PER_SECOND);
    clock += 1000;
    expect(await record(rejected)).toBe('recorded');
    expect(writes).toHaveLength(REFUSALS_RECORDED_PER_SECOND + 1);
  });

  it.each(['signature_retired_key', 'signed_forbidden', 'signed_input'] as const)(
    'counts a refusal only a genuine URL can cause (%s) apart: forged junk to made-up surveys does not hide it',
    async (code) => {
      let clock = 120_000_000;
      const writes: RejectedHit[] = [];
      const record = refusalRecorder(
        { recordRejectedHit: async (r) => void writes.push(r) },
        { now: () => clock },
      );
      // A minute's worth of surveys named, and this second's budget used, by forgeries to made-up ids.
      for (let i = 0; i < REFUSED_SURVEYS_PER_MINUTE; i++) {
        await record({ ...rejected, surveyId: String(900_001 + i) });
        if (i % REFUSALS_RECORDED_PER_SECOND === REFUSALS_RECORDED_PER_SECOND - 1) clock += 1000;
      }
      for (let i = 0; i < REFUSALS_RECORDED_PER_SECOND; i++)
        await record({ ...rejected, surveyId: '900999' });
      expect(await record({ ...rejected, surveyId: '1001' })).toBe('not-recorded');
      // The marketplace's postback under the retired key is still counted, under its survey.
      const retired: RejectedHit = { ...rejected, code, surveyId: '1001' };
      expect(await record(retired)).toBe('recorded');
      expect(writes.at(-1)).toMatchObject({ code, surveyId: '1001' });
      // Bounded all the same: a flood of them (a replayed URL) is not a write each.
      const flood = await Promise.all(
        Array.from({ length: 2 * GENUINE_REFUSALS_PER_SECOND }, () => record(retired)),
      );
      expect(flood.filter((r) => r === 'recorded')).toHaveLength(GENUINE_REFUSALS_PER_SECOND - 1);
    },
  );

  it("counts a minute's refused postbacks under a bounded number of claimed surveys, the rest under none", async () => {
    let clock = 60_000_000;
    const writes: RejectedHit[] = [];
    const record = refusalRecorder(
      { recordRejectedHit: async (r) => void writes.push(r) },
      { now: () => clock },
    );
    // Made-up survey ids, a second apart (within the rate): the first ones keep theirs.
    for (let i = 0; i < REFUSED_SURVEYS_PER_MINUTE + 5 && i < 59; i++) {
      await record({ ...rejected, surveyId: String(1000 + i) });
      clock += 1000;
    }
    expect(writes.slice(0, REFUSED_SURVEYS_PER_MINUTE).every((w) => w.surveyId !== undefined)).toBe(true);
    expect(writes.slice(REFUSED_SURVEYS_PER_MINUTE).map((w) => w.surveyId)).toEqual(Array(5).fill(undefined));
    // A survey already named this minute keeps its name; the next minute names anew.
    await record({ ...rejected, surveyId: '1000' });
    expect(writes.at(-1)?.surveyId).toBe('1000');
    clock += 60_000;
    await record({ ...rejected, surveyId: '9999' });
    expect(writes.at(-1)?.surveyId).toBe('9999');
  });

  it('answers after its wait when the ledger hangs, and a failed write is only logged', async () => {
    vi.useFakeTimers();
    try {
      const hanging = refusalRecorder({ recordRejectedHit: () => new Promise(() => undefined) });
      const answer = hanging(rejected);
      await vi.advanceTimersByTimeAsync(REFUSAL_WAIT_MS);
      expect(await answer).toBe('pending');
    } finally {
      vi.useRealTimers();
    }
    const failing = refusalRecorder({
      recordRejectedHit: async () => {
        throw new Error('ProvisionedThroughputExceededException');
      },
    });
    expect(await failing(rejected)).toBe('failed');
  });
});
