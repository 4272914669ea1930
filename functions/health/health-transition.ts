/**
 * What a fresh evaluation changes in a survey's stored health, and when a survey was failing: pure, so the
 * rules for writing, notifying and reporting are tested without a store.
 *
 * A record is written only when the state or its reason codes change (a new detail with the same codes, such as
 * a higher count, is not a change: writing it every run would cost a write per survey per run). Notices go out
 * once per transition into `failing`, once when a failing survey fails for a reason new to its spell, and once when a
 * survey leaves it; `ok` <-> `warning` is stored, not sent.
 */
import type { HealthTransition, SurveyHealthRecord } from '../ledger/ledger-store';
import { FAILING_HISTORY_LIMIT, HEALTH_HISTORY_LIMIT } from '../ledger/ledger-store';
import type { HealthEvaluation, HealthState } from './health-rules';

export interface HealthChange {
  readonly record: SurveyHealthRecord;
  readonly from: HealthState;
  readonly to: HealthState;
  /**
   * `failing`: the survey turned failing; `worse`: failing already, it fails for a reason it had not failed for in
   * this spell (a key retired under surveys still on it while they failed for drift); `recovered`: it stopped.
   */
  readonly notice?: 'failing' | 'worse' | 'recovered' | undefined;
  /** With `worse`: the failing reasons it did not have before in this spell. */
  readonly added?: readonly string[] | undefined;
}

const codesOf = (reasons: readonly { code: string }[]) => reasons.map((r) => r.code).sort();
const failingOf = (reasons: readonly { code: string; severity: string }[]) =>
  codesOf(reasons.filter((r) => r.severity === 'failing'));
/** The codes a stored transition failed for (one stored before they were kept: its codes, when it was failing). */
const failedFor = (t: HealthTransition): readonly string[] =>
  t.failing ?? (t.to === 'failing' ? t.reasons : []);

/** The record to write for a survey's new evaluation, or undefined when neither state nor reason codes changed. */
export function healthChange(
  surveyId: string,
  previous: SurveyHealthRecord | undefined,
  evaluation: HealthEvaluation,
  now: Date,
  lastPostbackAt?: string,
): HealthChange | undefined {
  const from = previous?.state ?? 'ok';
  const to = evaluation.state;
  const codes = codesOf(evaluation.reasons);
  const failing = failingOf(evaluation.reasons);
  // A reason turning from warning to failing under the same code is a change too.
  if (
    from === to &&
    codes.join() === codesOf(previous?.reasons ?? []).join() &&
    failing.join() === failingOf(previous?.reasons ?? []).join()
  )
    return undefined;
  const at = now.toISOString();
  const transition: HealthTransition = { at, from, to, reasons: codes, failing };
  const known = [lastPostbackAt, previous?.lastPostbackAt].filter((t): t is string => !!t).sort();
  // Failing still, for a reason it has not failed for since the spell began (a reason it only warned of counts as
  // new once it fails): said, or a survey already failing for one reason (drift) would start losing postbacks for
  // another without anyone told.
  const spellCodes = new Set([
    ...failingOf(previous?.reasons ?? []),
    ...(previous?.history ?? []).filter((h) => previous && h.at >= previous.since).flatMap(failedFor),
  ]);
  const added = from === 'failing' && to === 'failing' ? failing.filter((code) => !spellCodes.has(code)) : [];
  return {
    from,
    to,
    notice:
      to === 'failing' && from !== 'failing'
        ? 'failing'
        : from === 'failing' && to !== 'failing'
          ? 'recovered'
          : added.length > 0
            ? 'worse'
            : undefined,
    ...(added.length > 0 ? { added } : {}),
    record: {
      surveyId,
      state: to,
      since: from === to && previous ? previous.since : at,
      reasons: evaluation.reasons,
      ...(known.length > 0 ? { lastPostbackAt: known.at(-1) } : {}),
      history: keptHistory([...(previous?.history ?? []), transition]),
      updatedAt: at,
      revision: (previous?.revision ?? 0) + 1,
    },
  };
}

/**
 * The last `HEALTH_HISTORY_LIMIT` transitions, and before them the newest `FAILING_HISTORY_LIMIT` of those into, within
 * or out of failing: the spells finance lists outlast any number of ok <-> warning changes after them.
 */
function keptHistory(history: readonly HealthTransition[]): HealthTransition[] {
  if (history.length <= HEALTH_HISTORY_LIMIT) return [...history];
  const older = history
    .slice(0, -HEALTH_HISTORY_LIMIT)
    .filter((t) => t.from === 'failing' || t.to === 'failing')
    .slice(-FAILING_HISTORY_LIMIT);
  return [...older, ...history.slice(-HEALTH_HISTORY_LIMIT)];
}

/** A stretch of time a survey was failing in a period, as finance lists it. */
export interface FailingSpell {
  readonly surveyId: string;
  /** When it turned failing; undefined when that is older than the history kept. */
  readonly from?: string | undefined;
  /** When it stopped failing; undefined while it still is. */
  readonly to?: string | undefined;
  /** The reason codes it failed for in the spell: those it turned failing with, and any it failed for later. */
  readonly reasons: readonly string[];
}

/**
 * The spells a survey was failing that overlap [start, end): from its transitions, plus its current state (a
 * survey failing since before the period start was failing in it).
 */
export function failingSpells(record: SurveyHealthRecord, start: Date, end: Date): FailingSpell[] {
  const spells: { from?: string; to?: string; reasons: readonly string[] }[] = [];
  let open: { from?: string; reasons: readonly string[] } | undefined;
  const [first] = record.history;
  // The oldest transition kept leaves failing: the spell began before the history.
  if (first && first.from === 'failing') open = { reasons: [] };
  for (const t of record.history) {
    if (t.to === 'failing' && t.from !== 'failing') open = { from: t.at, reasons: failedFor(t) };
    // Failing for more reasons as the spell goes on: each one it failed for in it (not those it only warned of).
    else if (t.to === 'failing' && open)
      open = { ...open, reasons: [...new Set([...open.reasons, ...failedFor(t)])].sort() };
    if (t.from === 'failing' && t.to !== 'failing' && open) {
      spells.push({ ...open, to: t.at });
      open = undefined;
    }
  }
  if (record.state === 'failing')
    spells.push(open ?? { from: record.since, reasons: failingOf(record.reasons) });
  return spells
    .filter(
      (s) =>
        (s.from === undefined || Date.parse(s.from) < end.getTime()) &&
        (s.to === undefined || Date.parse(s.to) > start.getTime()),
    )
    .map((s) => ({ surveyId: record.surveyId, ...s }));
}
