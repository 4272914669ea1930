import { describe, expect, it } from 'vitest';
import {
  type HitRequest,
  MAX_BODY_BYTES,
  readClaim,
  readIdentity,
  refusedHit,
} from '../../functions/receiving/hit-request';
import { Rejection } from '../../functions/shared/rejection';

const request = (overrides: Partial<HitRequest> = {}): HitRequest => ({
  pathParameters: { surveyId: '1001', outcome: 'success' },
  rawQueryString: 'pid=p1&token=t1&kid=k1&sig=abc',
  ...overrides,
});

function rejection(run: () => unknown): Rejection {
  try {
    run();
  } catch (error) {
    if (error instanceof Rejection) return error;
    throw error;
  }
  throw new Error('expected a rejection');
}

const identity = (req: HitRequest) => readIdentity(req, readClaim('postback', req).query);

describe('reading the claim', () => {
  it('reads survey, outcome, key id and signature', () => {
    expect(readClaim('redirect', request()).claim).toEqual({
      target: { channel: 'redirect', surveyId: '1001', outcome: 'success' },
      kid: 'k1',
      signature: 'abc',
      others: [],
    });
  });

  it('accepts the five redirect outcomes but only success and fail for postbacks', () => {
    for (const outcome of ['success', 'fail', 'overquota', 'quality', 'termination']) {
      expect(
        readClaim('redirect', request({ pathParameters: { surveyId: '1', outcome } })).claim.target.outcome,
      ).toBe(outcome);
    }
    const error = rejection(() =>
      readClaim('postback', request({ pathParameters: { surveyId: '1', outcome: 'overquota' } })),
    );
    expect(error.status).toBe(400);
    expect(error.message).toBe('outcome must be one of success, fail');
  });

  it('refuses a malformed survey id', () => {
    const error = rejection(() =>
      readClaim('postback', request({ pathParameters: { surveyId: 'abc', outcome: 'success' } })),
    );
    expect(error.message).toMatch(/^surveyId must be/);
  });

  it('refuses an id repeated with a different value, accepts an exact repeat', () => {
    expect(
      rejection(() => readClaim('postback', request({ rawQueryString: 'token=t1&token=t2' }))).message,
    ).toBe('token is given twice with different values (query)');
    expect(readClaim('postback', request({ rawQueryString: 'kid=k1&kid=k1' })).claim).toMatchObject({
      kid: 'k1',
      others: [],
    });
  });

  it("keeps a key id or signature a sender appended beside the URL's own, first its own, as pairs to check", () => {
    // A marketplace that adds a `sig` (or `kid`) of its own after the URL's (its own HMAC, an empty one).
    expect(
      readClaim('postback', request({ rawQueryString: 'pid=p&kid=k1&sig=abc&sig=theirs' })).claim,
    ).toEqual({
      target: { channel: 'postback', surveyId: '1001', outcome: 'success' },
      kid: 'k1',
      signature: 'abc',
      others: [{ kid: 'k1', signature: 'theirs' }],
    });
    expect(
      readClaim('postback', request({ rawQueryString: 'kid=k1&sig=abc&kid=mk&sig=' })).claim,
    ).toMatchObject({
      kid: 'k1',
      signature: 'abc',
      others: [
        { kid: 'k1', signature: '' },
        { kid: 'mk', signature: 'abc' },
        { kid: 'mk', signature: '' },
      ],
    });
    // One that is not text (a raw digest) checks out as none, and the ids read as without it: the `+` the query
    // wrote as a space (`%20`) is a space, whatever a body spells.
    const raw = request({
      rawQueryString: 'pid=a%20b&token=t1&kid=k1&sig=abc&sig=%FF%9A%01',
      contentType: 'application/json',
      body: '{"pid":"a+b","token":"t1"}',
    });
    expect(readClaim('postback', raw).claim).toMatchObject({ signature: 'abc', others: [] });
    expect(identity(raw)).toEqual({ pid: 'a b', token: 't1', source: 'query' });
    const appendedToo = { ...raw, rawQueryString: 'pid=a%20b&token=t1&kid=k1&sig=abc&sig=theirs' };
    expect(identity(appendedToo)).toEqual({ pid: 'a b', token: 't1', source: 'query' });
    // Bounded: four values of each at most.
    const many = Array.from({ length: 10 }, (_, i) => `sig=s${i}&kid=k${i}`).join('&');
    expect(readClaim('postback', request({ rawQueryString: many })).claim.others).toHaveLength(15);
  });

  it('lets an id given once blank and once with a value stand on its value, in either order; two values conflict', () => {
    for (const rawQueryString of [
      'pid=&pid=p1&token=t1',
      'pid=p1&pid=&token=t1',
      'pid=[%%pid%%]&pid=p1&token=t1',
      'pid=p1&token=t1&token=',
    ]) {
      expect(identity(request({ rawQueryString }))).toMatchObject({ pid: 'p1', token: 't1' });
    }
    expect(rejection(() => readClaim('postback', request({ rawQueryString: 'pid=p1&pid=p2' }))).message).toBe(
      'pid is given twice with different values (query)',
    );
  });

  it('takes a pid left as the placeholder everywhere as the empty pid: the token names the attempt', () => {
    for (const rawQueryString of [
      'pid=[%%pid%%]&token=t1',
      'pid=%5B%25%25pid%25%25%5D&token=t1',
      'pid=[%%PID%%]&token=t1',
    ])
      expect(identity(request({ rawQueryString }))).toEqual({ pid: '', token: 't1', source: 'query' });
    // Ignored, an unreadable body: the query is enough.
    expect(
      identity(
        request({ rawQueryString: 'pid=[%%pid%%]&token=t1', contentType: 'application/json', body: '{' }),
      ),
    ).toEqual({ pid: '', token: 't1', source: 'query' });
    // A value holding the placeholder's form among other text is a value.
    expect(identity(request({ rawQueryString: 'pid=a[%%pid%%]&token=t1' }))).toMatchObject({
      pid: 'a[%%pid%%]',
    });
    // A token left so names nothing.
    expect(rejection(() => identity(request({ rawQueryString: 'pid=p1&token=[%%token%%]' }))).message).toBe(
      'token is an unsubstituted placeholder',
    );
  });
});

