import { InvalidArgumentError } from 'commander';
import { type IdentifierField, identifierProblem } from '../core/identifiers';
import { isCalendarDay } from '../core/pacific-time';

const identifier = (field: IdentifierField) => (value: string) => {
  const problem = identifierProblem(field, value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
};

export const surveyIdOption = identifier('surveyId');
export const pidOption = identifier('pid');
export const tokenOption = identifier('token');

export function dayOption(value: string): string {
  if (!isCalendarDay(value)) {
    throw new InvalidArgumentError('must be a date YYYY-MM-DD');
  }
  return value;
}
