/** Supplier API, surveys: the live list, one survey by id, the ones changed since an instant, and quotas. */
import { type Endpoint, failure, ok } from './answers';
import { type MarketplaceState, surveyView } from './state';

export function surveyEndpoints(state: MarketplaceState): Endpoint[] {
  return [
    {
      method: 'GET',
      pattern: /^\/supply\/getAllocatedSurveys$/,
      name: 'getAllocatedSurveys',
      answer: (r) => {
        const live = [...state.surveys.values()].filter((s) => s.live);
        return ok({
          msg: `${live.length} surveys`,
          result: live.map((s) => surveyView(state, s, r.version)),
        });
      },
    },
    {
      method: 'GET',
      pattern: /^\/supply\/getAllocatedSurveysBySurveyId\/([^/]+)$/,
      name: 'getAllocatedSurveysBySurveyId',
      answer: (r) => {
        const survey = state.surveys.get(Number(r.match[1]));
        if (!survey) return failure(404, `Survey ${r.match[1]} not found`);
        if (!survey.live) return ok({ msg: `Survey ${survey.surveyId} is Paused/Closed` });
        return ok({ msg: 'Survey is Live', result: [surveyView(state, survey, r.version)] });
      },
    },
    {
      method: 'GET',
      pattern: /^\/supply\/getAllocatedSurveysByDate\/([^/]+)$/,
      name: 'getAllocatedSurveysByDate',
      answer: (r) => {
        const raw = decodeURIComponent(r.match[1] as string);
        const since = Date.parse(raw);
        if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(raw) || Number.isNaN(since)) {
          return failure(400, 'Datetime must be an ISO 8601 UTC timestamp with milliseconds');
        }
        const changed = [...state.surveys.values()].filter(
          (s) => s.live && (s.createdAt.getTime() > since || s.modifiedAt.getTime() > since),
        );
        return ok({
          msg: `${changed.length} surveys`,
          result: changed.map((s) => surveyView(state, s, r.version)),
        });
      },
    },
    {
      method: 'GET',
      pattern: /^\/supply\/getQuotaForSurvey\/([^/]+)$/,
      name: 'getQuotaForSurvey',
      answer: (r) => {
        const survey = state.surveys.get(Number(r.match[1]));
        if (!survey) return failure(404, `Survey ${r.match[1]} not found`);
        return ok({
          msg: 'Quota',
          result: [
            {
              _id: `q${survey.surveyId}`,
              id: survey.surveyId * 10,
              quotaN: survey.sampleSize,
              title: 'Total',
              quotaName: '',
              hardStopType: 1,
              cmp: 0,
              clk: 0,
              hardStop: 1,
              quotaStatus: 'Open',
              RemainingN: survey.sampleSize,
              targeting: { AGE: [{ OptionId: 1, ageStart: 18, ageEnd: 65 }] },
            },
          ],
        });
      },
    },
  ];
}
