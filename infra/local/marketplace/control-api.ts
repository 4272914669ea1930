/**
 * The control API under /_sim, for tests and `npm start`: add surveys and set them live or paused, send
 * respondents, review completes, turn faults and the outcome mix on, and list what was sent or injected.
 * Never part of the supplier API, and needs no access token.
 *
 * Two knobs break one survey the way the survey health check must notice:
 * - Postbacks stop for some surveys, their redirects still sent: `PUT /_sim/faults` with
 *   `{"delivery":{"dropPostbacksFor":[1001]}}`; `{"delivery":{"dropPostbacksFor":[]}}` resumes them. The list is
 *   replaced, not merged; each dropped postback is recorded as a `dropped-postback` injection.
 * - A survey's postbacks re-pointed behind the supplier's back: `POST /_sim/surveys/1001/redirects/tamper` with
 *   no body (or `{"to":"https://elsewhere.example"}`) replaces the scheme and host of the survey's `pstbck` and
 *   `pstbck_fail` (its redirects stay), answering `{"redirectURL":{...}}`. By default they then go to a stand-in
 *   other host inside this marketplace (`/_sim/elsewhere/1001/...`, answered 200; `GET /_sim/elsewhere` lists what
 *   arrived there). surveySpecificRedirects reads the tampered settings back, so the redirect sync sees the drift;
 *   the supplier's `redirects apply` (setRedirectionForSurvey) puts the survey right again.
 */
import { parseAmount } from '../../../functions/shared/money';
import { type Answer, failure, type Json, ok } from './answers';
import { type ApiFaults, NO_API_FAULTS } from './api-faults';
import type { DeliveryFaults, OutcomeMix, RespondentSimulator } from './respondents';
import { type MarketplaceState, surveyView, transactionView } from './state';

export interface ControlTargets {
  readonly state: MarketplaceState;
  readonly respondents: RespondentSimulator;
  /** Where the supplier API's faults are set (the running marketplace). */
  readonly knobs: { apiFaults: ApiFaults };
  /** This marketplace's own base URL, under which the stand-in other host of a tamper answers. */
  readonly url: string;
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
    // Money as the marketplace writes it ("2.40", or a number), kept as a decimal string.
    const cpi = input.cpi === undefined ? undefined : parseAmount(input.cpi);
    if (input.cpi !== undefined && cpi === undefined)
      return failure(400, 'cpi must be an amount of money, such as "2.40"');
    const survey = state.addSurvey({
      ...(input as object),
      ...(cpi === undefined ? {} : { cpi }),
      surveyId,
      createdAt: new Date(),
      modifiedAt: new Date(),
    });
    return { status: 201, body: { apiStatus: 'success', survey: surveyView(state, survey, 'v2') } };
  }
  const status = /^\/_sim\/surveys\/(\d+)\/status$/.exec(path);
  if (method === 'POST' && status) {
    if (!state.surveys.has(Number(status[1]))) return failure(404, `Survey ${status[1]} not found`);
    state.setLive(Number(status[1]), input.live === true);
    return ok({ msg: 'status set' });
  }
  if (method === 'POST' && path === '/_sim/respondents') {
    if (!state.surveys.has(Number(input.surveyId)))
      return failure(input.surveyId === undefined ? 400 : 404, `Survey ${String(input.surveyId)} not found`);
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
  const tamper = /^\/_sim\/surveys\/(\d+)\/redirects\/tamper$/.exec(path);
  if (method === 'POST' && tamper) {
    const surveyId = Number(tamper[1]);
    if (!state.surveys.has(surveyId)) return failure(404, `Survey ${surveyId} not found`);
    const to = input.to ?? `${targets.url}/_sim/elsewhere/${surveyId}`;
    if (typeof to !== 'string' || !/^https?:\/\/[^/?#]+/i.test(to))
      return failure(400, 'to must be an http(s) URL');
    return ok({ msg: 'postbacks re-pointed', redirectURL: state.tamperPostbacks(surveyId, to) });
  }
  const elsewhere = /^\/_sim\/elsewhere\/(\d+)(\/.*)?$/.exec(path);
  if (elsewhere) {
    state.misdirect({ surveyId: Number(elsewhere[1]), method, path: elsewhere[2] ?? '/', at: new Date() });
    return ok({ msg: 'received (not the supplier)' });
  }
  if (method === 'GET' && path === '/_sim/elsewhere') {
    return ok({
      result: state.misdirected.map((p) => ({ ...p, at: p.at.toISOString() })),
    });
  }
  if (method === 'PUT' && path === '/_sim/faults') {
    const drop = (input.delivery as Json | undefined)?.dropPostbacksFor;
    if (
      drop !== undefined &&
      !(Array.isArray(drop) && drop.every((id) => Number.isSafeInteger(id) && (id as number) > 0))
    )
      return failure(400, 'delivery.dropPostbacksFor must be a list of survey ids');
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
