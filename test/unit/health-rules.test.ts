/**
 * The survey health rules at their boundaries, with the default settings: what fires, at which count, time and
 * percentage, and what stays quiet.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  type AttemptSightings,
  configurationDrift,
  evaluateHealth,
  OUTAGE_EXTRA_FAILURES,
  postbacksStopped,
  readFrom,
  refusedPostbacks,
  type SurveyWindow,
  DEFAULT_HEALTH_SETTINGS as settings,
  successWithoutPostback,
} from '../../functions/health/health-rules';
import { printable, withoutSignatures } from '../../functions/shared/printable';

const now = new Date('2026-03-10T12:00:30.000Z');
/** The instant `minutes` before now (fractions allowed). */
const ago = (minutes: number) => new Date(now.getTime() - minutes * 60_000).toISOString();
const window = (over: Partial<SurveyWindow> = {}): SurveyWindow => ({
  surveyId: '1001',
  attempts: [],
  refused: [],
  ...over,
});
let n = 0;
const redirect = (minutes: number, over: Partial<AttemptSightings> = {}): AttemptSightings => ({
  pid: `p${++n}`,
  redirectAt: ago(minutes),
  ...over,
});
const redirects = (count: number, minutes = 20) => Array.from({ length: count }, () => redirect(minutes));
const success = (minutes: number, postbackAfter?: number): AttemptSightings => ({
  pid: `s${++n}`,
  redirectAt: ago(minutes),
  successRedirectAt: ago(minutes),
  ...(postbackAfter === undefined
    ? {}
    : { postbackAt: ago(minutes - postbackAfter), successPostbackAt: ago(minutes - postbackAfter) }),
});
const successes = (count: number, covered: number) => [
  ...Array.from({ length: covered }, () => success(15, 1)),
  ...Array.from({ length: count - covered }, () => success(15)),
];

describe('claims counted per sender', () => {
  const fromOne = (attempts: AttemptSightings[], sender = 'senderA1') =>
    attempts.map((a) => ({ ...a, redirectFrom: sender }));

  it('thirty success claims from one address, with no postback, are three: a warning at most, never failing', () => {
    const claims = fromOne(successes(30, 0));
    const evaluation = evaluateHealth(window({ attempts: claims }), settings, now);
    expect(evaluation.state).toBe('warning');
    expect(evaluation.reasons.map((r) => r.code)).toEqual(['success_without_postback']);
    expect(evaluation.reasons[0]?.detail).toContain('3 of 3 success redirects');
    expect(evaluation.reasons[0]?.detail).toContain('27 more from senders that sent over 3 each not counted');
    // Redirects of any outcome from one address do not make postbacks look stopped either.
    expect(postbacksStopped(window({ attempts: fromOne(redirects(30)) }), settings, now)).toBeUndefined();
  });

  it('the same claims from many senders are what a real outage looks like: failing', () => {
    const claims = successes(30, 0).map((a, i) => ({ ...a, redirectFrom: `sender${i}` }));
    expect(evaluateHealth(window({ attempts: claims }), settings, now).state).toBe('failing');
    const behindThree = redirects(10).map((a, i) => ({ ...a, redirectFrom: `carrier${i % 3}` }));
    // Respondents behind three shared addresses count three each: nine, enough for the rule.
    expect(postbacksStopped(window({ attempts: behindThree }), settings, now)).toMatchObject({
      severity: 'failing',
    });
    // Two senders are not: one person's home answers from an IPv4 address and an IPv6 /64 (six claims).
    const dualStack = redirects(30).map((a, i) => ({ ...a, redirectFrom: i % 2 ? 'home-v4' : 'home-v6' }));
    expect(postbacksStopped(window({ attempts: dualStack }), settings, now)).toBeUndefined();
    // Once failing, the senders no longer matter (a lull of one respondent is no recovery).
    expect(
      postbacksStopped(window({ attempts: dualStack, postbacksStopped: true }), settings, now),
    ).toBeDefined();
  });

  it('success redirects their postback backs count whoever sent them', () => {
    const genuine = fromOne(successes(10, 10), 'office');
    const reason = successWithoutPostback(
      window({ attempts: [...genuine, ...fromOne(successes(8, 0), 'forger')] }),
      settings,
      now,
    );
    // 10 covered and 3 claims counted: coverage 76%, a warning, not failing.
    expect(reason).toMatchObject({ severity: 'warning' });
    expect(reason?.detail).toContain('3 of 13 success redirects');
  });
});

