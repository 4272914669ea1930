/** The surveys the local marketplace starts with: a few Live ones at different prices, and one Paused. */
import type { MarketplaceState } from './state';

export function seedSurveys(state: MarketplaceState, now = new Date()): void {
  const created = new Date(now.getTime() - 3 * 86_400_000);
  state.addSurvey({
    surveyId: 1001,
    surveyName: 'Grocery habits',
    cpi: '1.25',
    loi: 8,
    createdAt: created,
    modifiedAt: created,
  });
  state.addSurvey({
    surveyId: 1002,
    surveyName: 'Streaming services',
    cpi: '2.10',
    loi: 15,
    createdAt: created,
    modifiedAt: created,
  });
  state.addSurvey({
    surveyId: 1003,
    surveyName: 'B2B software buyers',
    cpi: '4.75',
    loi: 20,
    createdAt: created,
    modifiedAt: created,
  });
  state.addSurvey({
    surveyId: 1004,
    surveyName: 'Travel plans',
    cpi: '0.90',
    loi: 5,
    live: false,
    createdAt: created,
    modifiedAt: created,
  });
}
