/**
 * Everything the CLI prints goes through here, because much of it came from outside (pids, tokens, refusal
 * reasons, marketplace fields): a control character sent in a query parameter must show as text, never move the
 * cursor or clear an operator's screen. Line breaks of the CLI's own layout are kept.
 */

// C0 controls but the line feed, DEL, and the C1 controls (U+009B is a complete escape sequence introducer).
const isControl = (code: number) => (code < 0x20 && code !== 0x0a) || (code >= 0x7f && code <= 0x9f);

/** The text with every control character but the line feed written as a `\uXXXX` escape. */
export function printable(text: string): string {
  let out = '';
  for (const c of text) {
    const code = c.codePointAt(0) as number;
    out += isControl(code) ? `\\u${code.toString(16).padStart(4, '0')}` : c;
  }
  return out;
}

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