describe('postbacks_stopped', () => {
  it('fires at 5 redirects older than the grace period and no postback in 30 minutes', () => {
    const reason = postbacksStopped(window({ attempts: redirects(5) }), settings, now);
    expect(reason).toMatchObject({ code: 'postbacks_stopped', severity: 'failing' });
    expect(reason?.detail).toContain('5 redirects first seen');
    expect(reason?.detail).toContain('no postback seen for this survey at all');
    expect(reason?.detail).toContain('redirects show --survey 1001');
    expect(reason?.detail).toContain('redirects apply --survey 1001');
    // Three sample pids, no more.
    expect(reason?.detail.match(/"p\d+"/g)).toHaveLength(3);
  });

  it('does not fire at 4 redirects', () => {
    expect(postbacksStopped(window({ attempts: redirects(4) }), settings, now)).toBeUndefined();
  });

  it('once fired, holds through a lull below 5 redirects until a postback arrives, and ends on silence', () => {
    // A survey of ten respondents an hour whose postbacks stopped: some half hours bring fewer than five.
    const held = window({ attempts: redirects(2), postbacksStopped: true });
    expect(postbacksStopped(held, settings, now)).toMatchObject({ severity: 'failing' });
    expect(postbacksStopped(window({ attempts: redirects(2) }), settings, now)).toBeUndefined();
    // A postback: recovered.
    const answered = [...redirects(2), { pid: 'x', postbackAt: ago(1) }];
    expect(
      postbacksStopped(window({ attempts: answered, postbacksStopped: true }), settings, now),
    ).toBeUndefined();
    // No redirect in the half hour: the two hours before tell a lull from silence.
    const lull = window({ postbacksStopped: true, earlier: [redirect(70), redirect(95)] });
    expect(postbacksStopped(lull, settings, now)).toMatchObject({ severity: 'failing' });
    expect(postbacksStopped(lull, settings, now)?.detail).toContain(`2 redirects first seen from ${ago(95)}`);
    const answeredBefore = [redirect(70), { pid: 'y', redirectAt: ago(80), postbackAt: ago(25) }];
    expect(
      postbacksStopped(window({ postbacksStopped: true, earlier: answeredBefore }), settings, now),
    ).toBeUndefined();
    // A postback from before they stopped, and redirects unanswered since: still failing.
    const stoppedSince = [
      { pid: 'z', redirectAt: ago(75), postbackAt: ago(70) },
      redirect(60),
      redirect(50),
      redirect(40),
    ];
    expect(
      postbacksStopped(window({ postbacksStopped: true, earlier: stoppedSince }), settings, now),
    ).toMatchObject({ severity: 'failing' });
    // Redirects only before the last postback: recovered.
    const answeredLast = [redirect(90), { pid: 'w', redirectAt: ago(85), postbackAt: ago(45) }];
    expect(
      postbacksStopped(window({ postbacksStopped: true, earlier: answeredLast }), settings, now),
    ).toBeUndefined();
    expect(
      postbacksStopped(window({ postbacksStopped: true, earlier: [redirect(125)] }), settings, now),
    ).toBeUndefined();
    // No traffic at all: nothing says postbacks are missing.
    expect(postbacksStopped(window({ postbacksStopped: true }), settings, now)).toBeUndefined();
    expect(postbacksStopped(window({ postbacksStopped: true, earlier: [] }), settings, now)).toBeUndefined();
    // Not failing before: the hours before start nothing.
    expect(
      postbacksStopped(window({ earlier: [redirect(70), redirect(95)] }), settings, now),
    ).toBeUndefined();
    // One sender's claims do not hold it more than they start it: three count, from one address.
    const claims = redirects(1).map((a) => ({ ...a, redirectFrom: 'forger' }));
    expect(
      postbacksStopped(window({ attempts: claims, postbacksStopped: true }), settings, now),
    ).toBeDefined();
  });

  it('counts a redirect exactly 30 minutes old, not one older', () => {
    expect(
      postbacksStopped(window({ attempts: [...redirects(4), redirect(30)] }), settings, now),
    ).toBeDefined();
    expect(
      postbacksStopped(window({ attempts: [...redirects(4), redirect(30.0001)] }), settings, now),
    ).toBeUndefined();
  });

  it('counts only redirects older than the grace period: a younger one may still get its postback', () => {
    expect(
      postbacksStopped(window({ attempts: [...redirects(4), redirect(10)] }), settings, now),
    ).toBeUndefined();
    expect(
      postbacksStopped(window({ attempts: [...redirects(4), redirect(10.0001)] }), settings, now),
    ).toBeDefined();
    expect(postbacksStopped(window({ attempts: redirects(50, 5) }), settings, now)).toBeUndefined();
  });

  it('does not fire for postbacks arriving late on attempts first seen before the window (a marketplace queue)', () => {
    const earlier = [{ pid: 'q', redirectAt: ago(45), postbackAt: ago(8) }];
    expect(postbacksStopped(window({ attempts: redirects(8), earlier }), settings, now)).toBeUndefined();
    // One older than the half hour is evidence of when the last one came, not of postbacks now.
    const older = [{ pid: 'q', redirectAt: ago(90), postbackAt: ago(40) }];
    expect(
      postbacksStopped(window({ attempts: redirects(8), earlier: older }), settings, now)?.detail,
    ).toContain(`the last postback seen was at ${ago(40)}`);
  });

  it('does not fire when one postback arrived in the 30 minutes, of any outcome and on any attempt', () => {
    const attempts = [...redirects(8), { pid: 'x', postbackAt: ago(29.9) }];
    expect(postbacksStopped(window({ attempts }), settings, now)).toBeUndefined();
  });

  it('fires when the last postback is older than 30 minutes, and names when it was', () => {
    const attempts = [...redirects(5), { pid: 'x', redirectAt: ago(30.5), postbackAt: ago(30.5) }];
    const reason = postbacksStopped(window({ attempts }), settings, now);
    expect(reason?.detail).toContain(`the last postback seen was at ${ago(30.5)}`);
  });

  it('names the last postback the stored state remembers when the window holds none', () => {
    const reason = postbacksStopped(
      window({ attempts: redirects(5), lastPostbackAt: '2026-03-10T09:00:00.000Z' }),
      settings,
      now,
    );
    expect(reason?.detail).toContain('the last postback seen was at 2026-03-10T09:00:00.000Z');
  });
});

