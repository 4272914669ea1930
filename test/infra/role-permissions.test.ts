/**
 * The receivers' ledger calls against their synthesized roles: every DynamoDB request the hit path can make (a
 * retried write read back, a refusal counted, a late hit flagging its day, a buffered hit delivered twice) runs
 * against the embedded engine through a guard that refuses, as IAM would, any action or partition key the
 * function's role does not allow. A role narrower than its code fails here, not in the supplier's account.
 */

import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAttemptFeed } from '../../functions/ledger/attempt-feed';
import { feedCoverage } from '../../functions/ledger/feed-coverage';
import {
  createDayIndexBackfill,
  createDocumentClient,
  createLedgerStore,
  createReconciliationStore,
  createSurveyRegistry,
  firstHitItem,
} from '../../functions/ledger/ledger-store';
import { createMarketplaceClient } from '../../functions/marketplace/marketplace-client';
import { pacificDay, pacificDayRange } from '../../functions/marketplace/pacific-time';
import { redirectConfiguration } from '../../functions/marketplace/redirect-configuration';
import { parseKeyRing } from '../../functions/receiving/signing';
import { feedAttempts } from '../../functions/reconciliation/feed-attempts';
import { reconciler } from '../../functions/reconciliation/reconciler';
import { nextDay } from '../../functions/reconciliation/verdict-rules';
import type { ReceiverFunction } from '../../infra/constructs/receiver-function';
import { startLocalMarketplace } from '../../infra/local/marketplace/server';
import { ReceiverStack } from '../../infra/receiver-stack';
import { survey } from '../support/concurrent-writers';
import { freshTable } from '../support/ledger';

interface Grant {
  readonly actions: readonly string[];
  /** `dynamodb:LeadingKeys` prefixes the statement is limited to, or undefined for any key. */
  readonly prefixes?: readonly string[];
  /** `dynamodb:Attributes` the statement is limited to (`*` ends a prefix), or undefined for any. */
  readonly attributes?: readonly string[];
  /** `dynamodb:ReturnValues` the statement allows, or undefined for any. */
  readonly returnValues?: readonly string[];
}

let stack: ReceiverStack;
let template: Template;
/** The same with `attemptFeed`. */
let feedStack: ReceiverStack;
let feedTemplate: Template;

beforeAll(() => {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  stack = new ReceiverStack(app, 'Roles', {});
  template = Template.fromStack(stack);
  feedStack = new ReceiverStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'FeedRoles', {
    attemptFeed: true,
  });
  feedTemplate = Template.fromStack(feedStack);
}, 60_000);

