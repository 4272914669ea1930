import { describe, expect, it } from 'vitest';
import { parseAmount, sumAmounts } from '../../functions/shared/money';

describe('amounts', () => {
  it.each([
    ['1.25', '1.25'],
    ['1.5', '1.50'],
    ['7', '7.00'],
    [0, '0.00'],
    [1.1, '1.10'],
    [2.675, '2.675'],
    ['$3.40', '3.40'],
    ['0012.30', '12.30'],
    // A sender's float arithmetic: the amount, not its binary noise (and never a row refused for it).
    [0.1 + 0.2, '0.30'],
    [1.2000000000000002, '1.20'],
    [1.1 * 3, '3.30'],
    ['0.30000000000000004', '0.30'],
    ['1.2345675', '1.234568'],
    ['0.9999999', '1.00'],
    [3 * 1.15, '3.45'],
  ])('read %j as %s', (raw, expected) => {
    expect(parseAmount(raw)).toBe(expected);
  });

  it.each([
    ['abc'],
    [''],
    [-1],
    ['-1.00'],
    [Number.NaN],
    [null],
    [undefined],
    [{}],
    ['1,25'],
    [1e21],
    // More decimals than any float prints: not noise, and not money.
    ['2.67499999999999982236431605997495353221893310546875'],
  ])('refuse %j, never reading it as zero', (raw) => {
    expect(parseAmount(raw)).toBeUndefined();
  });

  it('sum exactly where floats would not', () => {
    expect(sumAmounts(Array.from({ length: 10 }, () => '0.10'))).toBe('1.00');
    expect(sumAmounts(['0.10', '0.20'])).toBe('0.30');
    expect(sumAmounts(['1.25', '2.675'])).toBe('3.925');
    expect(sumAmounts([])).toBe('0.00');
    expect(sumAmounts(Array.from({ length: 1000 }, () => '1.01'))).toBe('1010.00');
  });

  it('sum to a negative total with its sign in front', () => {
    expect(sumAmounts(['-0.05'])).toBe('-0.05');
    expect(sumAmounts(['1.00', '-1.25'])).toBe('-0.25');
    expect(sumAmounts(['-1.5', '1.5'])).toBe('0.00');
  });
});
