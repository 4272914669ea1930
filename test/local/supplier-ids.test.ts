/**
 * Whatever pid and token the marketplace substitutes, the hit is recorded, readable by the CLI's lookup and
 * matched by reconciliation (by token, or by pid when the marketplace's list lost the token): arbitrary Unicode ids (graphemes, delimiters, spaces) through the whole local
 * stack, from the local marketplace's respondent to the reconciled verdict.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEDGER } from '../../functions/ledger/ledger-schema';
import {
  createDocumentClient,
  createReconciliationStore,
  createSurveyRegistry,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { createMarketplaceClient } from '../../functions/marketplace/marketplace-client';
import { pacificDay } from '../../functions/marketplace/pacific-time';
import { identifierProblem } from '../../functions/receiving/identifiers';
import { reconciler } from '../../functions/reconciliation/reconciler';
import type { LocalMarketplace } from '../../infra/local/marketplace/server';
import type { LocalStack } from '../../infra/local/stack';
import { startTestStack, syncRedirectsOnce } from '../support/local-stack';

let stack: LocalStack;
let marketplace: LocalMarketplace;
let ledger: LedgerStore;
let client: ReturnType<typeof createDocumentClient>;
let table: string;
let endpoint: string;
const run = promisify(execFile);
const SURVEY = 1001;

beforeAll(async () => {
  ({ stack, ledger, endpoint, tableName: table } = await startTestStack({ MARKETPLACE_SEED: '777' }));
  marketplace = stack.marketplace as LocalMarketplace;
  expect((await syncRedirectsOnce()).counts.applied).toBeGreaterThan(0);
  client = createDocumentClient({ endpoint });
}, 120_000);
afterAll(() => stack.stop());

/** What a panel may issue: any graphemes, delimiters and spaces included, within the accepted bound. */
const supplierId = (field: 'pid' | 'token') =>
  fc
    .oneof(
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }),
      fc.string({
        unit: fc.constantFrom('#', '%', '+', '/', '=', '|', ' ', '&', '?', '@', 'é', '👩‍👩‍👧'),
        minLength: 1,
      }),
    )
    .filter((value) => identifierProblem(field, value) === undefined);

describe('supplier ids through the local stack', () => {
  it('a completed respondent with any pid and token is recorded, found by pid, and reconciled as matched', async () => {
    const seen: { pid: string; token: string }[] = [];
    await fc.assert(
      fc.asyncProperty(
        supplierId('pid'),
        supplierId('token'),
        fc.boolean(),
        async (pid, token, tokenLost) => {
          if (seen.some((s) => s.token === token || s.pid === pid)) return;
          const { transaction, dropped } = await marketplace.respondents.respondent({
            surveyId: SURVEY,
            status: 'Completed',
            pid,
            token,
          });
          expect(dropped).toEqual({ redirect: false, postback: false });
          expect(transaction.pid).toBe(pid);
          // The lookup `npm run cli -- attempt --survey <id> --pid <pid>` makes.
          const attempts = (await ledger.attemptsOf(String(SURVEY), pid)).filter((a) => a.token === token);
          expect(attempts).toHaveLength(1);
          expect(attempts[0]).toMatchObject({
            pid,
            token,
            complete: 'postback-confirmed',
            redirect: { outcome: 'success' },
            postback: { outcome: 'success' },
          });
          // The marketplace's list no longer carries the token the hits did: reconciliation must match by pid.
          if (tokenLost) transaction.token = `relisted-${seen.length}`;
          seen.push({ pid, token });
        },
      ),
      { numRuns: 12 },
    );
    expect(seen.length).toBeGreaterThan(0);

    const today = pacificDay(new Date());
    // From the day of the earliest click: a click the survey's length before now falls on yesterday (Pacific) in the
    // first minutes after midnight.
    const clicksFrom = pacificDay(new Date(Date.now() - 2 * 3_600_000));
    const report = await reconciler({
      marketplace: createMarketplaceClient({
        baseUrl: marketplace.url,
        accessToken: () => process.env.MARKETPLACE_ACCESS_TOKEN as string,
      }),
      attempts: ledger,
      registry: createSurveyRegistry(client, table),
      results: createReconciliationStore(client, table),
    }).run(clicksFrom, today);
    expect(report.outcomes.every((o) => o.status === 'reconciled')).toBe(true);
    for (const { pid, token } of seen) {
      const [attempt] = (await ledger.attemptsOf(String(SURVEY), pid)).filter((a) => a.token === token);
      // Matched by token, or by pid where the list lost the token (else: complete_not_paid here and a
      // complete_not_received for the relisted transaction).
      expect(attempt?.reconciliation?.verdict, JSON.stringify({ pid, token })).toBe('matched');
      expect(attempt?.reconciliation?.marketplace?.status).toBe('Completed');
    }
  }, 120_000);

  it.each(['dGVzdC0x+/Q==', 'a@b.com', '12345|x', 'user 1'])(
    '`npm run cli -- attempt --survey <id> --pid %s` finds the attempt',
    async (pid) => {
      const { transaction } = await marketplace.respondents.respondent({
        surveyId: SURVEY,
        status: 'Completed',
        pid,
      });
      const { stdout } = await run(
        'node_modules/.bin/tsx',
        ['functions/cli/main.ts', 'attempt', '--survey', String(SURVEY), '--pid', pid, '--json'],
        { env: { ...process.env, DYNAMODB_ENDPOINT: endpoint, TABLE_NAME: table } },
      );
      const found = (JSON.parse(stdout) as { pid: string; token: string }[]).filter(
        (a) => a.token === transaction.token,
      );
      expect(found).toEqual([expect.objectContaining({ pid, complete: 'postback-confirmed' })]);
    },
    30_000,
  );

  it('no item carries an empty-string index key (DynamoDB refuses them; the embedded engine would not)', async () => {
    const { ScanCommand } = await import('@aws-sdk/lib-dynamodb');
    const { Items = [] } = await client.send(new ScanCommand({ TableName: table }));
    expect(Items.length).toBeGreaterThan(0);
    const keys = [LEDGER.index, LEDGER.discrepancyIndex].flatMap((i) => [i.partitionKey, i.sortKey]);
    for (const item of Items) for (const key of keys) expect(item[key], `${item.pk} ${key}`).not.toBe('');
  });
});