/** The DynamoDB grants on the ledger table itself (not its indexes) in a function's role. */
function tableGrants(fn: ReceiverFunction, of = { stack, template }): Grant[] {
  const { stack, template } = of;
  const roleId = stack.getLogicalId(fn.role.node.defaultChild as import('aws-cdk-lib').CfnElement);
  const tableId = stack.getLogicalId(
    stack.ledger.table.node.defaultChild as import('aws-cdk-lib').CfnElement,
  );
  const policies = template.findResources('AWS::IAM::Policy', { Properties: { Roles: [{ Ref: roleId }] } });
  type Statement = {
    Action: string | string[];
    Resource: unknown;
    Condition?: Record<string, Record<string, unknown>>;
  };
  const statements = Object.values(policies).flatMap(
    (p) =>
      (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument
        .Statement,
  );
  return statements
    .filter((s) => JSON.stringify(s.Resource) === JSON.stringify({ 'Fn::GetAtt': [tableId, 'Arn'] }))
    .map((s) => {
      const leading = s.Condition?.['ForAllValues:StringLike']?.['dynamodb:LeadingKeys'] as
        | string[]
        | undefined;
      const attributes = s.Condition?.['ForAllValues:StringLike']?.['dynamodb:Attributes'] as
        | string[]
        | undefined;
      const returnValues = s.Condition?.StringEqualsIfExists?.['dynamodb:ReturnValues'] as
        | string[]
        | undefined;
      return {
        actions: Array.isArray(s.Action) ? s.Action : [s.Action],
        ...(leading ? { prefixes: leading.map((p) => p.replace(/\*$/, '')) } : {}),
        ...(attributes ? { attributes } : {}),
        ...(returnValues ? { returnValues } : {}),
      };
    });
}

interface RequestInput {
  readonly Key?: Record<string, unknown>;
  readonly Item?: Record<string, unknown>;
  readonly UpdateExpression?: string;
  readonly ConditionExpression?: string;
  readonly ProjectionExpression?: string;
  readonly ExpressionAttributeNames?: Record<string, string>;
  readonly ExpressionAttributeValues?: Record<string, unknown>;
  readonly KeyConditionExpression?: string;
  readonly ReturnValues?: string;
}

/** The partition key a Query of the table asks for (`pk = :v`, by name or placeholder), as LeadingKeys sees it. */
function queriedKey(input: RequestInput): string {
  for (const [, name, value] of (input.KeyConditionExpression ?? '').matchAll(/(#?\w+)\s*=\s*(:\w+)/g))
    if ((name?.startsWith('#') ? input.ExpressionAttributeNames?.[name] : name) === 'pk')
      return String(input.ExpressionAttributeValues?.[value as string] ?? '');
  return '';
}

/** The attribute names a request names, as `dynamodb:Attributes` sees them: keys, item, and in its expressions. */
function namedAttributes(input: RequestInput): string[] {
  const expressions = [input.UpdateExpression, input.ConditionExpression, input.ProjectionExpression].join(
    ' ',
  );
  // Bare names in the expressions (not placeholders, values, functions or keywords).
  const bare = (expressions.match(/(?<![#:\w])[A-Za-z_]\w*\b(?!\s*\()/g) ?? []).filter(
    (word) => !/^(SET|REMOVE|ADD|DELETE|AND|OR|NOT|BETWEEN|IN)$/i.test(word),
  );
  return [
    ...Object.keys(input.Key ?? {}),
    ...Object.keys(input.Item ?? {}),
    ...Object.values(input.ExpressionAttributeNames ?? {}),
    ...bare,
  ];
}

const attributeAllowed = (allowed: readonly string[], name: string) =>
  allowed.some((a) => (a.endsWith('*') ? name.startsWith(a.slice(0, -1)) : name === a));

/** The ledger's indexes a function's role may Query. */
function indexGrants(fn: ReceiverFunction, of = { stack, template }): string[] {
  const { stack, template } = of;
  const roleId = stack.getLogicalId(fn.role.node.defaultChild as import('aws-cdk-lib').CfnElement);
  const policies = template.findResources('AWS::IAM::Policy', { Properties: { Roles: [{ Ref: roleId }] } });
  return [...JSON.stringify(policies).matchAll(/\/index\/([\w-]+)"/g)].map((m) => m[1] as string);
}

/**
 * A document client whose every request must be allowed by `grants`, as IAM would check it; a Query of an index,
 * by `indexes` (the index names the role may Query).
 */
async function guardedClient(
  grants: Grant[],
  denied: string[],
  indexes: readonly string[] = [],
  allowedRequests: string[] = [],
) {
  const { endpoint, tableName } = await freshTable();
  const client = createDocumentClient({ endpoint });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const action = `dynamodb:${String(context.commandName).replace(/Command$/, '')}`;
      const input = args.input as RequestInput;
      // A batch read's every key is checked (IAM's LeadingKeys holds for all of them).
      const batch = Object.values(
        (args.input as { RequestItems?: Record<string, { Keys?: { pk?: unknown }[] }> }).RequestItems ?? {},
      ).flatMap((r) => r.Keys ?? []);
      const keys =
        batch.length > 0
          ? batch.map((k) => String(k.pk ?? ''))
          : action === 'dynamodb:Query'
            ? [queriedKey(input)]
            : [String(input.Key?.pk ?? input.Item?.pk ?? '')];
      const key = keys.join(',');
      const index = (args.input as { IndexName?: string }).IndexName;
      const ok =
        index !== undefined
          ? action === 'dynamodb:Query' && indexes.includes(index)
          : grants.some(
              (g) =>
                g.actions.includes(action) &&
                (!g.prefixes || keys.every((k) => g.prefixes?.some((p) => k.startsWith(p)))) &&
                (!g.attributes ||
                  namedAttributes(input).every((name) => attributeAllowed(g.attributes ?? [], name))) &&
                (!g.returnValues ||
                  input.ReturnValues === undefined ||
                  g.returnValues.includes(input.ReturnValues)),
            );
      if (ok) allowedRequests.push(`${action} ${index ?? key}`);
      if (!ok) {
        denied.push(`${action} ${key}`);
        throw Object.assign(new Error(`not authorized to perform ${action}`), {
          name: 'AccessDeniedException',
        });
      }
      return next(args);
    },
    { step: 'initialize', name: 'iamGuard' },
  );
  return { client, tableName, open: createDocumentClient({ endpoint }) };
}

const hit = (channel: 'redirect' | 'postback', token: string) =>
  ({ channel, surveyId: '4401', outcome: 'success', pid: `p-${token}`, token, source: 'query' }) as const;

describe('the hit path within its roles', () => {
  it.each(['redirect', 'postback'] as const)(
    'the %s function: a write retried after its answer was lost, a refusal, a late hit flagging its day',
    async (name) => {
      const denied: string[] = [];
      const { client, tableName, open } = await guardedClient(tableGrants(stack[name]), denied);
      const at = new Date('2026-11-20T18:00:00.000Z');
      // The store's clock (what a late hit is measured against), not the machine's.
      let clock = at;
      const store = createLedgerStore(client, tableName, () => clock);
      await store.recordHit(hit(name, 'retried'), at, 'request-1');
      // The SDK's retry of a write that was applied: refused by its condition, read back, and answered with the
      // effect the write had (its outcome's only sighting: recorded).
      expect((await store.recordHit(hit(name, 'retried'), at, 'request-1')).effect).toBe('recorded');
      await store.recordRejectedHit({
        at: at.toISOString(),
        requestId: 'request-2',
        channel: name,
        code: 'signature_mismatch',
        reason: 'signature mismatch',
        surveyId: '4401',
        sourceIp: '203.0.113.7',
      });
      // An attempt judged on its day by a run; its second channel arrives two days later and flags that day.
      const late = hit(name === 'redirect' ? 'postback' : 'redirect', 'late');
      // Recorded live, when it was made (on the machine's clock it would be a hit drained days later, which flags
      // the day it was made).
      await createLedgerStore(open, tableName, () => at).recordHit(
        { ...late, channel: name },
        at,
        'request-3',
      );
      // A run reconciled that day (its summary exists).
      const results = createReconciliationStore(open, tableName);
      await results.putDaySummary(
        {
          surveyId: '4401',
          day: '2026-11-20',
          here: { attempts: 1, postbackCompletes: 0, redirectOnlyCompletes: 0, nonCompletes: 0 },
          marketplace: {
            transactions: 0,
            byStatus: {},
            completes: 0,
            validCompletes: 0,
            pendingCompletes: 0,
            invalidCompletes: 0,
            owed: '0.00',
            pending: '0.00',
          },
          verdicts: {},
        },
        new Date(at.getTime() + 3_600_000),
        'run-1',
      );
      clock = new Date(at.getTime() + 2 * 86_400_000);
      const recorded = await store.recordHit(late, clock, 'request-4');
      expect(recorded.unflaggedDays).toBeUndefined();
      const [summary] = await results.summariesOf('4401', ['2026-11-20']);
      expect(summary?.ledgerChangedAt).toBe(clock.toISOString());
      expect(denied).toEqual([]);
    },
  );

  it('no hit-path role may write any other item: registrations, reconciliation state, runs, health', () => {
    const mayWrite = (grants: Grant[], key: string) =>
      grants.some(
        (g) =>
          g.actions.some((a) => ['dynamodb:UpdateItem', 'dynamodb:PutItem'].includes(a)) &&
          (!g.prefixes || g.prefixes.some((p) => key.startsWith(p))),
      );
    for (const fn of [stack.redirect, stack.postback, stack.drainer]) {
      const grants = tableGrants(fn);
      for (const key of ['SURVEY#4401', 'RUN#reconcile', 'HEALTH#4401', 'CHECKPOINT#sync'])
        expect(mayWrite(grants, key), `${fn.node.id} ${key}`).toBe(false);
      for (const key of ['ATTEMPT#4401#p', 'SUMMARY#4401'])
        expect(mayWrite(grants, key), `${fn.node.id} ${key}`).toBe(true);
      // Refused hits are counted by the receivers; the drainer writes buffered hits alone.
      expect(mayWrite(grants, 'REJECTED#2026-11-20'), fn.node.id).toBe(fn !== stack.drainer);
      // Of a summary, the late hit's flag only: never a figure, a verdict count or the day's outsiders.
      const summaryGrants = grants.filter((g) => g.prefixes?.includes('SUMMARY#'));
      expect(summaryGrants.length, fn.node.id).toBeGreaterThan(0);
      for (const g of summaryGrants) {
        expect(g.actions, fn.node.id).toEqual(['dynamodb:UpdateItem']);
        for (const name of ['ledgerChangedAt', 'kind', 'flag#2026-11-20', 'pk', 'sk'])
          expect(attributeAllowed(g.attributes ?? ['*'], name), `${fn.node.id} ${name}`).toBe(true);
        for (const name of [
          'here',
          'marketplace',
          'verdicts',
          'checkedAt',
          'outsiders',
          'keys',
          'transactionsDigest',
        ])
          expect(attributeAllowed(g.attributes ?? ['*'], name), `${fn.node.id} ${name}`).toBe(false);
        expect(g.returnValues, fn.node.id).not.toContain('ALL_OLD');
      }
    }
  });

  it("a hit-path role that tries to change a day summary's figures or its outsiders is refused", async () => {
    const denied: string[] = [];
    const { client, tableName } = await guardedClient(tableGrants(stack.postback), denied);
    const attempt = (input: Record<string, unknown>) =>
      client.send(new UpdateCommand({ TableName: tableName, ...input } as never)).then(
        () => 'written',
        (error: Error) => error.name,
      );
    const summary = { pk: 'SUMMARY#4401', sk: 'DAY#2026-11-20' };
    expect(
      await attempt({
        Key: summary,
        UpdateExpression: 'SET #owed = :x',
        ExpressionAttributeNames: { '#owed': 'marketplace' },
        ExpressionAttributeValues: { ':x': { owed: '0.00' } },
      }),
    ).toBe('AccessDeniedException');
    expect(
      await attempt({
        Key: { pk: 'SUMMARY#4401', sk: 'OUTSIDERS#2026-11-20' },
        UpdateExpression: 'ADD #keys :k',
        ExpressionAttributeNames: { '#keys': 'keys' },
        ExpressionAttributeValues: { ':k': new Set(['["p","t"]']) },
      }),
    ).toBe('AccessDeniedException');
    // Its flag, as the hit path writes it, but asking for the whole item back: refused too.
    expect(
      await attempt({
        Key: summary,
        UpdateExpression: 'SET #t = :t',
        ExpressionAttributeNames: { '#t': 'ledgerChangedAt' },
        ExpressionAttributeValues: { ':t': '2026-11-21T00:00:00.000Z' },
        ReturnValues: 'ALL_OLD',
      }),
    ).toBe('AccessDeniedException');
    expect(denied).toHaveLength(3);
  });

  it('the buffer drainer: a buffered hit delivered twice', async () => {
    const denied: string[] = [];
    const { client, tableName } = await guardedClient(tableGrants(stack.drainer), denied);
    const store = createLedgerStore(client, tableName);
    const at = new Date('2026-11-20T18:00:00.000Z');
    expect(await store.recordBufferedHit(hit('postback', 'buffered'), at, 'buffer-1')).toBe(true);
    expect(await store.recordBufferedHit(hit('postback', 'buffered'), at, 'buffer-1')).toBe(false);
    expect(denied).toEqual([]);
  });

  it.each(['redirect', 'postback', 'drainer'] as const)(
    'with the attempt feed, the %s function: reading whether the feed covers its hits, and a hit it covers',
    async (name) => {
      const denied: string[] = [];
      const { client, tableName, open } = await guardedClient(
        tableGrants(feedStack[name], { stack: feedStack, template: feedTemplate }),
        denied,
      );
      const feed = createAttemptFeed(open, tableName);
      await feed.markStart(
        '2026-11-20T06:00:00.000Z',
        'arn:aws:dynamodb:us-east-1:123456789012:table/l/stream/1',
      );
      await feed.probeSeen('2026-11-20T08:00:00.000Z');
      const coverage = feedCoverage(client, tableName);
      await coverage.settled();
      const at = new Date('2026-11-20T18:00:00.000Z');
      expect(coverage.covers(at)).toBe(true);
      const store = createLedgerStore(client, tableName, () => at, { indexFree: coverage.covers });
      await store.recordHit(hit('postback', 'covered'), at, 'request-1');
      expect(denied).toEqual([]);
    },
  );
});

describe('the redirect sync within its role', () => {
  it('configures, reads back and closes surveys, and moves the day index, with no other item in reach', async () => {
    const denied: string[] = [];
    const { client, tableName, open } = await guardedClient(
      tableGrants(stack.redirectSync),
      denied,
      indexGrants(stack.redirectSync),
    );
    const marketplace = await startLocalMarketplace({ accessToken: 'sync-role', seedSurveys: false });
    try {
      let clock = Date.now();
      const registry = createSurveyRegistry(client, tableName);
      const configure = () =>
        redirectConfiguration({
          marketplace: createMarketplaceClient({ baseUrl: marketplace.url, accessToken: () => 'sync-role' }),
          registry,
          keyRing: async () =>
            parseKeyRing(JSON.stringify({ current: 'k1', k1: 'first-signing-key-for-role-tests-0000' })),
          publicBaseUrl: 'https://hits.test',
          methods: { success: 'GET', fail: 'GET' },
          initialSince: new Date(clock - 120_000),
          now: () => new Date(clock),
        });
      for (const surveyId of [4501, 4502]) marketplace.state.addSurvey({ surveyId, cpi: '1.50' });
      const applied = await configure().sync();
      expect(
        applied.results
          .filter((r) => r.status === 'applied')
          .map((r) => r.surveyId)
          .sort(),
      ).toEqual(['4501', '4502']);
      // A day later: read back; one survey closed at the marketplace, found by its lookup an hour on.
      clock += 25 * 3_600_000;
      marketplace.state.setLive(4502, false);
      await configure().sync();
      clock += 3_600_000;
      await configure().sync();
      // An attempt the earlier release indexed by day alone, moved by the backfill the sync runs after it.
      const seen = new Date(clock - 3_600_000).toISOString();
      await open.send(
        new PutCommand({
          TableName: tableName,
          Item: {
            ...firstHitItem(hit('postback', 'legacy'), new Date(seen)),
            gsi1pk: `ATTEMPTS#${seen.slice(0, 10)}`,
            gsi1sk: `4401#${seen}`,
          },
        }),
      );
      expect(
        await createDayIndexBackfill(client, tableName).settle({ now: () => new Date(clock) }),
      ).toMatchObject({
        moved: 1,
      });
      expect((await createSurveyRegistry(open, tableName).get('4502'))?.closedAt).toBeDefined();
      expect(denied).toEqual([]);
    } finally {
      await marketplace.stop();
    }
    // And nothing else: an attempt's outcome, a day's summary, a health record.
    for (const write of [
      () => createLedgerStore(client, tableName).recordHit(hit('postback', 'forged'), new Date(), 'r'),
      () =>
        client.send(
          new PutCommand({ TableName: tableName, Item: { pk: 'SUMMARY#4401', sk: 'DAY#2026-11-20' } }),
        ),
      () => client.send(new PutCommand({ TableName: tableName, Item: { pk: 'HEALTH#4401', sk: 'HEALTH' } })),
    ])
      await expect(write()).rejects.toMatchObject({ name: 'AccessDeniedException' });
  }, 60_000);
});

describe('reconciliation within its role', () => {
  it.each([
    ['the day index', false],
    ['the attempt feed', true],
  ])(
    'reconciles a week read from %s (items made, a late postback, a reversal), with no health record or refused hit in reach',
    async (_, withFeed) => {
      const of = withFeed ? { stack: feedStack, template: feedTemplate } : { stack, template };
      const denied: string[] = [];
      const requests: string[] = [];
      const { client, tableName, open } = await guardedClient(
        tableGrants(of.stack.reconcile, of),
        denied,
        indexGrants(of.stack.reconcile, of),
        requests,
      );
      const marketplace = await startLocalMarketplace({ accessToken: 'reconcile-role', seedSurveys: false });
      try {
        let clock = Date.now();
        const today = pacificDay(new Date(clock));
        const registry = createSurveyRegistry(open, tableName);
        const hits = createLedgerStore(open, tableName, () => new Date(clock));
        const completes: { token: string; day: string; arrived: boolean }[] = [
          { token: 'r-1', day: nextDay(today, -3), arrived: true },
          { token: 'r-2', day: nextDay(today, -3), arrived: false },
          { token: 'r-3', day: nextDay(today, -1), arrived: true },
          { token: 'r-4', day: nextDay(today, -1), arrived: false },
        ];
        for (const surveyId of [4601, 4602]) {
          await survey(marketplace, registry, surveyId, clock);
          for (const { token, day, arrived } of completes) {
            const clickedAt = new Date(pacificDayRange(day).start.getTime() + 10 * 3_600_000);
            marketplace.state.transactions.push({
              surveyId,
              token: `${token}-${surveyId}`,
              pid: `p-${token}`,
              status: 'Completed',
              ip: '198.51.100.1',
              trackId: token,
              termReason: '',
              clickedAt,
              completedAt: new Date(clickedAt.getTime() + 600_000),
              verifyToken: 'Valid',
              notified: arrived,
            });
            if (arrived)
              await hits.recordHit(
                {
                  channel: 'postback',
                  surveyId: String(surveyId),
                  outcome: 'success',
                  pid: `p-${token}`,
                  token: `${token}-${surveyId}`,
                  source: 'query',
                },
                new Date(clickedAt.getTime() + 660_000),
              );
          }
        }
        const items = createLedgerStore(client, tableName, () => new Date(clock));
        const feed = createAttemptFeed(client, tableName);
        const fromFeed = withFeed
          ? feedAttempts({ feed, items, feedLagMs: 60_000, now: () => new Date(clock) })
          : undefined;
        const engine = () =>
          reconciler({
            marketplace: createMarketplaceClient({
              baseUrl: marketplace.url,
              accessToken: () => 'reconcile-role',
            }),
            attempts: items,
            registry: createSurveyRegistry(client, tableName),
            results: createReconciliationStore(client, tableName),
            now: () => new Date(clock),
            settleMs: 0,
            ...(fromFeed
              ? {
                  attempts: { ...items, attemptsOfSurvey: fromFeed.attemptsOfSurvey },
                  attemptsLagMs: fromFeed.lagMs,
                  attemptsAsOf: fromFeed.asOf,
                  readOrder: fromFeed.inReadOrder,
                }
              : {}),
          });
        const run = async () => {
          const report = await engine().scheduled(7, { deadline: new Date(clock + 600_000) });
          expect(report?.outcomes.map((o) => [o.surveyId, o.status])).toEqual([
            ['4601', 'reconciled'],
            ['4602', 'reconciled'],
          ]);
        };
        await run();
        // A late postback for a complete made an item of (flags its day), and a reversal; a day on.
        clock += 26 * 3_600_000;
        await hits.recordHit(
          {
            channel: 'postback',
            surveyId: '4601',
            outcome: 'success',
            pid: 'p-r-2',
            token: 'r-2-4601',
            source: 'query',
          },
          new Date(clock),
        );
        for (const t of marketplace.state.transactions) if (t.token === 'r-3-4602') t.verifyToken = 'Invalid';
        // A complete of four days ago listed only now, its postback arriving with it: judged on its day from outside
        // that day's reading (an outsider), which a run of that day reads by its summary's partition.
        const lateDay = nextDay(today, -4);
        const lateClick = new Date(pacificDayRange(lateDay).start.getTime() + 10 * 3_600_000);
        marketplace.state.transactions.push({
          surveyId: 4601,
          token: 'r-5-4601',
          pid: 'p-r-5',
          status: 'Completed',
          ip: '198.51.100.1',
          trackId: 'r-5',
          termReason: '',
          clickedAt: lateClick,
          completedAt: new Date(lateClick.getTime() + 600_000),
          verifyToken: 'Valid',
          notified: true,
        });
        await hits.recordHit(
          {
            channel: 'postback',
            surveyId: '4601',
            outcome: 'success',
            pid: 'p-r-5',
            token: 'r-5-4601',
            source: 'query',
          },
          new Date(clock),
        );
        await run();
        clock += 3_600_000;
        await run();
        await engine().run(lateDay, lateDay, ['4601']);
        const judged = await createReconciliationStore(open, tableName).attemptsByKey('4602', [
          { pid: 'p-r-3', token: 'r-3-4602' },
          { pid: 'p-r-4', token: 'r-4-4602' },
        ]);
        expect(judged.map((a) => [a.token, a.reconciliation?.verdict]).sort()).toEqual([
          ['r-3-4602', 'invalidated'],
          ['r-4-4602', 'complete_not_received'],
        ]);
        expect(denied).toEqual([]);
        // Its kinds of request were among them: the table's own queries too (a day's outsiders).
        const kinds = new Set(requests.map((r) => r.replace(/^(dynamodb:\w+ [A-Z]*#?).*$/, '$1')));
        expect([...kinds]).toEqual(
          expect.arrayContaining([
            'dynamodb:Query SUMMARY#',
            'dynamodb:UpdateItem ATTEMPT#',
            'dynamodb:PutItem RUN#',
          ]),
        );
      } finally {
        await marketplace.stop();
      }
      // And nothing it has no business with: a survey's health record, the refused hits.
      for (const key of [
        { pk: 'HEALTH#4601', sk: 'STATE' },
        { pk: 'REJECTED#2026-11-20', sk: 'x' },
      ])
        await expect(client.send(new PutCommand({ TableName: tableName, Item: key }))).rejects.toMatchObject({
          name: 'AccessDeniedException',
        });
    },
    60_000,
  );
});