describe('success_without_postback', () => {
  it('is failing below 50% coverage with 10 success redirects', () => {
    const reason = successWithoutPostback(window({ attempts: successes(10, 4) }), settings, now);
    expect(reason).toMatchObject({ code: 'success_without_postback', severity: 'failing' });
    expect(reason?.detail).toContain('6 of 10 success redirects');
    expect(reason?.detail).toContain('coverage 40%');
    expect(reason?.detail).toMatch(/attempt --survey 1001 --pid=s\d+;/);
  });

  it('counts a success redirect whose token had its success postback under another spelling of the pid as backed', () => {
    // Each respondent's redirect left a `+` raw (a space here), its postback sent `%2B`: two items, one token.
    const split = Array.from({ length: 12 }, (_, i) => [
      { ...success(15), pid: `dGVzdC0${i} /Q==`, token: `t${i}`, redirectFrom: `sender${i}` },
      {
        pid: `dGVzdC0${i}+/Q==`,
        token: `t${i}`,
        postbackAt: ago(14),
        successPostbackAt: ago(14),
      },
    ]).flat();
    expect(evaluateHealth(window({ attempts: split }), settings, now).state).toBe('ok');
    // Another token's postback backs nothing.
    const other = split.map((a) => (a.successPostbackAt ? { ...a, token: `other-${a.token}` } : a));
    expect(successWithoutPostback(window({ attempts: other }), settings, now)?.severity).toBe('failing');
  });

  it("writes the sample pid in its command as one shell word: a forger's pid runs nothing when pasted", () => {
    const forged = ['$(touch /tmp/x)', '`id`', "it's; echo hi", '--force', 'sig=abc'];
    for (const pid of forged) {
      const attempts = [{ ...success(15), pid }, success(15), success(15)];
      const detail = successWithoutPostback(window({ attempts }), settings, now)?.detail ?? '';
      const word = /--pid=(.*?); the marketplace/.exec(detail)?.[1] ?? '';
      // Quoted whenever a signature could be concealed inside it after (the notice's body conceals `sig=...`).
      if (pid.startsWith('sig=')) expect(withoutSignatures(word)).toBe("'sig=[concealed]'");
      // What a POSIX shell makes of the word: the pid, literally.
      expect(execFileSync('sh', ['-c', `printf %s ${word}`], { encoding: 'utf8' })).toBe(pid);
    }
  });

  it('writes a sample pid that no signature concealed in the notice after can unquote: pasted, it runs nothing', () => {
    const forged = [
      "\u0001sig=a';echo INJECTED;#",
      "\u200bsig=a';echo INJECTED;#",
      "sig=\u0001\\';echo INJECTED;#",
      "x\u0001sig=a\\\\';echo INJECTED;#",
      "sig=a';echo INJECTED;#",
      "\u0001sig%3Da' ;echo INJECTED;#",
      '\u0001"sig": "a\';echo INJECTED;#',
    ];
    for (const pid of forged) {
      const attempts = [{ ...success(15), pid }, success(15), success(15)];
      const detail = successWithoutPostback(window({ attempts }), settings, now)?.detail ?? '';
      const word = /--pid=(.*?); the marketplace/s.exec(detail)?.[1] ?? '';
      // As the notice's body carries it: signatures concealed, then made printable.
      const shown = printable(withoutSignatures(word));
      const out = execFileSync('bash', ['-c', `printf '[%s]\\n' ${shown}; echo END`], { encoding: 'utf8' });
      // One argument, then the next command: nothing of the pid ran (its text may show inside the argument).
      const lines = out.trimEnd().split('\n');
      expect(lines, JSON.stringify(pid)).toHaveLength(2);
      expect(lines[0], JSON.stringify(pid)).toMatch(/^\[.*\]$/s);
      expect(lines[1], JSON.stringify(pid)).toBe('END');
    }
  });

  it("writes a sample pid holding a control or bidirectional character with the shell's escapes: shown as text, pasted it is the pid", () => {
    for (const pid of ['p-17\r', "tab\there's", 'line\nend\\x41', 'abc\u202efed']) {
      const attempts = [{ ...success(15), pid }, success(15), success(15)];
      const detail = successWithoutPostback(window({ attempts }), settings, now)?.detail ?? '';
      const word = /--pid=(.*?); the marketplace/s.exec(detail)?.[1] ?? '';
      // Nothing a terminal or a mail reader would act on: the notice shows the escapes.
      expect(printable(word)).toBe(word);
      expect(execFileSync('bash', ['-c', `printf %s ${word}`], { encoding: 'utf8' })).toBe(pid);
    }
  });

  it('is a warning at exactly 50% coverage', () => {
    expect(successWithoutPostback(window({ attempts: successes(10, 5) }), settings, now)?.severity).toBe(
      'warning',
    );
  });

  it('is a warning with 9 success redirects and none covered: too few to fail', () => {
    expect(successWithoutPostback(window({ attempts: successes(9, 0) }), settings, now)?.severity).toBe(
      'warning',
    );
  });

  it('is quiet with 2 uncovered (fewer than 3), and at exactly 90% coverage', () => {
    expect(successWithoutPostback(window({ attempts: successes(2, 0) }), settings, now)).toBeUndefined();
    expect(successWithoutPostback(window({ attempts: successes(30, 27) }), settings, now)).toBeUndefined();
    expect(successWithoutPostback(window({ attempts: successes(30, 26) }), settings, now)?.severity).toBe(
      'warning',
    );
  });

  it('judges success redirects first seen from 25 minutes ago until 10 minutes ago (exclusive) only', () => {
    const edge = (minutes: number) => [success(minutes), success(minutes), success(minutes)];
    expect(successWithoutPostback(window({ attempts: edge(25) }), settings, now)).toBeDefined();
    expect(successWithoutPostback(window({ attempts: edge(25.0001) }), settings, now)).toBeUndefined();
    expect(successWithoutPostback(window({ attempts: edge(10.0001) }), settings, now)).toBeDefined();
    expect(successWithoutPostback(window({ attempts: edge(10) }), settings, now)).toBeUndefined();
  });

  it('counts a success postback that arrived after the grace period as coverage', () => {
    const late = Array.from({ length: 10 }, () => success(20, 15));
    expect(successWithoutPostback(window({ attempts: late }), settings, now)).toBeUndefined();
  });
});

