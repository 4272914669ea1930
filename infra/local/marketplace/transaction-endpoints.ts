/**
 * Supplier API, transactions: a survey's transactions, filtered by Pacific click day and status, with the
 * marketplace's "No data found" 400 for an empty answer.
 */
import { TRANSACTION_STATUSES } from '../../../functions/marketplace/marketplace-records';
import { type Answer, type Endpoint, failure, ok } from './answers';
import { type MarketplaceState, transactionView } from './state';

export function transactionEndpoints(state: MarketplaceState): Endpoint[] {
  return [
    {
      method: 'GET',
      pattern: /^\/supply\/getSurveyTransactions\/([^/]+)$/,
      name: 'getSurveyTransactions',
      answer: (r) => transactions(state, Number(r.match[1]), r.query),
    },
  ];
}

function transactions(state: MarketplaceState, surveyId: number, query: URLSearchParams): Answer {
  const startDate = query.get('startDate') ?? undefined;
  const endDate = query.get('endDate') ?? undefined;
  if ((startDate === undefined) !== (endDate === undefined))
    return failure(400, 'startDate and endDate must be given together');
  for (const day of [startDate, endDate]) {
    if (day !== undefined && (!/^\d{4}-\d{2}-\d{2}$/.test(day) || Number.isNaN(Date.parse(day)))) {
      return failure(400, `Invalid date: ${day}`);
    }
  }
  let statuses: string[] | undefined;
  const status = query.get('status');
  if (status !== null) {
    statuses = status.split(',');
    const bad = statuses.find((s) => !(TRANSACTION_STATUSES as readonly string[]).includes(s));
    if (bad !== undefined) return failure(400, `Invalid status: ${JSON.stringify(bad)}`);
  }
  const rows = state.transactionsOf(surveyId, { startDate, endDate, statuses });
  if (rows.length === 0) return failure(400, `No data found for survey: ${surveyId}`);
  const survey = state.surveys.get(surveyId);
  return ok({ msg: `${rows.length} transactions`, result: rows.map((t) => transactionView(t, survey)) });
}
