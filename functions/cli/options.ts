import { InvalidArgumentError } from 'commander';
import { isCalendarDay } from '../marketplace/pacific-time';
import { type IdentifierField, identifierProblem } from '../receiving/identifiers';

const identifier = (field: IdentifierField) => (value: string) => {
  const problem = identifierProblem(field, value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
};

export const surveyIdOption = identifier('surveyId');
export const pidOption = identifier('pid');
export const tokenOption = identifier('token');

/** A whole number within [min, max], or the option (or the named variable) is refused naming the bounds. */
export const wholeNumberOption =
  (min: number, max: number) =>
  (value: string, name?: unknown): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || n < min || n > max)
      throw new InvalidArgumentError(
        `${typeof name === 'string' ? `${name} ` : ''}must be a whole number from ${min} to ${max}`,
      );
    return n;
  };

export function dayOption(value: string): string {
  if (!isCalendarDay(value)) {
    throw new InvalidArgumentError('must be a date YYYY-MM-DD');
  }
  return value;
}