describe('refused_postbacks', () => {
  const refused = (code: string, hits: number, minutes = 5) => ({ at: ago(minutes), code, hits, pid: 'r1' });

  it('is quiet without refusals', () => {
    expect(refusedPostbacks(window(), settings, now)).toBeUndefined();
  });

  it('is a warning at one refusal of any code, naming codes and counts', () => {
    const reason = refusedPostbacks(window({ refused: [refused('signature_mismatch', 1)] }), settings, now);
    expect(reason).toMatchObject({ code: 'refused_postbacks', severity: 'warning' });
    expect(reason?.detail).toContain('1 signature_mismatch');
    expect(reason?.detail).toContain('rejected --day 2026-03-10');
  });

  it('names the UTC day the refusals were kept under, and the day after when the window crosses UTC midnight', () => {
    const atFive = new Date('2026-11-02T00:05:00.000Z');
    const before = { at: '2026-11-01T23:58:00.000Z', code: 'signature_mismatch', hits: 5, pid: 'r1' };
    const reason = refusedPostbacks(window({ refused: [before] }), settings, atFive);
    expect(reason?.detail).toContain(
      'npm run cli -- rejected --day 2026-11-01 and npm run cli -- rejected --day 2026-11-02.',
    );
    const stopped = postbacksStopped(
      window({
        attempts: Array.from({ length: 10 }, (_, i) => ({
          pid: `q${i}`,
          redirectAt: new Date(atFive.getTime() - 20 * 60_000).toISOString(),
          redirectFrom: `sender${i}`,
        })),
      }),
      settings,
      atFive,
    );
    expect(stopped?.detail).toContain(
      'rejected --day 2026-11-01 and npm run cli -- rejected --day 2026-11-02.',
    );
  });

  it('is a warning at 4 retired-key refusals and failing at 5; unknown key ids, which anyone can send, only warn', () => {
    expect(
      refusedPostbacks(window({ refused: [refused('signature_retired_key', 4)] }), settings, now)?.severity,
    ).toBe('warning');
    const reason = refusedPostbacks(
      window({ refused: [refused('signature_retired_key', 5)] }),
      settings,
      now,
    );
    expect(reason?.severity).toBe('failing');
    expect(reason?.detail).toContain('redirects apply --survey 1001 --force');
    const forged = refusedPostbacks(
      window({ refused: [refused('signature_retired_key', 3), refused('signature_unknown_key', 200, 3)] }),
      settings,
      now,
    );
    expect(forged?.severity).toBe('warning');
    expect(forged?.detail).toContain('forged (anyone can send one)');
  });

  it.each([
    ['signed_forbidden', 'add them to the allow-list'],
    ['signed_input', 'refused for what they carry'],
  ])(
    "is failing at 5 refusals of postbacks whose signature holds (%s): the marketplace's, being lost",
    (code, advice) => {
      expect(refusedPostbacks(window({ refused: [refused(code, 4)] }), settings, now)?.severity).toBe(
        'warning',
      );
      const reason = refusedPostbacks(window({ refused: [refused(code, 5)] }), settings, now);
      expect(reason?.severity).toBe('failing');
      expect(reason?.detail).toContain(advice);
      // Junk beside them changes nothing; junk alone is forged, most likely.
      const junk = refusedPostbacks(window({ refused: [refused('forbidden', 50)] }), settings, now);
      expect(junk?.severity).toBe('warning');
      expect(junk?.detail).toContain('forged, most likely');
    },
  );

  it('other codes never make it failing, however many', () => {
    expect(
      refusedPostbacks(
        window({ refused: [refused('signature_mismatch', 500), refused('forbidden', 50)] }),
        settings,
        now,
      )?.severity,
    ).toBe('warning');
  });

  it('counts the minutes the 15-minute window touches, not the one before', () => {
    const firstMinute = `${ago(15).slice(0, 16)}:00.000Z`;
    const before = new Date(Date.parse(firstMinute) - 1).toISOString();
    expect(
      refusedPostbacks(window({ refused: [{ at: firstMinute, code: 'forbidden', hits: 1 }] }), settings, now),
    ).toBeDefined();
    expect(
      refusedPostbacks(window({ refused: [{ at: before, code: 'forbidden', hits: 1 }] }), settings, now),
    ).toBeUndefined();
  });
});

