/**
 * Money as exact decimal strings. The marketplace writes CPI as "1.25", or as the number 0; nothing here ever
 * passes an amount through a float's arithmetic.
 */

const DECIMAL = /^(\d{1,12})(?:\.(\d{1,6}))?$/;

/**
 * Reads an amount the marketplace sent (a decimal string, or a JSON number) as a decimal string with at least
 * two decimals: "1.5" -> "1.50", 0 -> "0.00". Undefined when it is not a non-negative amount.
 */
export function parseAmount(value: unknown): string | undefined {
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) return undefined;
    // A JSON number's shortest round-trip form is the literal the sender wrote, for any amount of money.
    text = String(value);
    if (/e/i.test(text)) return undefined;
  } else if (typeof value === 'string') {
    text = value.trim().replace(/^\$/, '');
  } else {
    return undefined;
  }
  // More decimals than money has is the binary noise of a sum the sender made in floats (0.1 + 0.2 is
  // 0.30000000000000004, as a number or written out as a string): the amount it stands for is the nearest
  // millionth, rounded half up on the decimal digits themselves.
  const noisy = /^(\d{1,12})\.(\d{7,20})$/.exec(text);
  if (noisy) text = nearestMillionth(noisy[1] as string, noisy[2] as string);
  const match = DECIMAL.exec(text);
  if (!match) return undefined;
  const whole = String(BigInt(match[1] as string));
  const fraction = (match[2] ?? '').padEnd(2, '0');
  return `${whole}.${fraction}`;
}

/** Exact sum of decimal amounts, with as many decimals as the most precise of them (at least two). */
export function sumAmounts(amounts: Iterable<string>): string {
  let scale = 2;
  const parts: [bigint, number][] = [];
  for (const amount of amounts) {
    const [whole = '0', fraction = ''] = amount.split('.');
    scale = Math.max(scale, fraction.length);
    parts.push([BigInt(whole + fraction), fraction.length]);
  }
  let total = 0n;
  for (const [units, digits] of parts) total += units * 10n ** BigInt(scale - digits);
  // The sign apart from the digits: a negative total (a credit, a difference) reads -0.05, not 0.-5.
  const text = (total < 0n ? -total : total).toString().padStart(scale + 1, '0');
  return `${total < 0n ? '-' : ''}${text.slice(0, -scale)}.${text.slice(-scale)}`;
}

/** Whether two decimal amounts are the same number ("1.5" and "1.50" are), compared exactly. */
export function sameAmount(a: string, b: string): boolean {
  const canonical = (amount: string) => {
    const parsed = parseAmount(amount);
    return parsed?.replace(/\.?0+$/, '') ?? `invalid:${amount}`;
  };
  return canonical(a) === canonical(b);
}

/** `whole.fraction` rounded half up to six decimals, exactly (digits, not floats); trailing zeros dropped. */
function nearestMillionth(whole: string, fraction: string): string {
  const up = Number(fraction[6]) >= 5 ? 1n : 0n;
  const micros = BigInt(whole + fraction.slice(0, 6)) + up;
  const digits = micros.toString().padStart(7, '0');
  const decimals = digits.slice(-6).replace(/0+$/, '');
  return `${digits.slice(0, -6)}${decimals ? `.${decimals}` : ''}`;
}
