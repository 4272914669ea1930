import { describe, expect, it } from 'vitest';
import { parseKeyRing, verify } from '../../functions/receiving/signing';
import { buildSurveyUrls } from '../../functions/receiving/survey-urls';

const ring = parseKeyRing(JSON.stringify({ current: 'k1', k1: 'k'.repeat(40) }));

describe('survey URLs', () => {
  const urls = buildSurveyUrls('https://hits.example.com/', '4242', ring);

  it('are the seven fields setRedirectionForSurvey takes', () => {
    expect(Object.keys(urls).sort()).toEqual([
      'fUrl',
      'oUrl',
      'pstbck',
      'pstbck_fail',
      'qTUrl',
      'sUrl',
      'tUrl',
    ]);
  });

  it('keep the marketplace placeholders literally', () => {
    for (const url of Object.values(urls)) {
      expect(url).toContain('pid=[%%pid%%]');
      expect(url).toContain('token=[%%token%%]');
    }
  });

  it('point each field at its channel and outcome, and each signature verifies for exactly that', () => {
    const expected = {
      sUrl: ['redirect', 'success'],
      fUrl: ['redirect', 'fail'],
      oUrl: ['redirect', 'overquota'],
      qTUrl: ['redirect', 'quality'],
      tUrl: ['redirect', 'termination'],
      pstbck: ['postback', 'success'],
      pstbck_fail: ['postback', 'fail'],
    } as const;
    for (const [field, [channel, outcome]] of Object.entries(expected)) {
      const url = new URL(urls[field as keyof typeof urls]);
      expect(url.origin + url.pathname).toBe(`https://hits.example.com/${channel}/4242/${outcome}`);
      const check = verify(
        ring,
        { channel, surveyId: '4242', outcome },
        url.searchParams.get('kid') ?? undefined,
        url.searchParams.get('sig') ?? undefined,
        new Date(),
      );
      expect(check.valid, field).toBe(true);
    }
  });

  it('differ between surveys', () => {
    const other = buildSurveyUrls('https://hits.example.com', '4243', ring);
    expect(new URL(other.pstbck).searchParams.get('sig')).not.toBe(
      new URL(urls.pstbck).searchParams.get('sig'),
    );
  });

  it('put the postbacks on a host of their own when one is given, the redirects staying on the public one', () => {
    const apart = buildSurveyUrls('https://hits.example.com', '4242', ring, 'https://pb.example.com/');
    expect(apart.pstbck).toMatch(/^https:\/\/pb\.example\.com\/postback\/4242\/success\?/);
    expect(apart.pstbck_fail).toMatch(/^https:\/\/pb\.example\.com\/postback\/4242\/fail\?/);
    expect(apart.sUrl).toMatch(/^https:\/\/hits\.example\.com\/redirect\/4242\/success\?/);
    // The same signatures: a postback URL verifies wherever it is served.
    expect(new URL(apart.pstbck).searchParams.get('sig')).toBe(new URL(urls.pstbck).searchParams.get('sig'));
    expect(() => buildSurveyUrls('https://hits.example.com', '12', ring, 'pb.example.com')).toThrow(
      /base URL/,
    );
  });

  it('refuse a malformed survey id or base URL', () => {
    expect(() => buildSurveyUrls('https://hits.example.com', '12a', ring)).toThrow(/surveyId/);
    expect(() => buildSurveyUrls('ftp://hits.example.com', '12', ring)).toThrow(/base URL/);
    expect(() => buildSurveyUrls('https://hits.example.com?x=1', '12', ring)).toThrow(/base URL/);
  });
});
