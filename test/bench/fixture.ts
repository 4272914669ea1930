/**
 * Benchmark fixture, run as its own process so its memory and CPU are not counted against what is measured:
 * the embedded engine and the local marketplace, seeded with `surveys` surveys of `perSurvey` attempts each on
 * both sides (a few per cent left as discrepancies). Sends {endpoint, marketplaceUrl, tableName, day} to its
 * parent once seeded, and stops when the parent disconnects.
 */
import '../../infra/local/environment';
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import {
  createDocumentClient,
  createSurveyRegistry,
  firstHitItem,
} from '../../functions/ledger/ledger-store';
import { formatPacificTime, pacificDay } from '../../functions/marketplace/pacific-time';
import { ensureLedgerTable, startEngine } from '../../infra/local/engine';
import { startLocalMarketplace } from '../../infra/local/marketplace/server';
import type { SimTransaction } from '../../infra/local/marketplace/state';

const surveys = Number(process.argv[2] ?? 32);
const perSurvey = Number(process.argv[3] ?? 1000);
const TOKEN = 'bench-token';
const tableName = 'bench-ledger';

const engine = await startEngine();
await ensureLedgerTable(engine.endpoint, tableName);
const marketplace = await startLocalMarketplace({ accessToken: TOKEN, seedSurveys: false });
const client = createDocumentClient({ endpoint: engine.endpoint });
const registry = createSurveyRegistry(client, tableName);

const now = Date.now();
// Clicked in over the last two hours (inside today's Pacific day unless it is just past midnight there).
const day = pacificDay(new Date(now - 2 * 3_600_000));
const STATUSES = [
  'Completed',
  'Completed',
  'Completed',
  'Failed',
  'Over Quota',
  'Quality Termination',
  'Pre Survey Termination',
];
const OUTCOME = {
  Completed: 'success',
  Failed: 'fail',
  'Over Quota': 'overquota',
  'Quality Termination': 'quality',
  'Pre Survey Termination': 'termination',
} as const;

for (let s = 0; s < surveys; s++) {
  const surveyId = 90_000 + s;
  marketplace.state.addSurvey({ surveyId, cpi: '1.75' });
  await registry.put({
    surveyId: String(surveyId),
    state: 'active',
    verified: true,
    failures: 0,
    expectedCpi: '1.75',
    updatedAt: new Date().toISOString(),
  });
  const items: Record<string, unknown>[] = [];
  for (let i = 0; i < perSurvey; i++) {
    const status = STATUSES[i % STATUSES.length] as keyof typeof OUTCOME;
    const clickedAt = new Date(now - 2 * 3_600_000 + (i * 3_600_000) / perSurvey);
    const token = `${surveyId}-${i}`;
    const pid = `p-${surveyId}-${i}`;
    const t: SimTransaction = {
      surveyId,
      token,
      pid,
      status,
      ip: '198.51.100.1',
      trackId: token,
      termReason: '',
      clickedAt,
      ...(status === 'Completed' ? { completedAt: new Date(clickedAt.getTime() + 600_000) } : {}),
      verifyToken: i % 3 === 0 ? 'Valid' : 'Pending',
      notified: true,
    };
    marketplace.state.transactions.push(t);
    // Every 50th attempt never arrived here: a discrepancy to classify.
    if (i % 50 === 49) continue;
    const seen = new Date(clickedAt.getTime() + 600_000);
    const outcome = OUTCOME[status];
    items.push(
      firstHitItem(
        {
          channel: 'postback',
          surveyId: String(surveyId),
          outcome: outcome === 'success' ? 'success' : 'fail',
          pid,
          token,
          source: 'query',
        },
        seen,
      ),
    );
  }
  for (let start = 0; start < items.length; start += 25) {
    const batch = items.slice(start, start + 25).map((Item) => ({ PutRequest: { Item } }));
    let pending: typeof batch = batch;
    while (pending.length > 0) {
      const result = await client.send(new BatchWriteCommand({ RequestItems: { [tableName]: pending } }));
      pending = (result.UnprocessedItems?.[tableName] ?? []) as typeof batch;
    }
  }
}

process.send?.({
  endpoint: engine.endpoint,
  marketplaceUrl: marketplace.url,
  tableName,
  token: TOKEN,
  day,
  formatted: formatPacificTime(new Date()),
});
process.on('disconnect', async () => {
  await marketplace.stop();
  await engine.stop();
  process.exit(0);
});
