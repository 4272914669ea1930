/**
 * The local marketplace: the supplier API under /api/v1 and /api/v2 with the reference's shapes and the field
 * notes' behaviour, plus a small control API under /_sim for tests and `npm start` (add surveys, send
 * respondents, review completes, turn faults on). Loopback only; every fault is drawn from a seeded PRNG.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  REDIRECT_SETTING_FIELDS,
  type RedirectSettings,
  TRANSACTION_STATUSES,
} from '../../../functions/marketplace/marketplace-records';
import { seededRandom } from './random';
import { type DeliveryFaults, type OutcomeMix, RespondentSimulator } from './respondents';
import { seedSurveys } from './seed';
import { MarketplaceState, surveyView, transactionView } from './state';

/** Shares of supplier API calls answered with a fault instead of the real answer. */
export interface ApiFaults {
  tooManyRequests: number;
  serverError: number;
  /** Never answered (the client's timeout fires). */
  timeout: number;
  /** 200 with a truncated JSON body. */
  malformed: number;
}

export const NO_API_FAULTS: ApiFaults = { tooManyRequests: 0, serverError: 0, timeout: 0, malformed: 0 };

export interface LocalMarketplaceOptions {
  readonly host?: string;
  readonly port?: number;
  readonly accessToken: string;
  readonly seed?: number;
  /** Seed the usual surveys (default true). */
  readonly seedSurveys?: boolean;
}

export interface LocalMarketplace {
  readonly url: string;
  readonly state: MarketplaceState;
  readonly respondents: RespondentSimulator;
  apiFaults: ApiFaults;
  /** Requests served on the supplier API, by `METHOD /path-pattern`. */
  readonly calls: string[];
  stop(): Promise<void>;
}

type Json = Record<string, unknown>;
interface Answer {
  status: number;
  body: unknown;
}
interface EndpointRequest {
  readonly match: RegExpExecArray;
  readonly version: 'v1' | 'v2';
  readonly query: URLSearchParams;
  readonly body: unknown;
}
interface Endpoint {
  readonly method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  readonly pattern: RegExp;
  readonly name: string;
  readonly answer: (request: EndpointRequest) => Answer;
}

const ok = (body: Json): Answer => ({ status: 200, body: { apiStatus: 'success', ...body } });
const failure = (status: number, msg: string): Answer => ({ status, body: { apiStatus: 'Failure', msg } });

