import { describe, expect, it } from 'vitest';
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

  it('uses a template without placeholders as it is', () => {
    expect(landingFor(templates, { outcome: 'fail' })).toEqual({
      kind: 'redirect',
      location: 'https://panel.example.com/sorry',
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
