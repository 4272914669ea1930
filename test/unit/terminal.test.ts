/** What the CLI prints is safe for a terminal: control characters from outside show as text. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { oneLine, printable, say, sayJson } from '../../functions/cli/terminal';
import { csvCell } from '../../functions/finance/report-csv';
import {
  fromOneLine,
  shellWord,
  signaturesMarked,
  withoutSignatures,
} from '../../functions/shared/printable';

afterEach(() => vi.restoreAllMocks());

describe('printable', () => {
  it('writes ANSI escapes, carriage returns, DEL and C1 controls as \\u escapes, keeping line feeds', () => {
    expect(printable('a\u001b[2Jb')).toBe('a\\u001b[2Jb');
    expect(printable('x\ry\tz\u007f\u009b31m')).toBe('x\\u000dy\\u0009z\\u007f\\u009b31m');
    expect(printable('line one\nline two')).toBe('line one\nline two');
    expect(printable('dGVzdC0x+/Q== a@b.com 12345|x user 1 é 😀')).toBe(
      'dGVzdC0x+/Q== a@b.com 12345|x user 1 é 😀',
    );
  });

  it('writes bidirectional controls as escapes, so an id cannot show in another order than it is written', () => {
    expect(printable('pid-abc\u202efed')).toBe('pid-abc\\u202efed');
    expect(printable('\u2066x\u2069\u200f\u061c')).toBe('\\u2066x\\u2069\\u200f\\u061c');
    // Right-to-left text itself is text.
    expect(printable('מספר 12')).toBe('מספר 12');
  });

  it("writes invisible characters as escapes, so an id cannot show as another respondent's", () => {
    // A zero-width space, a soft hyphen, a word joiner, a byte-order mark, a Hangul filler, a tag character.
    for (const [hidden, shown] of [
      ['\u200b', '\\u200b'],
      ['\u00ad', '\\u00ad'],
      ['\u2060', '\\u2060'],
      ['\ufeff', '\\ufeff'],
      ['\u3164', '\\u3164'],
      ['\u{e0041}', '\\udb40\\udc41'],
    ])
      expect(printable(`victim-42${hidden}`)).toBe(`victim-42${shown}`);
    // In a CSV cell too, and in a command to paste, where the shell's own escape makes the same pid.
    expect(csvCell('victim-42\u200b\tx')).toBe('victim-42\\u200b\\u0009x');
    // An id that holds the escape's text itself shows apart from the one that holds the character.
    expect(oneLine('victim-42\\u200b')).toBe('victim-42\\\\u200b');
    expect(oneLine('victim-42\\u200b')).not.toBe(oneLine('victim-42\u200b'));
    expect(oneLine('x\\\u200b')).not.toBe(oneLine('x\\u200b'));
    expect(csvCell('C:\\data')).toBe('C:\\\\data');
    expect(shellWord('victim-42\u200b')).toBe("$'victim-42\\u200b'");
    expect(shellWord('victim-42\u{e0041}')).toBe("$'victim-42\\U000e0041'");
    // JSON escaped so still parses to the same value (the CLI's --json): a tag character as its surrogate pair.
    const pid = 'victim-42\u{e0041}\u200b';
    expect(JSON.parse(printable(JSON.stringify({ pid })))).toEqual({ pid });
    // Visible text of every script stays.
    expect(printable('José 東京 😀 ÿ')).toBe('José 東京 😀 ÿ');
    // Every space but the space itself, and the line and paragraph separators: `a\u00a0b` would show as `a b`.
    for (const [spaced, shown] of [
      ['\u00a0', '\\u00a0'],
      ['\u2003', '\\u2003'],
      ['\u3000', '\\u3000'],
      ['\u2028', '\\u2028'],
      ['\u2029', '\\u2029'],
    ])
      expect(oneLine(`a${spaced}b`)).toBe(`a${shown}b`);
    expect(oneLine('a b')).toBe('a b');
  });
});

describe('fromOneLine', () => {
  it('reads an id as a listing printed it back into the id: every shape, none mistaken for another', () => {
    const pids = [
      'a\tb',
      'a\r\nb',
      'a\u0007b',
      '\ufeffabc',
      'a\u200bb',
      'abc\u202efed',
      'u👩\u200d👩\u200d👧',
      'a\\u200b',
      'C:\\data\\',
      'a\u00a0b',
      'victim-42\u{e0041}',
    ];
    for (const pid of pids) expect(fromOneLine(oneLine(pid)), JSON.stringify(pid)).toBe(pid);
    // Nothing to read in a pid without a backslash; none in one whose backslash starts no escape of the form.
    expect(fromOneLine('plain')).toBeUndefined();
    expect(fromOneLine('a\\x41')).toBeUndefined();
    expect(fromOneLine('ends\\')).toBeUndefined();
  });
});

describe('say and sayJson', () => {
  it('print nothing a terminal would act on, and JSON that still parses to the same value', () => {
    const lines: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((line: string) => void lines.push(line));
    const reason = 'bad sig\u001b[2J\u001b[H\u009b31m';
    say(`rejected: ${reason}`);
    sayJson({ reason });
    const controls = (line: string) =>
      [...line].filter((c) => {
        const code = c.codePointAt(0) as number;
        return (code < 0x20 && code !== 0x0a) || (code >= 0x7f && code <= 0x9f);
      });
    for (const line of lines) expect(controls(line)).toEqual([]);
    expect(JSON.parse(lines[1] as string)).toEqual({ reason });
  });
});

describe('withoutSignatures', () => {
  it('conceals a signature quoted in text, however many times its separator was encoded, and nothing else', () => {
    const sig = 'Ab3_dE-9xYz0AbCdEfGhIjKlMnOpQrStUvWxYz012345';
    expect(withoutSignatures(`p1&token=t&kid=k1&sig=${sig}`)).toBe('p1&token=t&kid=k1&sig=[concealed]');
    expect(withoutSignatures(`p1%26kid%3Dk1%26sig%3D${sig}`)).toBe('p1%26kid%3Dk1%26sig%3D[concealed]');
    expect(withoutSignatures(`p1%2526sig%253D${sig}`)).toBe('p1%2526sig%253D[concealed]');
    expect(withoutSignatures(`SIG=${sig}&pid=x`)).toBe('SIG=[concealed]&pid=x');
    expect(withoutSignatures(`{"kid":"k1","sig": "${sig}"}`)).toBe('{"kid":"k1","sig": "[concealed]"}');
    // Text that merely holds the letters is left as it is.
    expect(withoutSignatures('design=5; signal strength')).toBe('design=5; signal strength');
  });
});

describe('signaturesMarked', () => {
  it('shows each signature as a mark of it, the same for the same, and leaves the text around it as it is', () => {
    const sig = 'Ab3_dE-9xYz0AbCdEfGhIjKlMnOpQrStUvWxYz012345';
    const marked = signaturesMarked(`a?kid=k1&sig=${sig} and b?sig=${sig}&pid=x`);
    expect(marked).toMatch(/^a\?kid=k1&sig=\[concealed:([0-9a-f]{6})\] and b\?sig=\[concealed:\1\]&pid=x$/);
    expect(marked).not.toContain(sig);
    expect(signaturesMarked(`sig=${sig.slice(1)}`)).not.toBe(signaturesMarked(`sig=${sig}`));
    // One concealed already, in quotes (a stored error): the quote stays, and so does what follows.
    expect(signaturesMarked('invalid url "https://h/p?kid=k1&sig=[concealed]" rejected')).toMatch(
      /^invalid url "https:\/\/h\/p\?kid=k1&sig=\[concealed:[0-9a-f]{6}\]" rejected$/,
    );
  });
});

describe('oneLine', () => {
  it('writes a line feed as its escape too: a pid holding one cannot start what reads as another row of a listing', () => {
    const pid = 'x  token t  postback success\n2026-11-20T10:00:00.000Z  pid victim';
    expect(oneLine(pid)).toBe('x  token t  postback success\\u000a2026-11-20T10:00:00.000Z  pid victim');
    expect(oneLine('abc\u202efed\r')).toBe('abc\\u202efed\\u000d');
  });
});
