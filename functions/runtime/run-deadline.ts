/**
 * When a scheduled run must be done calling out: set by its handler at each invocation (a little before the
 * Lambda's own limit), read by the clients it built at start-up. A call in flight then gives up rather than the
 * function being killed mid-survey, which loses the run's figures and, for reconciliation, counts as the survey's
 * death (reconciler.ts `stall`).
 */
export interface RunDeadline {
  set(at: Date | undefined): void;
  /** Epoch ms, or undefined outside a run. */
  readonly stopAt: () => number | undefined;
}

/** How long before the Lambda's limit the calls of a run stop. */
export const CALLS_STOP_BEFORE_LIMIT_MS = 10_000;

export function runDeadline(): RunDeadline {
  let at: number | undefined;
  return {
    set: (next) => {
      at = next?.getTime();
    },
    stopAt: () => at,
  };
}

/** The instant calls must stop by in an invocation with `remainingMs` left. */
export const callsStopAt = (remainingMs: number, now = Date.now()): Date =>
  new Date(now + remainingMs - CALLS_STOP_BEFORE_LIMIT_MS);
