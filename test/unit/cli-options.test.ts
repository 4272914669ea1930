/** The operator CLI's option parsers: a bad value is refused naming what is accepted, before anything runs. */
import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { attemptCommand } from '../../functions/cli/attempt-command';
import { attemptsCommand } from '../../functions/cli/attempts-command';
import {
  dayOption,
  methodOfVariable,
  refuseRepeatedOptions,
  wholeNumberOption,
} from '../../functions/cli/options';
import { reconcileCommand } from '../../functions/cli/reconcile-command';
import { reportCommand } from '../../functions/cli/report-command';
import { urlsCommand } from '../../functions/cli/urls-command';

describe('whole number options', () => {
  it.each(['abc', '-5', '1.5', '99999999999999', ''])('refuse %j', (value) => {
    expect(() => wholeNumberOption(0, 86_400)(value)).toThrow(InvalidArgumentError);
    expect(() => wholeNumberOption(0, 86_400)(value)).toThrow('must be a whole number from 0 to 86400');
  });

  it('say what is wrong as a sentence of its own, as commander prints it after "is invalid."', () => {
    expect(() => wholeNumberOption(0, 10)('x')).toThrow(/^It must be a whole number from 0 to 10$/);
    expect(() => dayOption('2026-11-31')).toThrow(/^It is not a day of the calendar \(2026-11-31\)\.$/);
    expect(() => dayOption('11/30/2026')).toThrow(/^It must be a date YYYY-MM-DD\.$/);
    expect(dayOption('2026-11-30')).toBe('2026-11-30');
    // A year mistyped (0026) would be read as 1926: refused, not a day of nothing reconciled or reported.
    expect(() => dayOption('0026-03-08')).toThrow(/^It is outside the years 2000-2199 \(0026-03-08\)\.$/);
  });

  it('accept a value within bounds', () => {
    expect(wholeNumberOption(0, 86_400)('600')).toBe(600);
    expect(wholeNumberOption(0, 86_400)('0')).toBe(0);
  });

  it('reconcile refuses a settle time that is not one before reconciling anything', async () => {
    const command = reconcileCommand()
      .exitOverride()
      .configureOutput({ writeErr: () => undefined });
    await expect(
      command.parseAsync(['--from', '2026-11-20', '--to', '2026-11-20', '--settle-seconds', 'abc'], {
        from: 'user',
      }),
    ).rejects.toThrow(/--settle-seconds.*must be a whole number from 0 to 86400/);
  });
});

describe('postback methods from the environment', () => {
  it('read as the deployed sync reads them, and a wrong one refused naming its variable', () => {
    const saved = process.env.POSTBACK_METHOD_FAIL;
    try {
      delete process.env.POSTBACK_METHOD_FAIL;
      expect(methodOfVariable('POSTBACK_METHOD_FAIL')).toBe('GET');
      process.env.POSTBACK_METHOD_FAIL = 'post';
      expect(methodOfVariable('POSTBACK_METHOD_FAIL')).toBe('POST');
      process.env.POSTBACK_METHOD_FAIL = 'PUT';
      expect(() => methodOfVariable('POSTBACK_METHOD_FAIL')).toThrow(
        'POSTBACK_METHOD_FAIL must be GET or POST',
      );
    } finally {
      if (saved === undefined) delete process.env.POSTBACK_METHOD_FAIL;
      else process.env.POSTBACK_METHOD_FAIL = saved;
    }
  });
});

describe('values that name nothing', () => {
  it('report refuses an empty --out (an unset variable in a script) instead of writing to standard output', async () => {
    const command = reportCommand()
      .exitOverride()
      .configureOutput({ writeErr: () => undefined });
    await expect(command.parseAsync(['--format', 'csv', '--out', ''], { from: 'user' })).rejects.toThrow(
      /--out.*names no file/,
    );
  });
});

describe('options given twice', () => {
  it('are refused when they take one value (the last would win in silence); --survey adds one each time', () => {
    const report = reportCommand();
    expect(() =>
      refuseRepeatedOptions(report, ['report', '--from', '2026-11-27', '--from=2026-11-20']),
    ).toThrow('--from is given 2 times: give it once');
    expect(() =>
      refuseRepeatedOptions(report, ['report', '--from', '2026-11-27', '--survey', '1', '--survey', '2']),
    ).not.toThrow();
  });

  it('--survey too where a command takes one survey (it answered for the last without a word)', () => {
    for (const command of [urlsCommand(), attemptCommand(), attemptsCommand()])
      expect(() =>
        refuseRepeatedOptions(command, [command.name(), '--survey', '1001', '--survey', '1002']),
      ).toThrow('--survey is given 2 times: give it once');
  });
});
