import { InvalidArgumentError } from 'commander';
import { type IdentifierField, identifierProblem } from '../core/identifiers';

const identifier = (field: IdentifierField) => (value: string) => {
  const problem = identifierProblem(field, value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
};

export const surveyIdOption = identifier('surveyId');
export const pidOption = identifier('pid');
export const tokenOption = identifier('token');

export function dayOption(value: string): string {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || Number.isNaN(Date.parse(`${value}T00:00:00Z`))) {
    throw new InvalidArgumentError('must be a date YYYY-MM-DD');
  }
  return value;
}
