/**
 * Where a respondent goes after a redirect hit: the panel's own landing page for the outcome, or, where the
 * panel configured none, a small plain page. Never an error page: a person is waiting.
 */
import type { Outcome } from './outcome';

/** One URL template per outcome; `{pid}`, `{surveyId}` and `{outcome}` are substituted, URL-encoded. */
export type LandingTemplates = Partial<Record<Outcome, string>>;

export type Landing =
  | { readonly kind: 'redirect'; readonly location: string }
  | { readonly kind: 'page'; readonly html: string };

const PLACEHOLDERS = /\{(pid|surveyId|outcome)\}/g;

/** Checks a template at configuration time, so a bad one fails the cold start, not a respondent's visit. */
export function templateProblem(template: string): string | undefined {
  let url: URL;
  try {
    url = new URL(template.replace(PLACEHOLDERS, 'x'));
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an http(s) URL';
  const unknown = template.replace(PLACEHOLDERS, '').match(/\{[^}]*\}/);
  if (unknown) return `has an unknown placeholder ${unknown[0]}`;
  return undefined;
}

/**
 * The landing for a hit. Without an outcome (or a pid to substitute) the plain page is the only safe answer.
 * `pidEncoded`, the pid as its URL carried it (`pidAsSent`), is substituted as it is: a pid's byte that is not
 * UTF-8, kept as its escape in `pid`, reaches the panel as that byte, not as the escape's text.
 */
export function landingFor(
  templates: LandingTemplates,
  hit: {
    outcome?: Outcome | undefined;
    pid?: string | undefined;
    pidEncoded?: string | undefined;
    surveyId?: string | undefined;
  },
): Landing {
  const template = hit.outcome && templates[hit.outcome];
  const needsPid = template?.includes('{pid}');
  if (
    !template ||
    (needsPid && hit.pid === undefined) ||
    (template.includes('{surveyId}') && !hit.surveyId)
  ) {
    return { kind: 'page', html: SURVEY_OVER_PAGE };
  }
  const values = { pid: hit.pid ?? '', surveyId: hit.surveyId ?? '', outcome: hit.outcome ?? '' };
  const location = template.replace(PLACEHOLDERS, (_, name: keyof typeof values) =>
    name === 'pid' && hit.pidEncoded !== undefined ? hit.pidEncoded : encodeURIComponent(values[name]),
  );
  return { kind: 'redirect', location };
}

export const SURVEY_OVER_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Survey finished</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222;line-height:1.5}</style>
</head>
<body>
<h1>This survey is over</h1>
<p>Thank you for your time. You can close this window.</p>
</body>
</html>
`;
