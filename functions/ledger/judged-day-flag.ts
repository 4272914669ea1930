/**
 * Late hits flag the day they change. The scheduled reconciliation reads only today's attempts every run; an older
 * day is read again when its marketplace rows change, when it held judgements left for later, or once a day. A
 * change only this side sees on an older day (a postback re-sent hours late, a buffered hit drained after an
 * outage) would wait for that daily re-check: so a hit that changes an attempt already judged for an earlier
 * Pacific day sets `ledgerChangedAt` on that day's summary, and the next run reconciles the day.
 *
 * Rare by construction (an attempt's hits come minutes apart and a run judges only what has settled), so it costs
 * nothing on the usual hit path: no read, and a write only when the attempt belongs to an earlier day.
 */
import { type DynamoDBDocumentClient, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Attempt, HitEffect } from '../receiving/attempt';
import { conditionally } from './document-client';
import { DAY_FLAG_PREFIX, dayFlagsKey, summaryKey, utcDay } from './ledger-schema';

/** The `kind` of a day's item that holds a flag and no figures yet. */
export const DAY_FLAG_KIND = 'day-flag';

/** A Pacific date is the UTC date of the same instant 7 (daylight saving) or 8 (standard time) hours earlier. */
const HOUR_MS = 3_600_000;
const pacificDateBounds = (iso: string): [string, string] => {
  const utcDayBefore = (hours: number) => utcDay(new Date(Date.parse(iso) - hours * HOUR_MS).toISOString());
  return [utcDayBefore(8), utcDayBefore(7)];
};

/**
 * The earlier days whose judgement a hit made stale, or none. The hit changed the attempt (not a repeat), and
 * either a verdict stands on it, for a Pacific day before today, or none does yet though it was first seen over
 * an hour ago, before today (a hit drained from the buffer long after it was made): then the day it was first seen
 * on, which a run may have checked without it. A younger attempt without a verdict is one no run has judged yet:
 * today's, or yesterday's last hour, which the first runs after midnight read (recheck-policy.ts 'unfinished').
 *
 * Without the Pacific calendar (the receivers do not load it): "before today" is before the UTC date of seven
 * hours ago, and an instant's Pacific date is one of the UTC dates of it seven and eight hours earlier (both are
 * flagged when they differ). Neither misses a day; during standard time a hit in the last hour of a Pacific day
 * also flags that day, and a first-seen time may flag the day after its own. A spare flag costs a spare read.
 */
export function staleDays(attempt: Attempt, effect: HitEffect, now: Date): string[] {
  if (effect === 'duplicate') return [];
  const judged = attempt.reconciliation?.day;
  const firstSeen = attempt.firstSeenAt;
  // The usual hit (an attempt no run has judged, first seen just now) returns here, before any date is formatted.
  if (!judged && !(firstSeen && Date.parse(firstSeen) < now.getTime() - HOUR_MS)) return [];
  const [, today] = pacificDateBounds(now.toISOString());
  const days = judged ? [judged] : [...new Set(pacificDateBounds(firstSeen as string))];
  return days.filter((day) => day < today);
}

/**
 * Sets `ledgerChangedAt` on a survey's day summary, never moving it back. `now` is when the ledger changed: taken
 * after the write (not the hit's time: a drained hit is recorded long after it was made, and a run that started
 * between the two must still see the flag as newer than its check).
 *
 * A day without a summary gets the flag alone (`kind` `day-flag`, no figures; readers take it for no summary): a run
 * reconciling the day for the first time writes its verdicts before the summary, and a hit in between would
 * otherwise flag nothing, the summary then counting the attempt as it was until the daily re-check. The summary the
 * run writes next is an update, which keeps the flag, newer than the run's check.
 */
export async function flagJudgedDay(
  client: DynamoDBDocumentClient,
  tableName: string,
  surveyId: string,
  day: string,
  now: Date,
): Promise<void> {
  await advanceSummaryTime(client, tableName, { surveyId, day }, 'ledgerChangedAt', now);
  // Listed on the survey's flagged days too: a run reads that item every time, a day past the window's summary not.
  await conditionally(() =>
    client.send(
      new UpdateCommand({
        TableName: tableName,
        Key: dayFlagsKey(surveyId),
        UpdateExpression: 'SET #flag = :at, #kind = :kind',
        ConditionExpression: 'attribute_not_exists(#flag) OR #flag < :at',
        ExpressionAttributeNames: { '#flag': `${DAY_FLAG_PREFIX}${day}`, '#kind': 'kind' },
        ExpressionAttributeValues: { ':at': now.toISOString(), ':kind': 'day-flags' },
      }),
    ),
  );
}

/**
 * Moves one time of a day summary forward to `at` (a flag, or the last check): never back. The last check only onto
 * a summary that exists; a flag onto the day's item whether or not a run has written its figures yet.
 */
export async function advanceSummaryTime(
  client: DynamoDBDocumentClient,
  tableName: string,
  summary: { readonly surveyId: string; readonly day: string },
  attribute: 'ledgerChangedAt' | 'checkedAt',
  at: Date,
): Promise<void> {
  const flag = attribute === 'ledgerChangedAt';
  await conditionally(() =>
    client.send(
      new UpdateCommand({
        TableName: tableName,
        Key: summaryKey(summary.surveyId, summary.day),
        UpdateExpression: flag
          ? 'SET #time = :at, #kind = if_not_exists(#kind, :flagOnly)'
          : 'SET #time = :at',
        // A check is of figures: only onto a summary that has them (not onto a day's flag alone).
        ConditionExpression: `${flag ? '' : 'attribute_exists(here) AND '}(attribute_not_exists(#time) OR #time < :at)`,
        ExpressionAttributeNames: { '#time': attribute, ...(flag ? { '#kind': 'kind' } : {}) },
        ExpressionAttributeValues: {
          ':at': at.toISOString(),
          ...(flag ? { ':flagOnly': DAY_FLAG_KIND } : {}),
        },
      }),
    ),
  );
}