export async function startLocalMarketplace(options: LocalMarketplaceOptions): Promise<LocalMarketplace> {
  const random = seededRandom(options.seed ?? 20261121);
  const state = new MarketplaceState(random);
  if (options.seedSurveys ?? true) seedSurveys(state);
  const respondents = new RespondentSimulator(state);
  const hanging = new Set<ServerResponse>();
  const calls: string[] = [];

  const marketplace: LocalMarketplace = {
    url: '',
    state,
    respondents,
    apiFaults: { ...NO_API_FAULTS },
    calls,
    stop: async () => {},
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      console.error('local marketplace: request failed', error);
      reply(res, { status: 500, body: { apiStatus: 'Failure', msg: 'internal error' } });
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://local');
    const body = await readJson(req);
    if (url.pathname.startsWith('/_sim/'))
      return reply(res, await control(req.method ?? 'GET', url.pathname, body));
    const match = /^\/api\/(v1|v2)(\/.*)$/.exec(url.pathname);
    if (!match) return reply(res, failure(404, 'Not found'));
    if (req.headers['x-access-token'] !== options.accessToken)
      return reply(res, failure(401, 'Invalid access token'));
    const faults = marketplace.apiFaults;
    if (random.chance(faults.timeout)) {
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
      return;
    }
    if (random.chance(faults.tooManyRequests)) return reply(res, failure(429, 'Too many requests'));
    if (random.chance(faults.serverError)) return reply(res, failure(503, 'Service unavailable'));
    const answer = supplier(
      req.method ?? 'GET',
      match[1] as 'v1' | 'v2',
      match[2] as string,
      url.searchParams,
      body,
    );
    if (random.chance(faults.malformed)) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body).slice(0, 20));
      return;
    }
    reply(res, answer);
  }

  /** The supplier endpoints: method, path pattern, name (for the call log) and the answer. */
  const endpoints: Endpoint[] = [
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
    {
      method: 'GET',
      pattern: /^\/supply\/getSurveyTransactions\/([^/]+)$/,
      name: 'getSurveyTransactions',
      answer: (r) => {
        return transactions(Number(r.match[1]), r.query);
      },
    },
    {
      method: 'GET',
      pattern: /^\/supply\/getQuestionsByCategory\/([^/]+)(?:\/([^/]+))?$/,
      name: 'getQuestionsByCategory',
      answer: (r) => {
        return ok({
          msg: 'Questions',
          result: [
            {
              QuestionId: 42,
              QuestionText: 'What is your age?',
              QuestionKey: 'AGE',
              QuestionType: 'Numeric Open Ended',
              language: r.match[2] ?? 'ENGLISH',
              Category: ['Demographic'],
            },
            {
              QuestionId: 43,
              QuestionText: 'What is your gender?',
              QuestionKey: 'GENDER',
              QuestionType: 'Single Punch',
              language: r.match[2] ?? 'ENGLISH',
              Category: ['Demographic'],
            },
          ],
        });
      },
    },
    {
      method: 'GET',
      pattern: /^\/supply\/getAnswersByQuesKey\/([^/]+)$/,
      name: 'getAnswersByQuesKey',
      answer: () => {
        return ok({
          msg: 'Answers',
          result: {
            QuestionId: 43,
            QuestionText: 'What is your gender?',
            QuestionType: 'Single Punch',
            QuestionOptions: [
              { OptionText: 'Male', id: 1, Order: 1 },
              { OptionText: 'Female', id: 2, Order: 2 },
            ],
          },
        });
      },
    },
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
      method: 'GET',
      pattern: /^\/resources\/termReasonCategories\/([^/]+)$/,
      name: 'termReasonCategories',
      answer: (r) => {
        return ok({
          msg: 'Term reasons',
          result: [
            {
              name: 'ClientQuotaFull',
              code: Number(r.match[1]) || 1005,
              desc: 'Qualifying quota already met',
              infoUrl: '',
            },
          ],
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
    {
      method: 'GET',
      pattern: /^\/mapping\/metadata\/?$/,
      name: 'metadata',
      answer: () => {
        return ok({
          msg: 'Metadata',
          result: {
            countries: [{ name: 'United States', code: 1 }],
            languages: [{ name: 'ENGLISH', code: 1 }],
            categories: ['Other'],
            jobTypes: ['Consumer'],
            questionTypes: ['Single Punch', 'Numeric Open Ended'],
            groupTypes: ['Consumer', 'B2B'],
            deviceType: ['All'],
            surveyStatus: {
              PreSurveyDNC: 1,
              Completed: 2,
              Failed: 3,
              OverQuota: 4,
              QualityTermination: 5,
              PreSurveyTermination: 6,
              StartSurveyDNC: 7,
              PreSurveyOverQuota: 8,
              PreSurveyQualityTermination: 9,
            },
            dmaMapping: [{ OptionId: 1, DMA_NAME: 'New York', DMA_CODE: 501 }],
          },
        });
      },
    },
  ];

  function supplier(
    method: string,
    version: 'v1' | 'v2',
    path: string,
    query: URLSearchParams,
    body: unknown,
  ): Answer {
    for (const endpoint of endpoints) {
      const m = endpoint.method === method ? endpoint.pattern.exec(path) : null;
      if (!m) continue;
      calls.push(`${method} ${endpoint.name}`);
      return endpoint.answer({ match: m, version, query, body });
    }
    return failure(404, `No endpoint ${method} ${path}`);
  }

  function transactions(surveyId: number, query: URLSearchParams): Answer {
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

  async function control(method: string, path: string, body: unknown): Promise<Answer> {
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
      if (input.api) marketplace.apiFaults = { ...NO_API_FAULTS, ...(input.api as Partial<ApiFaults>) };
      if (input.delivery)
        respondents.faults = { ...respondents.faults, ...(input.delivery as Partial<DeliveryFaults>) };
      if (input.mix) respondents.mix = input.mix as OutcomeMix;
      return ok({ apiFaults: marketplace.apiFaults, delivery: respondents.faults });
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

  server.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const address = server.address() as AddressInfo;
  Object.assign(marketplace, {
    url: `http://${options.host ?? '127.0.0.1'}:${address.port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  });
  return marketplace;
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

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function reply(res: ServerResponse, answer: Answer) {
  const body = JSON.stringify(answer.body);
  res.writeHead(answer.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}
