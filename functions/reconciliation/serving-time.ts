/**
 * Whose rows a survey's are: the time the survey was this stack's, from its registration (`servingSince`, the
 * removals between applies in `notServing`, an open one in `notServingSince` or the removal itself). A row that
 * ended outside it, nothing here heard of, went to another system's URLs (the marketplace sends a respondent on,
 * and its postback, to the URLs the survey has when the respondent finishes): not this stack's to judge or count.
 */
import type { SurveyRegistration } from '../ledger/ledger-store';
import { filedAt, type Transaction } from '../marketplace/marketplace-records';

/**
 * How far a row's end may fall outside the time a survey was this stack's and still be its: the marketplace's
 * "PST" strings and the two clocks apart (`ATTEMPT_LEAD_MS` is the same allowance for one attempt).
 */
const SERVING_MARGIN_MS = 10 * 60_000;
const HOUR_MS = 3_600_000;

const shifted = (at: string, ms: number) => new Date(Date.parse(at) + ms).toISOString();

/**
 * Whether a row ended while the survey was this stack's: completed, or, without a completion time, clicked in. A
 * registration older than the fields has no bound; one whose applies the marketplace all refused (`neverTaken`)
 * none yet. A completion in the autumn change's repeated hour is read as the later of its two instants: the row is
 * this stack's if the earlier one is (a complete lost then is not hidden for an hour's reading).
 */
export function servedHere(registration: SurveyRegistration | undefined): (row: Transaction) => boolean {
  const from = registration?.servingSince && shifted(registration.servingSince, -SERVING_MARGIN_MS);
  // Removed (or applied again since without the marketplace taking it): until then.
  const until = registration?.state === 'removed' ? registration.removedAt : registration?.notServingSince;
  const to = until && shifted(until, SERVING_MARGIN_MS);
  const never = registration?.neverTaken === true && registration.servingSince === undefined;
  // The times it was removed between two applies, less the same margin each side.
  const gaps = (registration?.notServing ?? []).map((gap) => ({
    from: shifted(gap.from, SERVING_MARGIN_MS),
    to: shifted(gap.to, -SERVING_MARGIN_MS),
  }));
  const within = (at: string) =>
    !never &&
    (from === undefined || at >= from) &&
    (to === undefined || at < to) &&
    !gaps.some((gap) => at >= gap.from && at < gap.to);
  return (row) => {
    const ended = row.completedAt?.utc ?? filedAt(row);
    if (ended === undefined || within(ended)) return true;
    return row.completedAt?.ambiguous === true && within(shifted(row.completedAt.utc, -HOUR_MS));
  };
}