describe('reading the identity', () => {
  it('from the query', () => {
    expect(identity(request())).toEqual({ pid: 'p1', token: 't1', source: 'query' });
  });

  it('from a JSON body, keys in any case, numbers as strings', () => {
    const req = request({
      rawQueryString: 'kid=k1&sig=s',
      contentType: 'application/json; charset=utf-8',
      body: '{"PID":12345,"token":"t9","extra":[1]}',
    });
    expect(identity(req)).toEqual({ pid: '12345', token: 't9', source: 'json' });
  });

  it('a pid a panel keeps in another encoding: its stray bytes kept escaped, the same on every channel', () => {
    const pidOf = (query: string) =>
      identity(request({ rawQueryString: `${query}&token=t1&kid=k1&sig=abc` })).pid;
    // Latin-1 é is byte E9, not a UTF-8 character: kept as its escape, never a replacement character.
    expect(pidOf('pid=Jos%E9')).toBe('Jos%E9');
    expect(pidOf('pid=Jos%e9+Mar%EDa')).toBe('Jos%E9 Mar%EDa');
    // UTF-8 around it still decodes; an encoded surrogate is three stray bytes.
    expect(pidOf('pid=caf%C3%A9%E9')).toBe('café%E9');
    expect(pidOf('pid=x%ED%A0%80')).toBe('x%ED%A0%80');
    // Two different byte strings never read as one.
    expect(pidOf('pid=Jos%E9')).not.toBe(pidOf('pid=Jos%E8'));
    expect(pidOf('pid=Jos%E9')).not.toBe(pidOf('pid=Jos%EF%BF%BD'));
    // The same pid from a form body.
    expect(
      identity(
        request({
          rawQueryString: 'kid=k1&sig=s',
          contentType: 'application/x-www-form-urlencoded',
          body: 'pid=Jos%E9&token=t2',
        }),
      ).pid,
    ).toBe('Jos%E9');
  });

  it('from a form body', () => {
    const req = request({
      rawQueryString: 'kid=k1&sig=s',
      contentType: 'application/x-www-form-urlencoded',
      body: 'pid=p2&token=t2',
    });
    expect(identity(req)).toEqual({ pid: 'p2', token: 't2', source: 'form' });
  });

  it('from a body without content type when its form is unambiguous', () => {
    expect(identity(request({ rawQueryString: '', body: '{"pid":"p3","token":"t3"}' }))).toMatchObject({
      pid: 'p3',
      source: 'json',
    });
    expect(identity(request({ rawQueryString: '', body: 'pid=p4&token=t4' }))).toMatchObject({
      pid: 'p4',
      source: 'form',
    });
  });

  it('from the query when the POST body is empty, whatever its content type', () => {
    expect(identity(request({ contentType: 'text/plain', body: '  ' }))).toMatchObject({
      pid: 'p1',
      source: 'query',
    });
  });

  it('lets a value in one place stand when the other says nothing (empty, null, a placeholder left as it was)', () => {
    const json = (query: string, body: string) =>
      identity(request({ rawQueryString: query, contentType: 'application/json', body }));
    expect(
      json('pid=%5B%25%25pid%25%25%5D&token=%5B%25%25token%25%25%5D', '{"pid":"p1","token":"t1"}'),
    ).toEqual({
      pid: 'p1',
      token: 't1',
      source: 'json',
    });
    expect(json('pid=&token=', '{"pid":"p1","token":"t1"}')).toMatchObject({ pid: 'p1', source: 'json' });
    expect(json('pid=p1&token=t1', '{"pid":null,"token":"[%%token%%]"}')).toEqual({
      pid: 'p1',
      token: 't1',
      source: 'query',
    });
    expect(
      identity(
        request({
          rawQueryString: 'pid=[%%pid%%]&token=t1',
          contentType: 'application/x-www-form-urlencoded',
          body: 'pid=p1',
        }),
      ),
    ).toEqual({ pid: 'p1', token: 't1', source: 'form' });
  });

  it('takes spaces as a value, not as nothing', () => {
    expect(identity(request({ rawQueryString: 'pid=%20&token=t1' }))).toEqual({
      pid: ' ',
      token: 't1',
      source: 'query',
    });
  });

  it('ignores a body it cannot read when the signed query carries both ids', () => {
    for (const body of [
      { contentType: 'text/plain', body: 'OK' },
      { contentType: 'multipart/form-data; boundary=x', body: '--x\r\n' },
      { contentType: 'application/json', body: '{"pid":' },
      { bodyNotUtf8: true },
      { contentType: 'application/json', contentEncoding: 'gzip', bodyNotUtf8: true },
      { contentType: 'application/json', body: `{"x":"${'y'.repeat(MAX_BODY_BYTES)}"}` },
    ]) {
      expect(identity(request(body))).toEqual({ pid: 'p1', token: 't1', source: 'query' });
      // A pid given empty is given (a panel whose entry link carried none): the same postback, recorded by its token.
      const pidless = request({ ...body, rawQueryString: 'pid=&token=t1&kid=k1&sig=abc' });
      expect(identity(pidless)).toEqual({ pid: '', token: 't1', source: 'query' });
    }
    // Not a pid left out: the body may carry it, and one that cannot be read is refused.
    expect(
      rejection(() =>
        identity(
          request({ rawQueryString: 'token=t1&kid=k1&sig=abc', contentType: 'text/plain', body: 'OK' }),
        ),
      ).status,
    ).toBe(415);
    // One left the placeholder is given (the empty pid, as everywhere): the token names the attempt.
    expect(
      identity(
        request({
          rawQueryString: 'pid=[%%pid%%]&token=t1&kid=k1&sig=abc',
          contentType: 'text/plain',
          body: 'OK',
        }),
      ),
    ).toEqual({ pid: '', token: 't1', source: 'query' });
  });

  it('reads a form body with a stray `&` and JSON after a byte-order mark', () => {
    expect(identity(request({ rawQueryString: '', body: 'pid=a&token=b&' }))).toMatchObject({ pid: 'a' });
    expect(
      identity(
        request({
          rawQueryString: '',
          contentType: 'application/json',
          body: '\uFEFF{"pid":"a","token":"b"}',
        }),
      ),
    ).toMatchObject({ pid: 'a', source: 'json' });
  });

  it('reads a form body that a newline ends or begins, labelled or not', () => {
    for (const contentType of ['application/x-www-form-urlencoded', 'text/plain', undefined])
      for (const body of ['pid=x&token=t9\r\n', 'pid=x&token=t9\n', '\r\npid=x&token=t9', 'token=t9&pid=x\n'])
        expect(identity(request({ rawQueryString: '', contentType, body })), JSON.stringify(body)).toEqual({
          pid: 'x',
          token: 't9',
          source: 'form',
        });
    // Only the token in the body, the pid in the query.
    expect(
      identity(
        request({
          rawQueryString: 'pid=x',
          contentType: 'application/x-www-form-urlencoded',
          body: 'token=t9\r\n',
        }),
      ),
    ).toMatchObject({ pid: 'x', token: 't9' });
  });

  it('keeps a space the query escaped as %20 over a `+` in the body there: the redirect keyed the space', () => {
    expect(
      identity(
        request({
          rawQueryString: 'pid=a%20b&token=t1',
          contentType: 'application/json',
          body: '{"pid":"a+b","token":"t1"}',
        }),
      ),
    ).toEqual({ pid: 'a b', token: 't1', source: 'query' });
    // One `+` written raw and one escaped space: both read as spaces, as the redirect read them.
    expect(
      identity(
        request({
          rawQueryString: 'pid=a+b%20c&token=t1',
          contentType: 'application/json',
          body: '{"pid":"a+b c"}',
        }),
      ),
    ).toMatchObject({ pid: 'a b c', source: 'query' });
  });

  it("keeps the query's reading when the body differs from it only by a `+` the query wrote raw: the redirect keyed that", () => {
    const raw = { rawQueryString: 'pid=ab+cd/ef==&token=t1' };
    expect(
      identity(request({ ...raw, contentType: 'application/json', body: '{"pid":"ab+cd/ef=="}' })),
    ).toMatchObject({ pid: 'ab cd/ef==', source: 'query' });
    expect(
      identity(
        request({ ...raw, contentType: 'application/x-www-form-urlencoded', body: 'pid=ab%2Bcd%2Fef%3D%3D' }),
      ),
    ).toMatchObject({ pid: 'ab cd/ef==', source: 'query' });
    // The pid a redirect of the same URL keys.
    const redirect = request(raw);
    expect(readIdentity(redirect, readClaim('redirect', redirect).query)).toMatchObject({
      pid: 'ab cd/ef==',
    });
  });

  it('takes the query when a form body differs from it only by a `+` the body did not encode', () => {
    expect(
      identity(
        request({
          rawQueryString: 'pid=m%2Bn&token=tM',
          contentType: 'application/x-www-form-urlencoded',
          body: 'pid=m+n&token=tM',
        }),
      ),
    ).toMatchObject({ pid: 'm+n', token: 'tM', source: 'query' });
  });

  it('reads parameters of a URL stored HTML-escaped (`&amp;` between them)', () => {
    expect(identity(request({ rawQueryString: 'pid=p1&amp;token=t1&amp;utm=x' }))).toEqual({
      pid: 'p1',
      token: 't1',
      source: 'query',
    });
  });

  it('reads percent-encoded UTF-8 exactly and leaves other parameters alone, repeated or not', () => {
    expect(
      identity(request({ rawQueryString: 'pid=Jos%C3%A9%F0%9F%98%80%2B&token=t%ZZ&x=1&x=2&utm=a' })),
    ).toEqual({
      pid: 'José😀+',
      token: 't%ZZ',
      source: 'query',
    });
  });

  it('takes the signed query when it carries both ids and the body spells one otherwise', () => {
    const query = 'pid=00123&token=t1&kid=k1&sig=abc';
    expect(
      identity(
        request({ rawQueryString: query, contentType: 'application/json', body: '{"pid":123,"token":"t1"}' }),
      ),
    ).toEqual({ pid: '00123', token: 't1', source: 'query' });
    expect(
      identity(request({ rawQueryString: query, contentType: 'application/json', body: '{"pid":"other"}' })),
    ).toEqual({ pid: '00123', token: 't1', source: 'query' });
  });

  it('reads a body by its evident form when it is not of the type declared', () => {
    const bare = { rawQueryString: 'kid=k1&sig=abc' };
    expect(identity(request({ ...bare, contentType: 'application/json', body: 'pid=p&token=t' }))).toEqual({
      pid: 'p',
      token: 't',
      source: 'form',
    });
    expect(
      identity(
        request({
          ...bare,
          contentType: 'application/x-www-form-urlencoded',
          body: '{"pid":"p","token":"t"}',
        }),
      ),
    ).toEqual({ pid: 'p', token: 't', source: 'json' });
    expect(identity(request({ ...bare, contentType: 'text/json', body: '{"pid":"p","token":"t"}' }))).toEqual(
      {
        pid: 'p',
        token: 't',
        source: 'json',
      },
    );
    expect(
      identity(
        request({ ...bare, contentType: 'application/x-www-form-urlencoded', body: '\uFEFFpid=p&token=t' }),
      ),
    ).toMatchObject({ pid: 'p', token: 't' });
  });

  it("reads only the ids from a body: a sender's own kid or sig there, repeated or not text, refuses nothing", () => {
    for (const [contentType, body] of [
      ['application/x-www-form-urlencoded', 'pid=p1&token=t1&sig=abc&sig=def'],
      ['application/x-www-form-urlencoded', 'pid=p1&token=t1&kid=%FF'],
      ['application/json', '{"pid":"p1","token":"t1","sig":"abc","kid":"x"}'],
    ] as const)
      expect(identity(request({ rawQueryString: 'kid=k1&sig=abc', contentType, body })), body).toMatchObject({
        pid: 'p1',
        token: 't1',
      });
  });

  it('refuses a JSON body naming an id twice with two values, as a query', () => {
    const json = (body: string) => () =>
      identity(request({ rawQueryString: '', contentType: 'application/json', body }));
    expect(rejection(json('{"pid":"a","token":"t","pid":"b"}')).message).toBe(
      'pid is given twice with different values (body)',
    );
    // Written with an escape, or nested values and strings in between, the name is the same.
    expect(rejection(json('{"token":"t1","x":{"token":"n"},"s":"\\",\\"","t\\u006fken":"t2"}')).message).toBe(
      'token is given twice with different values (body)',
    );
    // The same value twice (as written or as read), a value beside one saying nothing (null, empty, a placeholder,
    // under the same name or another case of it), or the id nested in another member: one id.
    for (const body of [
      '{"pid":"12","pid":12,"token":"t"}',
      '{"pid":"ab\\u0063","pid":"abc","token":"t"}',
      '{"pid":"","pid":"abc","token":"t"}',
      '{"pid":"[%%pid%%]","pid":"abc","token":"t"}',
      '{"PID":"abc","pid":"","token":"t"}',
      '{"pid":"","PID":"abc","token":"t"}',
    ])
      expect(json(body)().pid, body).toMatch(/^(12|abc)$/);
    // The one saying nothing after the value, as before it: the value stands (JSON.parse keeps the last member).
    for (const body of [
      '{"pid":"abc","pid":"","token":"t"}',
      '{"pid":"abc","pid":null,"token":"t"}',
      '{"pid":"abc","pid":"[%%pid%%]","token":"t"}',
    ])
      expect(json(body)(), body).toMatchObject({ pid: 'abc', token: 't' });
    expect(json('{"pid":"abc","token":"t1","token":"[%%token%%]"}')()).toMatchObject({ token: 't1' });
    expect(json('{"pid":"abc","token":"t1","token":null}')()).toMatchObject({ token: 't1' });
    expect(
      identity(
        request({
          rawQueryString: '',
          contentType: 'application/json',
          body: '{"pid":"a","pid" : "a","token":"t"}',
        }),
      ),
    ).toMatchObject({ pid: 'a', token: 't' });
    expect(
      identity(
        request({
          rawQueryString: '',
          contentType: 'application/json',
          body: '{"pid":null,"pid":"a","token":"t"}',
        }),
      ),
    ).toMatchObject({ pid: 'a' });
    expect(
      identity(
        request({
          rawQueryString: '',
          contentType: 'application/json',
          body: '{"pid":"a","meta":{"pid":"b"},"token":"t"}',
        }),
      ),
    ).toMatchObject({ pid: 'a' });
  });

  it('keeps the digits of a pid a JSON body gives as an integer past 2^53', () => {
    const body = '{"pid": 9777771795474455950, "token": "t"}';
    expect(identity(request({ rawQueryString: '', contentType: 'application/json', body }))).toMatchObject({
      pid: '9777771795474455950',
    });
  });

  it('takes the signature as what comes before parameters a sender appended with a second `?` or a newline', () => {
    expect(
      readClaim('postback', request({ rawQueryString: 'pid=p&token=t&kid=k1&sig=abc?status=1&x=2' })).claim,
    ).toMatchObject({ kid: 'k1', signature: 'abc' });
    expect(
      readClaim('postback', request({ rawQueryString: 'pid=p&token=t&kid=k1&sig=abc%0A' })).claim.signature,
    ).toBe('abc');
  });

  it('accepts the same value in query and body', () => {
    expect(identity(request({ contentType: 'application/json', body: '{"pid":"p1"}' }))).toMatchObject({
      pid: 'p1',
    });
  });

  it.each([
    [
      'query and body disagree when the ids must come from the body too',
      {
        rawQueryString: 'pid=p1&kid=k1&sig=abc',
        contentType: 'application/json',
        body: '{"pid":"other","token":"t"}',
      },
      400,
      'pid is given twice with different values (query and body)',
    ],
    [
      'a 64-bit pid written twice otherwise',
      {
        rawQueryString: '',
        contentType: 'application/json',
        body: '{"pid":9777771795474455950,"token":"t","PID":9777771795474455951}',
      },
      400,
      'pid in the JSON body must be a string',
    ],
    [
      'body repeats a key differently',
      { rawQueryString: '', contentType: 'application/x-www-form-urlencoded', body: 'pid=a&pid=b&token=t' },
      400,
      'pid is given twice with different values (body)',
    ],
    [
      'JSON repeats a key in another case',
      { rawQueryString: '', contentType: 'application/json', body: '{"pid":"a","PID":"b","token":"t"}' },
      400,
      'pid is given twice with different values (body)',
    ],
    ['missing pid', { rawQueryString: 'token=t' }, 400, 'pid is missing'],
    ['missing token', { rawQueryString: 'pid=p' }, 400, 'token is missing'],
    [
      'a query name in upper case',
      { rawQueryString: 'PID=p&token=t' },
      400,
      'pid is missing: the query has PID, and parameter names are lower-case',
    ],
    [
      'unsubstituted placeholder',
      { rawQueryString: 'pid=p&token=[%%token%%]' },
      400,
      'token is an unsubstituted placeholder',
    ],
    [
      'malformed JSON',
      { rawQueryString: '', contentType: 'application/json', body: '{"pid":' },
      400,
      'body is not valid JSON',
    ],
    [
      'JSON array',
      { rawQueryString: '', contentType: 'application/json', body: '[1]' },
      400,
      'JSON body must be an object',
    ],
    [
      'JSON pid of the wrong type',
      { rawQueryString: '', contentType: 'application/json', body: '{"pid":{"a":1},"token":"t"}' },
      400,
      'pid in the JSON body must be a string',
    ],
    [
      'wrong content type',
      { rawQueryString: 'token=t', contentType: 'text/xml', body: '<pid>p</pid>' },
      415,
      'content type text/xml is not accepted; send application/json or application/x-www-form-urlencoded',
    ],
    [
      'unrecognisable body',
      { rawQueryString: '', body: 'just some text' },
      415,
      'body is neither JSON nor form-encoded',
    ],
    [
      'a body whose bytes are not UTF-8, the query lacking an id',
      { rawQueryString: 'pid=p', bodyNotUtf8: true },
      400,
      'body is not well-formed UTF-8',
    ],
    [
      'a token whose escapes are not UTF-8 (two ids would read as one)',
      { rawQueryString: 'pid=p&token=t%E9' },
      400,
      'token is not well-formed UTF-8 (query)',
    ],
    [
      'an encoded surrogate in a token',
      { rawQueryString: 'pid=p&token=x%ED%A0%80' },
      400,
      'token is not well-formed UTF-8 (query)',
    ],
    [
      'a compressed body the ids must come from',
      {
        rawQueryString: 'kid=k1&sig=abc',
        contentType: 'application/json',
        contentEncoding: 'gzip',
        bodyNotUtf8: true,
      },
      415,
      'content encoding gzip is not accepted; send the body uncompressed',
    ],
    [
      'oversized body',
      {
        rawQueryString: 'token=t1&kid=k1&sig=abc',
        contentType: 'application/json',
        body: `{"pid":"${'p'.repeat(MAX_BODY_BYTES)}"}`,
      },
      413,
      `body exceeds ${MAX_BODY_BYTES} bytes`,
    ],
  ] as const)('refuses %s', (_, overrides, status, message) => {
    const error = rejection(() => identity(request(overrides)));
    expect(error.status).toBe(status);
    expect(error.message).toBe(message);
  });
});

describe('a refused hit as stored', () => {
  it('keeps the bytes of a token that are not UTF-8 as their escapes, as its pid, not as U+FFFD (two tokens one)', () => {
    const refused = (token: string) =>
      refusedHit(
        'postback',
        request({ rawQueryString: `pid=Jos%E9&token=${token}&kid=k1&sig=abc` }),
        { code: 'bad_request', reason: 'token is not well-formed UTF-8' },
        { at: new Date('2026-11-28T00:00:00Z'), requestId: 'r1', sourceIp: '192.0.2.1' },
      );
    expect(refused('%C0%AF')).toMatchObject({ pid: 'Jos%E9', token: '%C0%AF' });
    expect(refused('%C1%BF').token).not.toBe(refused('%C0%AF').token);
  });
});
