/**
 * Supplier API, respondents: surveys matched to a respondent, the pre-survey check, and the unique PID and IP
 * check, answered from the simulated surveys and transactions.
 */
import { type Endpoint, failure, type Json, ok } from './answers';
import type { MarketplaceState } from './state';

export function respondentEndpoints(state: MarketplaceState): Endpoint[] {
  return [
    {
      method: 'POST',
      pattern: /^\/supply\/respondent\/([^/]+)\/surveys$/,
      name: 'respondentSurveys',
      answer: (r) => {
        const survey = [...state.surveys.values()].find((s) => s.live);
        if (!survey) return failure(400, 'No surveys available');
        return ok({
          msg: 'Surveys',
          result: {
            surveyId: survey.surveyId,
            surveyName: survey.surveyName,
            jobCategory: 'Other',
            entryLink: `https://marketplace.local/entry/${survey.surveyId}?pid=${r.match[1]}`,
            deviceType: 'All',
            CPI: survey.cpi,
            LOI: survey.loi,
            IR: survey.ir,
            language: survey.language,
          },
        });
      },
    },
    {
      method: 'POST',
      pattern: /^\/supply\/respondentPreSurveyCheck$/,
      name: 'respondentPreSurveyCheck',
      answer: (r) => {
        const survNum = Number((r.body as Json | undefined)?.survNum);
        const survey = state.surveys.get(survNum);
        const disqualification = survey?.live ? [] : ['OpportunityFull'];
        return ok({
          msg: 'Checked',
          result: { status: disqualification.length ? 'disqualified' : 'prequalified', disqualification },
        });
      },
    },
    {
      method: 'POST',
      pattern: /^\/supply\/allowUniquePIDAndIP$/,
      name: 'allowUniquePIDAndIP',
      answer: (r) => {
        const pid = String((r.body as Json | undefined)?.pid ?? '');
        const seen = state.transactions.some(
          (t) => t.pid === pid && t.surveyId === Number((r.body as Json | undefined)?.survNum),
        );
        return ok({ msg: 'Checked', IP: true, PID: !seen });
      },
    },
  ];
}
