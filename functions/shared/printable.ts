/**
 * Text that came from outside (pids, tokens, refusal reasons, marketplace fields) made safe to show: a control
 * character sent in a query parameter must read as text in a terminal or a log viewer, never move the cursor or
 * clear a screen. The CLI prints through it and the functions' logger writes every string field through it.
 */

import { createHash } from 'node:crypto';

// C0 controls (the line feed is let through below), DEL, and the C1 controls (U+009B is a complete escape sequence
// introducer); the bidirectional controls, which make text read in another order than it is written (a pid
// `abc\u202Efed` shows as `abcdef`); and every other character written to be invisible (format characters and the
// default-ignorable ones: a zero-width space, a soft hyphen, a word joiner, a filler; `victim-42\u200B` shows as
// `victim-42`); and every space but the space itself, and the line and paragraph separators (`a\u00A0b` shows as
// `a b`): an id shown so could pass for another.
const INVISIBLE =
  '\\p{Cf}\\p{Default_Ignorable_Code_Point}\\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000\\u2028\\u2029';
const CONTROLS = new RegExp(`[\\p{Cc}${INVISIBLE}]`, 'gu');
/** Whether a text holds any of them (no `g`: a test keeps no position between calls). */
const HAS_CONTROL = new RegExp(`[\\p{Cc}${INVISIBLE}]`, 'u');

/**
 * `\uXXXX`; past the 16-bit plane (a tag character) one for each half of its surrogate pair, as JSON writes them, so
 * that JSON escaped so (the CLI's `--json`) still parses.
 */
const escaped = (c: string) =>
  Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');

// A URL signature's value where it shows inside other text: `sig=` (or `sig%3D`, `sig%253D`, encoded once or twice
// more) and what follows up to the next separator. A sender that percent-encodes its separators sends the whole
// query as one parameter. Also a JSON field `"sig": "..."`.
const SIGNATURE = /(sig(?:=|%3D|%253D)|"sig"\s*:\s*")[^&\s"'<>]+/gi;

/**
 * The text with any URL signature in it concealed. A signature is the postback URL's credential: quoted in a
 * stored refusal, a log line or a health notice, it would let whoever reads them record successes.
 */
export function withoutSignatures(text: string): string {
  return /sig/i.test(text) ? text.replace(SIGNATURE, '$1[concealed]') : text;
}

/**
 * The text with each signature concealed behind a short mark of it (`sig=[concealed:3fa1c2]`, the start of its
 * SHA-256): where URLs are compared on screen, two signatures the same show the same mark, and none can be used.
 */
export function signaturesMarked(text: string): string {
  return /sig/i.test(text)
    ? text.replace(
        SIGNATURE,
        (match, name: string) => `${name}[concealed:${markOf(match.slice(name.length))}]`,
      )
    : text;
}
const markOf = (signature: string) => createHash('sha256').update(signature).digest('hex').slice(0, 6);

/**
 * The text with every control character but the line feed, and every bidirectional control or invisible character,
 * written as a `\uXXXX` escape.
 */
export function printable(text: string): string {
  return text.replace(CONTROLS, (c) => (c === '\n' ? c : escaped(c)));
}

/**
 * The text with every control character, the line feed too, and every bidirectional control or invisible character
 * written as a `\uXXXX` escape: for a value shown inside one line (an id in the CLI's listing, a cell of the HTML report), where a line
 * feed in a pid would start what reads as another row (a forged redirect chooses its pid).
 */
export function oneLine(text: string): string {
  // A backslash is written doubled, the escapes' own character: `victim-42\u200b` typed as text must not show as
  // the zero-width space's escape, nor `x\` followed by one as the text (another respondent's id shown the same).
  return text.replaceAll('\\', '\\\\').replace(CONTROLS, escaped);
}

/**
 * The text a `oneLine` form stands for (`\\` a backslash, `\uXXXX` the code unit), or undefined when it holds no
 * escape or one that is not of that form: an id copied from a listing and typed back into the CLI.
 */
export function fromOneLine(shown: string): string | undefined {
  if (!shown.includes('\\')) return undefined;
  let ok = true;
  const text = shown.replace(/\\(\\|u[0-9a-fA-F]{4}|[\s\S]?)/g, (_, sequence: string) => {
    if (sequence === '\\') return '\\';
    if (sequence.length === 5) return String.fromCharCode(Number.parseInt(sequence.slice(1), 16));
    ok = false;
    return sequence;
  });
  return ok ? text : undefined;
}

/**
 * A value written as one word of a POSIX shell command (single quotes, a quote inside as `'\''`): pasted, a pid
 * like `$(id)` or `` `id` `` is an argument, never a command. Used where a hint prints a command with an id that
 * came from outside (a forged redirect chooses its pid). A value holding a control or bidirectional character (a tab
 * or line end a panel's import left in its ids), which `printable` would write as text on its way to the reader, is
 * written `$'...'` with the shell's own escapes (bash, zsh, ksh, POSIX.1-2024), so that the pasted word is the pid.
 */
export function shellWord(value: string): string {
  // Not `=` or `%` either: a signature concealed later (`sig=...` to `sig=[concealed]`) must stay inside quotes.
  if (/^[\w@+:,./-]+$/.test(value)) return value;
  if (!HAS_CONTROL.test(value)) return `'${value.replaceAll("'", "'\\''")}'`;
  // A backslash and a quote by their hex escapes, not `\\` and `\'`: concealing a signature after (`sig=` up to a quote
  // or a space) may take an escape whole, never a backslash alone, which would unquote the rest of the word.
  return `$'${value.replace(/[\\']/g, (c) => (c === '\\' ? '\\x5c' : '\\x27')).replace(CONTROLS, shellEscape)}'`;
}
/** `\xHH` for an ASCII control, `\uHHHH` for the others, `\UHHHHHHHH` past the 16-bit plane (the shell's forms). */
const shellEscape = (c: string) => {
  const code = c.codePointAt(0) as number;
  if (code < 0x80) return `\\x${code.toString(16).padStart(2, '0')}`;
  return code > 0xffff ? `\\U${code.toString(16).padStart(8, '0')}` : escaped(c);
};
