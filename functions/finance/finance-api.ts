/**
 * The finance API: the summary of a period, the discrepancy list (filtered, paginated), and one attempt's
 * story. JSON by default; CSV with `Accept: text/csv` or `format=csv`. Protected by IAM (SigV4) in AWS and a
 * bearer token on the local stack; an unauthenticated call learns nothing.
 */
import { timingSafeEqual } from 'node:crypto';
import httpRouterHandler from '@middy/http-router';
import { queryParameter, strictQueryParameter } from '../receiving/hit-request';
import { identifierProblem } from '../receiving/identifiers';
import { type ApiEvent, type ApiResult, json, jsonRoute } from '../runtime/http-route';
import type { FinanceConfig } from '../runtime/runtime-config';
import { badRequest, Rejection } from '../shared/rejection';
import { DAY_ROWS_AT_MOST, type Finance, MAX_ANSWER_BYTES, readKind, readPeriod } from './finance-queries';
import { type PeriodSummary, type PeriodTotals, periodSummary } from './finance-report';
import { discrepanciesCsv, type SummaryDetail, summaryCsv } from './report-csv';

export interface FinanceApiDependencies {
  readonly queries: Pick<
    Finance,
    | 'summaryRows'
    | 'periodTotals'
    | 'discrepancyPage'
    | 'attempts'
    | 'failingSurveys'
    | 'failingReconciliations'
    | 'unregistered'
  >;
  readonly auth: FinanceConfig['auth'];
  /** The zone every answer names for its days. */
  readonly timeZone: string;
}

/** What every finance route reads from a request, checked before the route's own parameters. */
interface FinanceRequest {
  readonly event: ApiEvent;
  readonly query: URLSearchParams;
  readonly csv: boolean;
  readonly surveys: string[];
}

interface FinanceRoute {
  readonly method: 'GET';
  readonly path: string;
  /** The query parameters it reads: any other is a 400 (a misspelt `survey` would answer for every survey). */
  readonly parameters: readonly string[];
  readonly handler: (request: FinanceRequest) => Promise<ApiResult>;
}

