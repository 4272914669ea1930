/** A fresh ledger table in the run's engine, per test file. */
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { type AttemptFeed, feedAttributesOf, feedBucket } from '../../functions/ledger/attempt-feed';
import type { Item } from '../../functions/ledger/document-client';
import { utcDay } from '../../functions/ledger/ledger-schema';
import type { LedgerStore, ReconciliationStore, SurveyRegistry } from '../../functions/ledger/ledger-store';
import type { Attempt } from '../../functions/receiving/attempt';
import type { VerdictKind } from '../../functions/reconciliation/verdict-kinds';
import type { DaySummary } from '../../functions/reconciliation/verdict-rules';
import { ensureLedgerTable } from '../../infra/local/engine';

export async function freshTable(): Promise<{ endpoint: string; tableName: string }> {
  const endpoint = inject('dynamoEndpoint');
  const tableName = `ledger-${randomUUID()}`;
  await ensureLedgerTable(endpoint, tableName);
  return { endpoint, tableName };
}

export const TEST_KEY_RING = JSON.stringify({
  current: 'k2',
  k1: 'first-test-signing-key-0123456789abcdef',
  k2: 'second-test-signing-key-0123456789abcdef',
});

/** An attempt as the attempt feed holds it: its verdict without the history (feedRecordOf keeps only its length). */
export const asFeedHolds = (attempt: Attempt): Attempt =>
  attempt.reconciliation
    ? { ...attempt, reconciliation: { ...attempt.reconciliation, history: [] } }
    : attempt;

/**
 * Writes an attempt item, as it stands, into the attempt feed as its consumer would: one record under the day it is
 * filed by, its sequence number the filing time's (or `sequence`).
 */
export async function appendAsItStands(feed: Pick<AttemptFeed, 'append'>, item: Item, sequence?: string) {
  const attributes = feedAttributesOf(item);
  const filed = String(attributes.placedAt ?? attributes.firstSeenAt);
  await feed.append({
    day: utcDay(filed),
    bucket: feedBucket(String(item.surveyId)),
    newestAt: filed,
    records: [{ sequence: sequence ?? String(Date.parse(filed)), attributes }],
  });
}

/**
 * A postback that arrived (`seenAt`) and the verdict reconciliation recorded on it (`recordedAt`), judged on the
 * Pacific `day` from a transaction filed as `status`/`verifyToken` at 1.10, clicked `clickedAt` (default 19:00 UTC
 * that day). Recorded again with another kind, the attempt's verdict history grows as a run's change would.
 */
export async function judgedPostback(
  stores: { attempts: LedgerStore; results: ReconciliationStore },
  judged: {
    surveyId: string;
    token: string;
    pid?: string;
    day: string;
    kind: VerdictKind;
    seenAt: Date;
    recordedAt: Date;
    status?: string;
    verifyToken?: string;
    clickedAt?: string;
  },
): Promise<void> {
  const { surveyId, token, day } = judged;
  const pid = judged.pid ?? `pid-${token}`;
  await stores.attempts.recordHit(
    { channel: 'postback', surveyId, outcome: 'success', pid, token, source: 'query' },
    judged.seenAt,
  );
  const attempt = (await stores.attempts.attemptsOf(surveyId, pid)).find((a) => a.token === token);
  await stores.results.recordVerdict(
    {
      surveyId,
      pid,
      token,
      verdict: {
        kind: judged.kind,
        day,
        detail: {},
        marketplace: {
          status: judged.status ?? 'Completed',
          verifyToken: judged.verifyToken ?? 'Invalid',
          cpi: '1.10',
          clickedAt: judged.clickedAt ?? `${day}T19:00:00.000Z`,
        },
      },
      ...(attempt ? { attempt } : {}),
    },
    judged.recordedAt,
  );
}

/** A day's figures as reconciliation stores them: ten attempts, seven completes of which four valid; owed and pending as given. */
export function daySummary(
  surveyId: string,
  day: string,
  owed: string,
  pending: string,
  verdicts: Partial<Record<VerdictKind, number>>,
): DaySummary {
  return {
    surveyId,
    day,
    here: { attempts: 10, postbackCompletes: 6, redirectOnlyCompletes: 1, nonCompletes: 3 },
    marketplace: {
      transactions: 10,
      byStatus: { Completed: 7, Failed: 3 },
      completes: 7,
      validCompletes: 4,
      pendingCompletes: 2,
      invalidCompletes: 1,
      owed,
      pending,
    },
    verdicts,
  };
}

/**
 * Records surveys as this stack's since `at` (`servingSince`): a test that writes the marketplace's rows, or our side,
 * dated before its sync pointed the surveys here (a respondent backdated by a survey's length) has them judged, as
 * rows of a survey configured here all along are.
 */
export async function servedSince(registry: SurveyRegistry, surveyIds: readonly string[], at: Date) {
  for (const surveyId of surveyIds) {
    const registration = await registry.get(surveyId);
    if (!registration) throw new Error(`survey ${surveyId} is not registered`);
    await registry.put({ ...registration, servingSince: at.toISOString() });
  }
}
