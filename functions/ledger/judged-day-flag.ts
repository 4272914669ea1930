/**
 * Late hits flag the day they change. The scheduled reconciliation reads only today's attempts every run; an older
 * day is read again when its marketplace rows change, when it held judgements left for later, or once a day. A
 * change only this side sees on an older day (a postback re-sent hours late, a buffered hit drained after an
 * outage) would wait for that daily re-check: so a hit that changes an attempt already judged for an earlier
 * Pacific day sets `ledgerChangedAt` on that day's summary, and the next run reconciles the day.
 *
 * Rare by construction (an attempt's hits come minutes apart and a run judges only what has settled), so it costs
 * nothing on the usual hit path: no read, and a write only when a verdict already stands on an earlier day.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Attempt, HitEffect } from '../receiving/attempt';
import { send } from './document-client';
import { summaryKey, utcDay } from './ledger-schema';

/** The Pacific day starts 7 (daylight saving) or 8 hours after the UTC day of the same date. */
const PACIFIC_LAG_MS = 7 * 3_600_000;

/**
 * The earlier day whose judgement a hit made stale, or undefined: the hit changed the attempt (not a repeat), a
 * verdict stands on it, and that verdict's Pacific day is before today. Today is reconciled by every run, so it
 * needs no flag. Without the Pacific calendar (the receivers do not load it): a day before the UTC date of seven
 * hours ago is before today; within the one hour a year that bound is off, today is flagged too, harmlessly.
 */
export function staleVerdictDay(attempt: Attempt, effect: HitEffect, now: Date): string | undefined {
  const day = attempt.reconciliation?.day;
  if (effect === 'duplicate' || !day) return undefined;
  return day < utcDay(new Date(now.getTime() - PACIFIC_LAG_MS).toISOString()) ? day : undefined;
}

/**
 * Sets `ledgerChangedAt` on a survey's day summary, never moving it back and never creating a summary (a day
 * without one has never been reconciled, and the next run reconciles it anyway). `now` is when the ledger changed
 * (the write, not the hit: a drained hit is recorded long after it was made).
 */
export async function flagJudgedDay(
  client: DynamoDBDocumentClient,
  tableName: string,
  surveyId: string,
  day: string,
  now: Date,
): Promise<void> {
  try {
    await send(() =>
      client.send(
        new UpdateCommand({
          TableName: tableName,
          Key: summaryKey(surveyId, day),
          UpdateExpression: 'SET ledgerChangedAt = :now',
          ConditionExpression:
            'attribute_exists(pk) AND (attribute_not_exists(ledgerChangedAt) OR ledgerChangedAt < :now)',
          ExpressionAttributeValues: { ':now': now.toISOString() },
        }),
      ),
    );
  } catch (error) {
    if (!(error instanceof ConditionalCheckFailedException)) throw error;
  }
}