/** The finance API's handler, from its queries, how callers authenticate and the zone its days are in. */
export function createFinanceHandler({ queries, auth, timeZone }: FinanceApiDependencies) {
  const routes: readonly FinanceRoute[] = [
    {
      method: 'GET',
      path: '/finance/summary',
      parameters: ['from', 'to', 'survey', 'detail', 'format'],
      handler: async ({ query, csv, surveys }) => {
        const period = periodOf(query);
        const detail = query.get('detail') ?? 'days';
        if (!SUMMARY_DETAILS.includes(detail))
          throw badRequest(`detail must be one of ${SUMMARY_DETAILS.join(', ')}`);
        // Surveys whose last reconciliation of days in the period failed: their figures are stale or missing, which
        // whoever reads the figures must be told (as the CLI's report tells it).
        const [figures, unreconciled, unknown, failingSurveys] = await Promise.all([
          // By day, the rows themselves (refused once more of them are read than an answer can carry); by survey or
          // in all, added up as they are read, never held: a month of ten thousand surveys is 300,000 rows.
          (detail === 'days'
            ? queries.summaryRows(period, surveys, { atMost: DAY_ROWS_AT_MOST }).then(periodSummary)
            : queries.periodTotals(period, surveys)) as Promise<PeriodTotals & Partial<PeriodSummary>>,
          queries.failingReconciliations(period, surveys),
          // A survey named that has no registration here answers zeros: said, as the CLI's report says it.
          queries.unregistered(surveys),
          // The health spells are JSON's alone (a CSV of them is the report's `failing` table).
          csv ? [] : queries.failingSurveys(period, surveys),
        ]);
        if (csv) {
          return csvResponse(
            summaryCsv(figures.days ?? figures, { level: detail as SummaryDetail, ...period }),
            `summary-${period.from}-${period.to}${detail === 'days' ? '' : `-${detail}`}.csv`,
            {
              'x-time-zone': timeZone,
              ...(unknown.length > 0 ? { 'x-unregistered-surveys': unknown.join(',') } : {}),
              // A header stays small (clients refuse headers past 8 to 16 KB, and a marketplace outage fails every
              // survey): the count, and the first surveys; the JSON answer lists them all.
              ...(unreconciled.length > 0
                ? {
                    'x-reconciliation-failing-count': String(unreconciled.length),
                    'x-reconciliation-failing': unreconciled
                      .slice(0, FAILING_IN_HEADER)
                      .map((f) => f.surveyId)
                      .join(','),
                  }
                : {}),
            },
          );
        }
        // The lists of what failed, bounded: a month of incidents at ten times is tens of thousands of spells, which
        // would push even the totals past what an answer carries. The first of each, and how many more (the CLI's
        // report, `--table failing`, lists them all).
        const bounded = <T>(name: string, list: readonly T[]) => ({
          [name]: list.slice(0, FAILING_IN_JSON),
          ...(list.length > FAILING_IN_JSON ? { [`${name}LeftOut`]: list.length - FAILING_IN_JSON } : {}),
        });
        return json(200, {
          timeZone,
          ...period,
          totals: figures.totals,
          ...(detail !== 'totals' ? { surveys: figures.surveys } : {}),
          ...(figures.days ? { days: figures.days } : {}),
          ...bounded('failingSurveys', failingSurveys),
          ...bounded('reconciliationFailing', unreconciled),
          ...(unknown.length > 0 ? { unregisteredSurveys: unknown } : {}),
        });
      },
    },
    {
      method: 'GET',
      path: '/finance/discrepancies',
      parameters: ['from', 'to', 'survey', 'kind', 'limit', 'cursor', 'format', 'foundFrom', 'foundTo'],
      handler: async ({ query, csv, surveys }) => {
        const period = periodOf(query);
        // What was found in these days (a reversal of a month already reported): both, or neither.
        const found =
          query.has('foundFrom') || query.has('foundTo')
            ? readPeriod(query.get('foundFrom') ?? undefined, query.get('foundTo') ?? undefined, [
                'foundFrom',
                'foundTo',
              ])
            : undefined;
        if (surveys.length > 1) throw badRequest('discrepancies take at most one survey');
        // Digits only: Number() would also read `0x10`, `1e2` and ` 1`.
        const written = query.get('limit') ?? '100';
        const limit = /^\d{1,4}$/.test(written) ? Number(written) : Number.NaN;
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
          throw badRequest('limit must be an integer from 1 to 1000');
        const kind = readKind(query.get('kind') ?? undefined);
        const [page, unknown] = await Promise.all([
          queries.discrepancyPage(period, {
            ...(surveys[0] ? { surveyId: surveys[0] } : {}),
            ...(kind ? { kind } : {}),
            limit,
            ...(found ? { found } : {}),
            // Given empty (a script's cursor variable that came back empty) is refused, not read as the first page.
            ...(query.get('cursor') !== null ? { cursor: query.get('cursor') as string } : {}),
          }),
          // A survey named that has no registration here has none: said, so a mistyped id does not read as a
          // survey without discrepancies (as the summary says it).
          queries.unregistered(surveys),
        ]);
        if (csv) {
          return csvResponse(discrepanciesCsv(page.items), `discrepancies-${period.from}-${period.to}.csv`, {
            'x-time-zone': timeZone,
            ...(page.nextCursor ? { 'x-next-cursor': page.nextCursor } : {}),
            ...(unknown.length > 0 ? { 'x-unregistered-surveys': unknown.join(',') } : {}),
          });
        }
        return json(200, {
          timeZone,
          ...period,
          ...(found ? { foundFrom: found.from, foundTo: found.to } : {}),
          items: page.items,
          ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
          ...(unknown.length > 0 ? { unregisteredSurveys: unknown } : {}),
        });
      },
    },
    {
      method: 'GET',
      path: '/finance/attempts/{surveyId}',
      parameters: ['pid', 'token', 'from', 'to', 'format'],
      handler: async ({ event, query }) => {
        const surveyId = event.pathParameters?.surveyId;
        const problem = identifierProblem('surveyId', surveyId);
        if (problem) throw badRequest(problem);
        // An attempt's hits and verdict history do not fit one row: asked for as CSV, it says so.
        if (query.get('format') === 'csv')
          throw badRequest(
            'attempts are answered as JSON only (format=csv is for the summary and discrepancies)',
          );
        // Decoded as the hit's was: a Latin-1 byte stays an escape (`Jos%E9`), where URLSearchParams would make it
        // a replacement character and find nothing.
        const pid = queryParameter(event.rawQueryString, 'pid');
        const token = strictQueryParameter(event.rawQueryString, 'token');
        for (const [field, value] of [
          ['pid', pid],
          ['token', token],
        ] as const) {
          if (value !== undefined && identifierProblem(field, value))
            throw badRequest(identifierProblem(field, value) as string);
        }
        if (pid === undefined && !token) throw badRequest('give pid or token');
        // `pid=` alone is the empty pid (an entry link that carried none, recorded by its token); beside a token it is
        // no pid asked for (the token's attempts, the empty pid's among them).
        const byPid = pid !== undefined && (pid !== '' || !token);
        const period = query.has('from') || query.has('to') ? periodOf(query) : undefined;
        const attempts = await queries.attempts(
          surveyId as string,
          { ...(byPid ? { pid } : {}), ...(token ? { token } : {}) },
          period,
        );
        if (attempts.length === 0) throw new Rejection(404, 'not_found', 'no such attempt');
        return json(200, { timeZone, attempts });
      },
    },
  ];
  // Routes by method and path (the stage is `$default`, so API Gateway's path is the route's path).
  const router = httpRouterHandler({
    routes: routes.map(({ method, path, parameters, handler }) => ({
      method,
      path,
      handler: (event: ApiEvent) => handler(readRequest(event, parameters)),
    })),
    notFoundResponse: () => {
      throw new Rejection(404, 'not_found', 'no such route');
    },
  });

  return jsonRoute(async (event, context) => {
    authorize(auth, event);
    const result = (await router(event, context)) as ApiResult;
    // Lambda refuses an answer over 6 MB (a 502 from API Gateway): say what to ask for instead.
    const bytes = Buffer.byteLength(JSON.stringify(result), 'utf8');
    if (bytes > MAX_ANSWER_BYTES) {
      // The summary can leave out its per-day or per-survey rows, and its CSV carries the surveys failing as a count
      // and the first of them; the other answers only narrow. Never the request just refused.
      const summary = event.rawPath === '/finance/summary';
      const detail = event.queryStringParameters?.detail ?? 'days';
      const csv = String(result.headers?.['content-type'] ?? '').startsWith('text/csv');
      const smaller = [
        ...(detail === 'days' ? ['detail=surveys'] : []),
        ...(detail !== 'totals' ? ['detail=totals'] : []),
        ...(csv ? [] : ['format=csv']),
      ];
      // A page of discrepancies narrows by its limit (one day of one survey can hold pages too large at 1,000, its ids
      // up to 2 KB each): the limit that would fit, with room.
      const paged = event.rawPath === '/finance/discrepancies';
      const limit = Number(event.queryStringParameters?.limit ?? '100');
      const fits = Math.max(1, Math.floor((limit * MAX_ANSWER_BYTES * 0.8) / bytes));
      const advice = paged
        ? `ask for a smaller page (limit=${fits}) and follow its cursor`
        : 'ask for fewer days or surveys';
      throw badRequest(
        `the answer would be ${(bytes / 1_000_000).toFixed(1)} MB, more than the ${MAX_ANSWER_BYTES / 1_000_000} MB an answer can carry: ${advice}${summary && smaller.length > 0 ? `, or for the summary with ${smaller.join(' or ')}` : ''}`,
      );
    }
    return result;
  });
}

