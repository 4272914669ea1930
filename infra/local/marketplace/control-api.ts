/**
 * The control API under /_sim, for tests and `npm start`: add surveys and set them live or paused, send
 * respondents, review completes, turn faults and the outcome mix on, and list what was sent or injected.
 * Never part of the supplier API, and needs no access token.
 */
import { type Answer, failure, type Json, ok } from './answers';
import { type ApiFaults, NO_API_FAULTS } from './api-faults';
import type { DeliveryFaults, OutcomeMix, RespondentSimulator } from './respondents';
import { type MarketplaceState, surveyView, transactionView } from './state';

export interface ControlTargets {
  readonly state: MarketplaceState;
  readonly respondents: RespondentSimulator;
  /** Where the supplier API's faults are set (the running marketplace). */
  readonly knobs: { apiFaults: ApiFaults };
}

/** Answers one control request. */
export async function control(
  targets: ControlTargets,
  method: string,
  path: string,
  body: unknown,
): Promise<Answer> {
  const { state, respondents, knobs } = targets;
  const input = (body ?? {}) as Json;
  if (method === 'POST' && path === '/_sim/surveys') {
    const surveyId = Number(input.surveyId);
    if (!Number.isSafeInteger(surveyId) || surveyId <= 0)
      return failure(400, 'surveyId must be a positive integer');
    const survey = state.addSurvey({
      ...(input as object),
      surveyId,
      createdAt: new Date(),
      modifiedAt: new Date(),
    });
    return { status: 201, body: { apiStatus: 'success', survey: surveyView(state, survey, 'v2') } };
  }
  const status = /^\/_sim\/surveys\/(\d+)\/status$/.exec(path);
  if (method === 'POST' && status) {
    state.setLive(Number(status[1]), input.live === true);
    return ok({ msg: 'status set' });
  }
  if (method === 'POST' && path === '/_sim/respondents') {
    const count = Math.min(Number(input.count ?? 1), 10_000);
    const results = [];
    for (let i = 0; i < count; i++) {
      results.push(
        await respondents.respondent({
          surveyId: Number(input.surveyId),
          ...(typeof input.status === 'string' ? { status: input.status } : {}),
        }),
      );
    }
    return ok({
      attempts: results.map((r) => ({
        token: r.transaction.token,
        pid: r.transaction.pid,
        status: r.transaction.status,
      })),
    });
  }
  if (method === 'POST' && path === '/_sim/review') {
    return ok({
      reviewed: state.review({
        invalidShare: Number(input.invalidShare ?? 0),
        statusChangeShare: Number(input.statusChangeShare ?? 0),
      }),
    });
  }
  if (method === 'PUT' && path === '/_sim/faults') {
    if (input.api) knobs.apiFaults = { ...NO_API_FAULTS, ...(input.api as Partial<ApiFaults>) };
    if (input.delivery)
      respondents.faults = { ...respondents.faults, ...(input.delivery as Partial<DeliveryFaults>) };
    if (input.mix) respondents.mix = input.mix as OutcomeMix;
    return ok({ apiFaults: knobs.apiFaults, delivery: respondents.faults });
  }
  const injectedOfSurvey = /^\/_sim\/injected\/(\d+)$/.exec(path);
  if (method === 'GET' && injectedOfSurvey) {
    const surveyId = Number(injectedOfSurvey[1]);
    const result = state
      .transactionsOf(surveyId)
      .filter((t) => state.injections.has(t.token))
      .map((t) => ({
        token: t.token,
        pid: t.pid,
        status: t.status,
        injected: state.injections.get(t.token),
      }));
    return ok({ result });
  }
  const transactionsOfSurvey = /^\/_sim\/transactions\/(\d+)$/.exec(path);
  if (method === 'GET' && transactionsOfSurvey) {
    const surveyId = Number(transactionsOfSurvey[1]);
    return ok({
      result: state.transactionsOf(surveyId).map((t) => transactionView(t, state.surveys.get(surveyId))),
    });
  }
  return failure(404, `No control endpoint ${method} ${path}`);
}