describe('configuration_drift', () => {
  const drift = (registration: SurveyWindow['registration']) =>
    configurationDrift(window({ registration }), settings);

  it('is quiet for a verified survey, and for one without a recorded error', () => {
    expect(drift({ verified: true, failures: 0 })).toBeUndefined();
    expect(drift({ verified: false, failures: 0 })).toBeUndefined();
    expect(drift(undefined)).toBeUndefined();
  });

  it('is a warning after one failed apply, failing after two in a row', () => {
    const once = { verified: false, lastError: 'marketplace answered 503', failures: 1 };
    expect(drift(once)?.severity).toBe('warning');
    expect(drift({ ...once, failures: 2 })?.severity).toBe('failing');
  });

  it('waits through an outage: a marketplace that does not answer fails every survey at once', () => {
    const outage = (failures: number, unavailableFailures = failures) => ({
      verified: false,
      lastError: 'HTTP 503',
      failures,
      unavailableFailures,
    });
    expect(drift(outage(2))?.severity).toBe('warning');
    expect(drift(outage(2 + OUTAGE_EXTRA_FAILURES - 1))?.severity).toBe('warning');
    expect(drift(outage(2 + OUTAGE_EXTRA_FAILURES))?.severity).toBe('failing');
    // Refusals count as ever, whatever the outage around them: two make it failing.
    expect(drift(outage(3, 1))?.severity).toBe('failing');
    expect(drift(outage(3, 2))?.severity).toBe('warning');
  });

  it('quotes a stored error without the postback signature it may quote back', () => {
    const reason = drift({
      verified: false,
      lastError:
        'HTTP 400: Invalid pstbck URL: https://h.example/postback/1001/success?kid=k2&sig=O2dqVf_Ab3dE9xYz0AbC',
      failures: 1,
    });
    expect(reason?.detail).toContain('kid=k2&sig=[concealed]');
    expect(reason?.detail).not.toContain('O2dqVf_');
  });

  it('is failing at once when the marketplace read back something else', () => {
    const reason = drift({ verified: false, lastError: 'read-back differs in pstbck', failures: 1 });
    expect(reason?.severity).toBe('failing');
    expect(reason?.detail).toContain('read-back differs in pstbck');
    expect(reason?.detail).toContain('redirects show --survey 1001');
  });
});