/** The surveys a CSV answer's `x-reconciliation-failing` header names at most. */
const FAILING_IN_HEADER = 50;
/** The failing spells, and the surveys failing reconciliation, a JSON summary lists at most (each). */
export const FAILING_IN_JSON = 1_000;

/** How much of the summary to answer: per survey and day (all), per survey and totals, or the totals alone. */
const SUMMARY_DETAILS: readonly string[] = ['days', 'surveys', 'totals'] satisfies readonly SummaryDetail[];

/** IAM: API Gateway verified the SigV4 signature and says whose it was; bearer: the local token, compared in constant time. */
function authorize(auth: FinanceConfig['auth'], event: ApiEvent): void {
  if (auth.mode === 'iam') {
    const iam = (event.requestContext as { authorizer?: { iam?: { userArn?: string } } }).authorizer?.iam;
    if (!iam?.userArn) throw new Rejection(403, 'forbidden', 'not authorized');
    return;
  }
  const header = event.headers?.authorization ?? '';
  // The scheme's name is case-insensitive (RFC 9110): `bearer` is `Bearer`.
  const presented = /^Bearer +(\S+)$/i.exec(header)?.[1];
  if (!presented) throw new Rejection(401, 'unauthorized', 'authentication required');
  const expected = Buffer.from(auth.token);
  const given = Buffer.from(presented);
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    throw new Rejection(403, 'forbidden', 'not authorized');
}

