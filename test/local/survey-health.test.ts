/**
 * The survey health check over the whole local loop: the local marketplace sends respondents through the real
 * receivers, one survey's postbacks are dropped at the marketplace, and the health check (the deployed handler's
 * parts, with the local notifier posting to a webhook) finds it failing with the right reason, notifies once,
 * stays quiet while it stays failing, and notifies the recovery once the postbacks come back. Surveys without
 * traffic stay ok. The check runs with its clock a little ahead, so the grace period has passed without waiting.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { healthCheck } from '../../functions/health/health-check';
import { createHealthHandler } from '../../functions/health/health-handler';
import type { HealthNotice } from '../../functions/health/notifier';
import {
  createDocumentClient,
  createHealthStore,
  createLedgerStore,
  createSurveyRegistry,
} from '../../functions/ledger/ledger-store';
import { localNotifier } from '../../functions/runtime/health-notifiers';
import { readHealthConfig } from '../../functions/runtime/runtime-config';
import { lambdaContext } from '../../infra/local/api-gateway';
import type { LocalMarketplace } from '../../infra/local/marketplace/server';
import { startTestStack, syncRedirectsOnce, type TestStack } from '../support/local-stack';

const DROPPED = 5101;
const HEALTHY = 5102;
let test: TestStack;
let marketplace: LocalMarketplace;
let webhook: Server;
const notices: HealthNotice[] = [];

beforeAll(async () => {
  webhook = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    notices.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as HealthNotice);
    response.end('ok');
  });
  await new Promise<void>((done) => webhook.listen(0, '127.0.0.1', done));
  test = await startTestStack({
    RESPONDENT_INTERVAL_MS: '0',
    HEALTH_WEBHOOK_URL: `http://127.0.0.1:${(webhook.address() as AddressInfo).port}/notices`,
  });
  marketplace = test.stack.marketplace as LocalMarketplace;
  for (const surveyId of [DROPPED, HEALTHY]) marketplace.state.addSurvey({ surveyId });
  await syncRedirectsOnce();
});
afterAll(async () => {
  await test?.stack.stop();
  await new Promise((done) => webhook?.close(done));
});

/** One run of the health check with its clock `aheadMs` past the real one. */
async function runHealth(aheadMs: number) {
  const config = readHealthConfig(process.env);
  const client = createDocumentClient({ endpoint: test.endpoint });
  const check = healthCheck({
    attempts: createLedgerStore(client, test.tableName),
    registry: createSurveyRegistry(client, test.tableName),
    health: createHealthStore(client, test.tableName),
    settings: config.settings,
    concurrency: 4,
  });
  const handler = createHealthHandler({
    check,
    store: createHealthStore(client, test.tableName),
    notifier: localNotifier({ webhookUrl: process.env.HEALTH_WEBHOOK_URL, timeoutMs: 2000 }),
    now: () => new Date(Date.now() + aheadMs),
  });
  return handler({}, lambdaContext('health', 'local'));
}

async function respondents(surveyId: number, count: number) {
  for (let i = 0; i < count; i++) await marketplace.respondents.respondent({ surveyId, status: 'Completed' });
}

describe('survey health on the local stack', () => {
  it('a survey whose postbacks stop turns failing once, stays failing quietly, and recovers once', async () => {
    marketplace.respondents.faults = { ...marketplace.respondents.faults, dropPostbacksFor: [DROPPED] };
    await respondents(DROPPED, 6);
    await respondents(HEALTHY, 6);

    // Past the grace period (one minute locally), the redirects have waited long enough for their postbacks.
    const first = await runHealth(90_000);
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ surveyId: String(DROPPED), kind: 'failing', to: 'failing' });
    expect(notices[0]?.reasons.map((r) => r.code)).toContain('postbacks_stopped');
    expect(first.failing).toBe(1);

    const registry = createSurveyRegistry(createDocumentClient({ endpoint: test.endpoint }), test.tableName);
    const registered = (await registry.list()).filter((r) => r.state === 'active');
    // Every other survey, with or without traffic, is not failing: silence is not a fault.
    expect(first.ok + first.warning).toBe(registered.length - 1);
    const health = createHealthStore(createDocumentClient({ endpoint: test.endpoint }), test.tableName);
    const stored = await health.getMany([String(DROPPED), String(HEALTHY)]);
    expect(stored.get(String(DROPPED))?.state).toBe('failing');
    expect(stored.get(String(HEALTHY))?.state ?? 'ok').toBe('ok');

    // Still failing on the next run: no second notice.
    await runHealth(100_000);
    expect(notices).toHaveLength(1);

    // The fault is lifted and postbacks arrive again: one recovery notice.
    marketplace.respondents.faults = { ...marketplace.respondents.faults, dropPostbacksFor: [] };
    await respondents(DROPPED, 6);
    const recovered = await runHealth(90_000);
    expect(recovered.failing).toBe(0);
    expect(notices).toHaveLength(2);
    expect(notices[1]).toMatchObject({ surveyId: String(DROPPED), kind: 'recovered', from: 'failing' });
    await runHealth(100_000);
    expect(notices).toHaveLength(2);
  });
});
