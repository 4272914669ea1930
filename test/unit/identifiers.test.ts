import { describe, expect, it } from 'vitest';
import { identifierProblem } from '../../functions/core/identifiers';

describe('identifiers', () => {
  it.each([
    ['surveyId', '1'],
    ['surveyId', '999999999999'],
    ['pid', 'abc-DEF_1.2~x'],
    ['pid', 'p'.repeat(64)],
    ['token', '550e8400-e29b-41d4-a716-446655440000'],
    ['token', 't'.repeat(100)],
  ] as const)('accept %s %s', (field, value) => {
    expect(identifierProblem(field, value)).toBeUndefined();
  });

  it.each([
    ['surveyId', undefined, 'missing'],
    ['surveyId', '', 'missing'],
    ['surveyId', '0', 'positive integer'],
    ['surveyId', '012', 'positive integer'],
    ['surveyId', '1e3', 'positive integer'],
    ['surveyId', '1234567890123', 'positive integer'],
    ['pid', '[%%pid%%]', 'unsubstituted placeholder'],
    ['pid', 'a b', 'characters'],
    ['pid', 'a#b', 'characters'],
    ['pid', 'p'.repeat(65), 'characters'],
    ['token', '[%%token%%]', 'unsubstituted placeholder'],
    ['token', 't'.repeat(101), 'characters'],
    ['token', 'tok\u0000en', 'characters'],
  ] as const)('refuse %s %j, saying why', (field, value, why) => {
    expect(identifierProblem(field, value)).toContain(why);
    expect(identifierProblem(field, value)).toContain(field);
  });
});
