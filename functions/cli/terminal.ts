/**
 * Everything the CLI prints goes through here, because much of it came from outside (pids, tokens, refusal
 * reasons, marketplace fields): a control character sent in a query parameter must show as text, never move the
 * cursor or clear an operator's screen. Line breaks of the CLI's own layout are kept.
 */

import { oneLine, printable } from '../shared/printable';

export { oneLine, printable };

/** Prints one line (or block) of human-readable output. */
export function say(text: string): void {
  console.log(printable(text));
}

/**
 * Prints JSON. JSON.stringify escapes C0 controls but not DEL or C1; escaping them keeps the JSON valid (they can
 * only stand inside strings) and the terminal safe.
 */
export function sayJson(value: unknown): void {
  console.log(printable(JSON.stringify(value, null, 2)));
}

/** Prints an error or progress note to stderr, escaped like everything else. */
export function complain(text: string): void {
  console.error(printable(text));
}
