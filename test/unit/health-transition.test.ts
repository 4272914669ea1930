/**
 * When a survey's health is written and notified, and the spells finance lists it as failing.
 */
import { describe, expect, it } from 'vitest';
import type { HealthEvaluation, HealthReason } from '../../functions/health/health-rules';
import { failingSpells, healthChange } from '../../functions/health/health-transition';
import {
  FAILING_HISTORY_LIMIT,
  HEALTH_HISTORY_LIMIT,
  type SurveyHealthRecord,
} from '../../functions/ledger/ledger-store';

const reason = (
  code: HealthReason['code'],
  severity: HealthReason['severity'],
  detail = 'x',
): HealthReason => ({
  code,
  severity,
  detail,
});
const ok: HealthEvaluation = { state: 'ok', reasons: [] };
const failing = (detail = 'x'): HealthEvaluation => ({
  state: 'failing',
  reasons: [reason('postbacks_stopped', 'failing', detail)],
});
const t = (minute: number) => new Date(Date.UTC(2026, 2, 10, 12, minute));

/** Applies evaluations one after the other, as the runs would. */
function replay(...steps: [number, HealthEvaluation][]) {
  let record: SurveyHealthRecord | undefined;
  const notices: (string | undefined)[] = [];
  for (const [minute, evaluation] of steps) {
    const change = healthChange('1001', record, evaluation, t(minute));
    if (change) {
      record = change.record;
      notices.push(change.notice);
    }
  }
  return { record, notices };
}

