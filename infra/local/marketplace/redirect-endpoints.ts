/**
 * Supplier API, redirect settings: read a survey's (its own, else the global ones), set them with the
 * marketplace's merge semantics, and delete them.
 */
import {
  REDIRECT_SETTING_FIELDS,
  type RedirectSettings,
} from '../../../functions/marketplace/marketplace-records';
import { type Endpoint, failure, ok } from './answers';
import type { MarketplaceState } from './state';

export function redirectEndpoints(state: MarketplaceState): Endpoint[] {
  return [
    {
      method: 'GET',
      pattern: /^\/supply\/surveySpecificRedirects\/([^/]+)$/,
      name: 'surveySpecificRedirects',
      answer: (r) => {
        const surveyId = Number(r.match[1]);
        if (!state.surveys.has(surveyId)) return failure(404, `Survey ${r.match[1]} not found`);
        return ok({ msg: 'Redirects', redirectURL: state.effectiveRedirects(surveyId) });
      },
    },
    {
      method: 'PUT',
      pattern: /^\/supply\/setRedirectionForSurvey\/([^/]+)$/,
      name: 'setRedirectionForSurvey',
      answer: (r) => {
        const surveyId = Number(r.match[1]);
        if (!state.surveys.has(surveyId)) return failure(404, `Survey ${r.match[1]} not found`);
        const problem = redirectProblem(r.body);
        if (problem) return failure(400, problem);
        state.setRedirects(surveyId, r.body as RedirectSettings);
        return ok({ msg: `Redirects updated for survey ${surveyId}` });
      },
    },
    {
      method: 'DELETE',
      pattern: /^\/supply\/surveySpecificRedirects\/([^/]+)$/,
      name: 'deleteSurveySpecificRedirects',
      answer: (r) => {
        const surveyId = Number(r.match[1]);
        if (!state.surveys.has(surveyId)) return failure(404, `Survey ${r.match[1]} not found`);
        state.deleteRedirects(surveyId);
        return ok({ msg: `Survey level redirects removed for survey ${surveyId}` });
      },
    },
  ];
}

function redirectProblem(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'Body must be a JSON object';
  for (const [field, value] of Object.entries(body)) {
    if (!(REDIRECT_SETTING_FIELDS as readonly string[]).includes(field)) continue;
    if (typeof value !== 'string') return `${field} must be a string`;
    if (field.endsWith('Method') && value !== 'GET' && value !== 'POST')
      return `${field} must be GET or POST`;
  }
  return undefined;
}
