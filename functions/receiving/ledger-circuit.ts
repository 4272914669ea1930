/**
 * A container's memory that the ledger just failed a hit. While the ledger hangs or throttles, every hit that waits
 * out its budget holds a Lambda execution for one to two seconds: at the receivers' reserved concurrency that caps
 * them at a few dozen hits a second, and API Gateway answers the hits past it 500 (Lambda throttled), unrecorded and
 * unbuffered. So for a few seconds after a hit's ledger write failed, hits go straight to the buffer (milliseconds);
 * then one hit tries the ledger again, and its answer opens or closes the way for the rest. A hit sent to the buffer
 * instead of the ledger is recorded all the same, by the drainer, as every buffered hit is.
 */

/** How long after a failed ledger write a container's hits go straight to the buffer. */
export const LEDGER_PAUSE_MS = 5_000;

export interface LedgerCircuit {
  /** Whether the ledger failed moments ago: a hit goes to the buffer without trying it. */
  readonly paused: () => boolean;
  /** The ledger failed a hit (did not answer in time, or answered unavailable). */
  readonly failed: () => void;
  /** The ledger took a hit. */
  readonly succeeded: () => void;
}

export function ledgerCircuit(pauseMs = LEDGER_PAUSE_MS, now: () => number = Date.now): LedgerCircuit {
  let pausedUntil = 0;
  return {
    paused: () => now() < pausedUntil,
    failed: () => {
      pausedUntil = now() + pauseMs;
    },
    succeeded: () => {
      pausedUntil = 0;
    },
  };
}