function readRequest(event: ApiEvent, parameters: readonly string[]): FinanceRequest {
  const query = new URLSearchParams(event.rawQueryString ?? '');
  // A SigV4 signature sent in the query (a presigned URL) is API Gateway's to check, not a parameter of the route.
  const names = [...new Set(query.keys())].filter((name) => !/^x-amz-/i.test(name));
  const unknown = names.filter((name) => !parameters.includes(name));
  if (unknown.length > 0)
    throw badRequest(
      `unknown query parameter ${unknown.map((name) => JSON.stringify(name.slice(0, 40))).join(', ')}: this route reads ${parameters.join(', ')}`,
    );
  // Every parameter but `survey` (a list) is read once: a second value would be dropped without a word (`from`
  // given twice answered for the first).
  const repeated = names.filter((name) => name !== 'survey' && query.getAll(name).length > 1);
  if (repeated.length > 0)
    throw badRequest(
      `query parameter ${repeated.map((name) => JSON.stringify(name)).join(', ')} given more than once`,
    );
  const format = query.get('format');
  if (format !== null && !['csv', 'json'].includes(format)) throw badRequest('format must be json or csv');
  // `format` decides when given; else the Accept header, by its preference.
  const csv = format !== null ? format === 'csv' : prefersCsv(event.headers?.accept ?? '');
  return { event, query, csv, surveys: readSurveys(query) };
}

/** Whether an Accept header prefers CSV to JSON: `text/csv` with a weight above JSON's (or as high, listed first). */
function prefersCsv(accept: string): boolean {
  const ranges = accept.split(',').map((range, order) => {
    const [type = '', ...params] = range.split(';').map((part) => part.trim().toLowerCase());
    const q = params.find((param) => param.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    return { type, weight: Number.isFinite(weight) ? weight : 0, order };
  });
  const best = (types: readonly string[]) =>
    ranges
      .filter((range) => types.includes(range.type))
      .sort((a, b) => b.weight - a.weight || a.order - b.order)[0];
  const csv = best(['text/csv']);
  const json = best(['application/json', 'application/*', '*/*']);
  if (!csv || csv.weight <= 0) return false;
  return !json || csv.weight > json.weight || (csv.weight === json.weight && csv.order < json.order);
}

const periodOf = (query: URLSearchParams) =>
  readPeriod(query.get('from') ?? undefined, query.get('to') ?? undefined);

function readSurveys(query: URLSearchParams): string[] {
  const surveys = query.getAll('survey').flatMap((value) => value.split(','));
  // An empty one (`survey=`, a script's unset variable, or `1,,2`) names no survey: refused rather than read as every
  // survey's money.
  if (surveys.includes(''))
    throw badRequest(
      'survey is empty: leave it out for every survey, or name one (survey=1001 or survey=1001,1002)',
    );
  for (const surveyId of surveys) {
    const problem = identifierProblem('surveyId', surveyId);
    if (problem) throw badRequest(`survey: ${problem}`);
  }
  const distinct = [...new Set(surveys)];
  if (distinct.length > 100) throw badRequest('at most 100 surveys per request');
  return distinct;
}

function csvResponse(body: string, filename: string, headers: Record<string, string>): ApiResult {
  return {
    statusCode: 200,
    headers: {
      'content-type': 'text/csv; charset=utf-8',
      'content-disposition': `attachment; filename="${filename}"`,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      ...headers,
    },
    body,
  };
}