describe('a survey as a whole', () => {
  it('with no traffic at all is ok, with no reason', () => {
    expect(evaluateHealth(window({ registration: { verified: true, failures: 0 } }), settings, now)).toEqual({
      state: 'ok',
      reasons: [],
    });
  });

  it('with redirects and their postbacks is ok', () => {
    const attempts = Array.from({ length: 30 }, (_, i) => success(5 + i, 0.5));
    expect(evaluateHealth(window({ attempts }), settings, now)).toEqual({ state: 'ok', reasons: [] });
  });

  it('takes the worst severity of its reasons and lists them all', () => {
    const evaluation = evaluateHealth(
      window({
        attempts: redirects(5),
        refused: [{ at: ago(1), code: 'signature_mismatch', hits: 1 }],
      }),
      settings,
      now,
    );
    expect(evaluation.state).toBe('failing');
    expect(evaluation.reasons.map((r) => r.code)).toEqual(['postbacks_stopped', 'refused_postbacks']);
    expect(
      evaluateHealth(window({ refused: [{ at: ago(1), code: 'forbidden', hits: 1 }] }), settings, now).state,
    ).toBe('warning');
  });

  it('reads back far enough for every rule: the longer of window plus grace and the stopped span', () => {
    expect(readFrom(settings, now).toISOString()).toBe(ago(30));
    expect(readFrom({ ...settings, stoppedMinutes: 20 }, now).toISOString()).toBe(ago(25));
  });
});
