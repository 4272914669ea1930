import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { attemptKey, keyPart } from '../../functions/ledger/ledger-schema';
import { identifierProblem } from '../../functions/receiving/identifiers';

describe('identifiers', () => {
  it.each([
    ['surveyId', '1'],
    ['surveyId', '999999999999'],
    ['pid', 'abc-DEF_1.2~x'],
    ['pid', 'p'.repeat(2048)],
    // Tabs and line ends a panel's CSV import left in its ids, and DEL: shown escaped, never refused.
    ['pid', 'p-17\r'],
    ['pid', 'a\tb\n'],
    ['token', 'tok\u007fen'],
    ['token', '550e8400-e29b-41d4-a716-446655440000'],
    ['token', 't'.repeat(128)],
    // The supplier's shapes: base64, e-mail, delimiters, spaces, any script, emoji.
    ['pid', 'dGVzdC0x+/Q=='],
    ['pid', 'a@b.com'],
    ['pid', '12345|x'],
    ['pid', 'user 1'],
    ['pid', 'a#b%23'],
    ['pid', 'é'.repeat(32)],
    ['token', '👩‍👩‍👧‍👦 ユーザー'],
    // Given empty: a panel's entry link that carried no id (the token names the attempt).
    ['pid', ''],
  ] as const)('accept %s %s', (field, value) => {
    expect(identifierProblem(field, value)).toBeUndefined();
  });

  it.each([
    ['surveyId', undefined, 'missing'],
    ['surveyId', '', 'missing'],
    ['pid', undefined, 'missing'],
    ['token', '', 'missing'],
    ['surveyId', '0', 'positive integer'],
    ['surveyId', '012', 'must not start with 0'],
    ['surveyId', '00', 'must not start with 0'],
    ['surveyId', '1e3', 'positive integer'],
    ['surveyId', '1234567890123', 'positive integer'],
    ['pid', '[%%pid%%]', 'unsubstituted placeholder'],
    ['pid', 'p'.repeat(2049), 'at most 2048 bytes'],
    ['pid', 'é'.repeat(1025), 'at most 2048 bytes'],
    ['pid', 'a\u0000b', 'NUL or C1 control characters'],
    ['pid', 'a\u0085b', 'NUL or C1 control characters'],
    ['pid', 'a\u009fb', 'NUL or C1 control characters'],
    ['pid', 'a\ud800b', 'well-formed Unicode'],
    ['pid', 'a\uffffb', 'well-formed Unicode'],
    ['token', 'tok\ufffe', 'well-formed Unicode'],
    ['token', '[%%token%%]', 'unsubstituted placeholder'],
    ['token', 't'.repeat(129), 'at most 128 bytes'],
    ['token', 'tok\u0000en', 'NUL or C1 control characters'],
  ] as const)('refuse %s %j, saying why', (field, value, why) => {
    expect(identifierProblem(field, value)).toContain(why);
    expect(identifierProblem(field, value)).toContain(field);
  });
});

describe('key parts', () => {
  it('ids accepted before key to themselves, so items already written are found', () => {
    expect(attemptKey('12', 'abc-DEF_1.2~x', '550e8400-e29b')).toEqual({
      pk: 'ATTEMPT#12#abc-DEF_1.2~x',
      sk: 'TOKEN#550e8400-e29b',
    });
  });

  it('any two different values key differently, delimiters included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        if (a !== b) expect(keyPart(a)).not.toBe(keyPart(b));
        expect(keyPart(a)).not.toContain('#');
      }),
    );
  });
});
