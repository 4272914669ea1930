/**
 * The local marketplace: the supplier API under /api/v1 and /api/v2 with the reference's shapes and the field
 * notes' behaviour, plus a small control API under /_sim for tests and `npm start` (add surveys, send
 * respondents, review completes, turn faults on). Loopback only; every fault is drawn from a seeded PRNG.
 *
 * This file only wires the parts: the endpoint groups (surveys, redirects, transactions, respondents,
 * reference data), the faults, and the control API each live in their own module.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Answer, type Endpoint, failure, readJson, reply } from './answers';
import { type ApiFaults, faultBeforeAnswer, NO_API_FAULTS, truncatedBody } from './api-faults';
import { control } from './control-api';
import { lookupEndpoints } from './lookup-endpoints';
import { seededRandom } from './random';
import { redirectEndpoints } from './redirect-endpoints';
import { respondentEndpoints } from './respondent-endpoints';
import { RespondentSimulator } from './respondents';
import { seedSurveys } from './seed';
import { MarketplaceState } from './state';
import { surveyEndpoints } from './survey-endpoints';
import { transactionEndpoints } from './transaction-endpoints';

export { type ApiFaults, NO_API_FAULTS } from './api-faults';

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

  const endpoints: Endpoint[] = [
    ...surveyEndpoints(state),
    ...redirectEndpoints(state),
    ...transactionEndpoints(state),
    ...respondentEndpoints(state),
    ...lookupEndpoints(),
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

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://local');
    const body = await readJson(req);
    if (url.pathname.startsWith('/_sim/')) {
      const targets = { state, respondents, knobs: marketplace, url: marketplace.url };
      return reply(res, await control(targets, req.method ?? 'GET', url.pathname, body));
    }
    const match = /^\/api\/(v1|v2)(\/.*)$/.exec(url.pathname);
    if (!match) return reply(res, failure(404, 'Not found'));
    if (req.headers['x-access-token'] !== options.accessToken)
      return reply(res, failure(401, 'Invalid access token'));
    const faults = marketplace.apiFaults;
    const fault = faultBeforeAnswer(random, faults);
    if (fault === 'hang') {
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
      return;
    }
    if (fault) return reply(res, fault);
    const answer = supplier(
      req.method ?? 'GET',
      match[1] as 'v1' | 'v2',
      match[2] as string,
      url.searchParams,
      body,
    );
    const truncated = truncatedBody(random, faults, answer);
    if (truncated !== undefined) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(truncated);
      return;
    }
    reply(res, answer);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      console.error('local marketplace: request failed', error);
      reply(res, { status: 500, body: { apiStatus: 'Failure', msg: 'internal error' } });
    });
  });
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
