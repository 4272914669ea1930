import { describe, expect, it } from 'vitest';
import { pidAsSent } from '../../functions/receiving/hit-request';
import { landingFor, SURVEY_OVER_PAGE, templateProblem } from '../../functions/receiving/landing-page';

describe('landing', () => {
  const templates = {
    success: 'https://panel.example.com/done?pid={pid}&s={surveyId}&o={outcome}',
    fail: 'https://panel.example.com/sorry',
  };

  it('substitutes pid, survey and outcome URL-encoded', () => {
    expect(landingFor(templates, { outcome: 'success', pid: 'a&b=c', surveyId: '7' })).toEqual({
      kind: 'redirect',
      location: 'https://panel.example.com/done?pid=a%26b%3Dc&s=7&o=success',
    });
  });

  it('substitutes a pid as its URL carried it, byte for byte, where one is given', () => {
    const query = (pid: string) => `kid=k1&pid=${pid}&token=t`;
    expect(pidAsSent(query('Jos%E9'), 'Jos%E9')).toBe('Jos%E9');
    expect(pidAsSent(query('caf%c3%a9+a%2Bb'), 'café a+b')).toBe('caf%C3%A9%20a%2Bb');
    // As encodeURIComponent writes a UTF-8 pid.
    for (const pid of ['a&b=c', 'Zoë 👩‍👩‍👧', "it's-(x)_~*!.", 'dGVzdC0x+/Q=='])
      expect(pidAsSent(query(encodeURIComponent(pid)), pid)).toBe(encodeURIComponent(pid));
    // Beside a blank or a placeholder the hit passed over, and between `&amp;`-separated parameters.
    expect(pidAsSent('pid=&pid=Jos%E9&token=t', 'Jos%E9')).toBe('Jos%E9');
    expect(pidAsSent('pid=[%%pid%%]&pid=Jos%e9', 'Jos%E9')).toBe('Jos%E9');
    expect(pidAsSent('token=t&amp;pid=Jos%E9', 'Jos%E9')).toBe('Jos%E9');
    // Not the query's pid (it came from a body): none.
    expect(pidAsSent(query('other'), 'p')).toBeUndefined();
    expect(pidAsSent('token=t', 'p')).toBeUndefined();
    expect(
      landingFor(templates, { outcome: 'success', pid: 'Jos%E9', pidEncoded: 'Jos%E9', surveyId: '7' }),
    ).toEqual({ kind: 'redirect', location: 'https://panel.example.com/done?pid=Jos%E9&s=7&o=success' });
  });

  it('uses a template without placeholders as it is', () => {
    expect(landingFor(templates, { outcome: 'fail' })).toEqual({
      kind: 'redirect',
      location: 'https://panel.example.com/sorry',
    });
  });

  it('sends a respondent whose panel gave no pid (`pid=`) on with the pid empty, as recorded', () => {
    expect(landingFor(templates, { outcome: 'success', pid: '', surveyId: '7' })).toMatchObject({
      kind: 'redirect',
    });
  });

  it('answers the plain page where no template is configured or a needed value is unknown', () => {
    expect(landingFor(templates, { outcome: 'overquota', pid: 'p' })).toEqual({
      kind: 'page',
      html: SURVEY_OVER_PAGE,
    });
    expect(landingFor(templates, { outcome: 'success', surveyId: '7' })).toEqual({
      kind: 'page',
      html: SURVEY_OVER_PAGE,
    });
    expect(landingFor(templates, {})).toEqual({ kind: 'page', html: SURVEY_OVER_PAGE });
  });

  it('the plain page is self-contained and says the survey is over', () => {
    expect(SURVEY_OVER_PAGE).toContain('This survey is over');
    expect(SURVEY_OVER_PAGE).not.toMatch(/<script|src=|href=/);
  });

  it('checks templates', () => {
    expect(templateProblem(templates.success)).toBeUndefined();
    expect(templateProblem('javascript:alert(1)')).toMatch(/http/);
    expect(templateProblem('not a url')).toMatch(/not a URL/);
    expect(templateProblem('https://x.example/{email}')).toMatch(/unknown placeholder/);
  });
});