describe('healthChange', () => {
  it('writes nothing for a survey that is and was ok', () => {
    expect(healthChange('1001', undefined, ok, t(0))).toBeUndefined();
  });

  it('notifies once on turning failing, not while it stays failing (even as counts change), once on recovery', () => {
    const { record, notices } = replay([0, failing('5 redirects')], [5, failing('9 redirects')], [10, ok]);
    expect(notices).toEqual(['failing', 'recovered']);
    expect(record).toMatchObject({ state: 'ok', since: t(10).toISOString(), revision: 2 });
  });

  it('stores new reason codes while failing, keeping since, without a notice', () => {
    const both: HealthEvaluation = {
      state: 'failing',
      reasons: [reason('postbacks_stopped', 'failing'), reason('refused_postbacks', 'warning')],
    };
    const { record, notices } = replay([0, failing()], [5, both]);
    expect(notices).toEqual(['failing', undefined]);
    expect(record).toMatchObject({ since: t(0).toISOString(), revision: 2 });
    expect(record?.history.at(-1)).toEqual({
      at: t(5).toISOString(),
      from: 'failing',
      to: 'failing',
      reasons: ['postbacks_stopped', 'refused_postbacks'],
      failing: ['postbacks_stopped'],
    });
  });

  it('notifies a failing survey once when it fails for a reason new to the spell, not when one comes back', () => {
    const drift: HealthEvaluation = { state: 'failing', reasons: [reason('configuration_drift', 'failing')] };
    const losing: HealthEvaluation = {
      state: 'failing',
      reasons: [reason('configuration_drift', 'failing'), reason('refused_postbacks', 'failing')],
    };
    const steps: [number, HealthEvaluation][] = [
      [0, drift],
      [5, losing],
      [10, drift],
      [15, losing],
    ];
    let record: SurveyHealthRecord | undefined;
    const changes = steps.flatMap(([minute, evaluation]) => {
      const change = healthChange('1001', record, evaluation, t(minute));
      record = change?.record ?? record;
      return change ? [[change.notice, change.added]] : [];
    });
    expect(changes).toEqual([
      ['failing', undefined],
      ['worse', ['refused_postbacks']],
      [undefined, undefined],
      [undefined, undefined],
    ]);
    // A new spell starts afresh.
    const { notices } = replay([0, drift], [5, losing], [10, ok], [15, drift], [20, losing]);
    expect(notices).toEqual(['failing', 'worse', 'recovered', 'failing', 'worse']);
    // Finance's spell names every reason it failed for.
    expect(failingSpells(record as SurveyHealthRecord, t(0), t(60))).toEqual([
      { surveyId: '1001', from: t(0).toISOString(), reasons: ['configuration_drift', 'refused_postbacks'] },
    ]);
  });

  it('a reason it only warned of, once it fails, is new to the spell: the case of a key retired under a drifting survey', () => {
    const drift = reason('configuration_drift', 'failing');
    const warned: HealthEvaluation = {
      state: 'failing',
      reasons: [drift, reason('refused_postbacks', 'warning')],
    };
    const losing: HealthEvaluation = {
      state: 'failing',
      reasons: [drift, reason('refused_postbacks', 'failing')],
    };
    const { record, notices } = replay(
      [0, { state: 'failing', reasons: [drift] }],
      [5, warned],
      [10, losing],
      [15, warned],
      [20, losing],
    );
    expect(notices).toEqual(['failing', undefined, 'worse', undefined, undefined]);
    // Finance's spell names what it failed for, not what it only warned of.
    expect(failingSpells(record as SurveyHealthRecord, t(0), t(60))[0]?.reasons).toEqual([
      'configuration_drift',
      'refused_postbacks',
    ]);
    expect(
      failingSpells(
        replay([0, { state: 'failing', reasons: [drift] }], [5, warned]).record as SurveyHealthRecord,
        t(0),
        t(60),
      )[0]?.reasons,
    ).toEqual(['configuration_drift']);
  });

  it('stores ok <-> warning without a notice; leaving failing for warning is a recovery', () => {
    const warning: HealthEvaluation = { state: 'warning', reasons: [reason('refused_postbacks', 'warning')] };
    expect(replay([0, warning], [5, ok]).notices).toEqual([undefined, undefined]);
    expect(replay([0, failing()], [5, warning]).notices).toEqual(['failing', 'recovered']);
  });

  it(`keeps the last ${HEALTH_HISTORY_LIMIT} transitions, and before them at most ${FAILING_HISTORY_LIMIT} into or out of failing`, () => {
    const steps = Array.from({ length: 100 }, (_, i): [number, HealthEvaluation] => [
      i,
      i % 2 ? ok : failing(),
    ]);
    const { record } = replay(...steps);
    expect(record?.history).toHaveLength(HEALTH_HISTORY_LIMIT + FAILING_HISTORY_LIMIT);
    expect(record?.history.at(-1)?.at).toBe(t(99).toISOString());
  });

  it('keeps a failing spell through any number of ok <-> warning changes after it: finance still lists it', () => {
    const warning: HealthEvaluation = { state: 'warning', reasons: [reason('refused_postbacks', 'warning')] };
    const flaps = Array.from({ length: 40 }, (_, i): [number, HealthEvaluation] => [
      20 + i,
      i % 2 ? ok : warning,
    ]);
    const { record } = replay([0, failing()], [10, ok], ...flaps);
    expect(record?.history).toHaveLength(2 + HEALTH_HISTORY_LIMIT);
    expect(
      failingSpells(record as SurveyHealthRecord, t(0), t(100)).map((s) => [s.from, s.to, s.reasons]),
    ).toEqual([[t(0).toISOString(), t(10).toISOString(), ['postbacks_stopped']]]);
  });

  it('remembers the latest postback it knows of', () => {
    const first = healthChange('1001', undefined, failing(), t(0), '2026-03-10T11:00:00.000Z');
    const next = healthChange('1001', first?.record, ok, t(5));
    expect(next?.record.lastPostbackAt).toBe('2026-03-10T11:00:00.000Z');
  });
});

describe('failingSpells', () => {
  const { record } = replay([0, failing()], [10, ok], [20, failing()]);
  const spells = (from: number, to: number) =>
    failingSpells(record as SurveyHealthRecord, t(from), t(to)).map((s) => [s.from, s.to]);

  it('lists each spell overlapping the period, the open one without an end', () => {
    expect(spells(0, 60)).toEqual([
      [t(0).toISOString(), t(10).toISOString()],
      [t(20).toISOString(), undefined],
    ]);
  });

  it('leaves out a spell that ended at the period start and one that began at its end', () => {
    expect(spells(10, 20)).toEqual([]);
    expect(spells(9, 10)).toEqual([[t(0).toISOString(), t(10).toISOString()]]);
  });

  it('counts a survey failing since before the period as failing in it', () => {
    expect(spells(40, 50)).toEqual([[t(20).toISOString(), undefined]]);
  });

  it('a spell that began before the history kept has no start', () => {
    const trimmed = {
      ...(record as SurveyHealthRecord),
      history: (record as SurveyHealthRecord).history.slice(1),
    };
    expect(failingSpells(trimmed, t(0), t(5)).map((s) => s.from)).toEqual([undefined]);
  });
});
