/**
 * Reconciliation results in the ledger table: verdicts on the attempts (with their history), day summaries per
 * survey, each survey's reconciliation state, and the state of a long run so it can resume.
 *
 * Over 300 lines on purpose: the four item kinds reconciliation owns share their keys' conventions and the item
 * mapping in both directions; splitting them would put one schema in four files.
 */
import { randomUUID } from 'node:crypto';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
  type UpdateCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { Attempt } from '../receiving/attempt';
import { verdictUnchanged } from '../reconciliation/verdict-equality';
import type { VerdictKind } from '../reconciliation/verdict-kinds';
import type { AttemptVerdict, DaySummary } from '../reconciliation/verdict-rules';
import { runBounded, throwIfFailed, valuesOrThrow } from '../shared/bounded-work';
import { attemptFromItem } from './attempt-store';
import { batchGet, conditionally, type Item, queryAll, send } from './document-client';
import { advanceSummaryTime, flagJudgedDay } from './judged-day-flag';
import {
  attemptDayKey,
  attemptKey,
  DAY_FLAG_PREFIX,
  dayFlagsKey,
  discrepancyIndexKey,
  finishedRunKey,
  LEDGER,
  outsiderKey,
  outsidersKey,
  outsidersPrefix,
  reconciliationStateKey,
  runStateKey,
  summaryIndexKey,
  summaryKey,
} from './ledger-schema';
import { runListStore } from './run-lists';

/**
 * What recording a verdict did: a first verdict, a different one (history grows), fresher facts, nothing, or
 * nothing because a hit changed the attempt after the run read it (`stale`: its day is flagged for the next run).
 */
export type VerdictChange = 'new' | 'changed' | 'refreshed' | 'unchanged' | 'stale';

export interface StoredDaySummary extends DaySummary {
  /** When these figures were written: the last run that found them different (or the first). */
  readonly reconciledAt: string;
  /**
   * The last time a run re-checked the day and recorded it on the summary (at least `reconciledAt`). Runs that
   * find the figures unchanged on a day every survey checks (a scheduled run's newest days) do not write it; the
   * finished run records that check once (`FinishedRun`).
   */
  readonly checkedAt: string;
  readonly runId: string;
  /**
   * When a late hit last changed an attempt judged for this day (judged-day-flag.ts): later than the last check,
   * the day is reconciled by the next scheduled run. Rewriting the figures keeps it.
   */
  readonly ledgerChangedAt?: string;
}

/** Where reconciling one survey stands. */
export interface SurveyReconciliationState {
  readonly surveyId: string;
  readonly lastReconciledAt?: string | undefined;
  /** Pacific days whose last reconciliation failed, to be retried whatever the window. */
  readonly failedDays: readonly string[];
  readonly lastError?: string | undefined;
  readonly lastErrorAt?: string | undefined;
  /** When the runs of this survey began to fail (the first of the failing runs in a row; `lastErrorAt` the last). */
  readonly failingSince?: string | undefined;
  /**
   * Pacific days holding completes the buyer has not reviewed yet (Pending), within the review horizon: once they
   * fall out of the window, re-read once a day (`openCheckedAt`) until decided, so what is owed follows.
   */
  readonly openDays?: readonly string[] | undefined;
  readonly openCheckedAt?: string | undefined;
  /**
   * Pacific days past the window (within the review horizon) whose completes were all reviewed: a buyer may still
   * reverse one, so their rows are listed again once a week (`reviewedCheckedAt`, REVIEWED_RECHECK_DAYS).
   */
  readonly reviewedDays?: readonly string[] | undefined;
  readonly reviewedCheckedAt?: string | undefined;
  /** The last reviewed day given its last look, at the review horizon (or a day past it, when that look failed). */
  readonly reviewedFinalDay?: string | undefined;
  /**
   * The edition of the verdict rules (verdict-rules.ts `VERDICT_RULES_EDITION`) the survey's days past the window
   * were last judged by; absent before editions were kept. Another one has them judged again once.
   */
  readonly rulesEdition?: number | undefined;
  /** When a scheduled run last tried to judge them again and a listing failed: tried again a day later. */
  readonly rejudgeTriedAt?: string | undefined;
  /** While they are judged again, a few days a run: the oldest day judged so far (the next run goes on before it). */
  readonly rejudgedFrom?: string | undefined;
  /**
   * When a listing of several days of this survey was last too large for the client to read: for a week after,
   * its listings of several days are made a day at a time from the start, not downloaded up to the cap first.
   */
  readonly listedByDayAt?: string | undefined;
  /**
   * Days a listing answered with no rows at all (the marketplace's "No data found") although it had listed rows for
   * them, and when first: taken as a passing fault, the survey failed, until a listing of the day `EMPTY_CONFIRM_MS`
   * later says so too (a listing with rows clears it).
   */
  readonly emptyDays?: Readonly<Record<string, string>> | undefined;
  /** Moved on by every write (absent on states written before it was kept): a run's write is conditional on it. */
  readonly revision?: number | undefined;
}

/** A run that may span several invocations: what it covers and how far it got. */
export interface RunState {
  readonly runId: string;
  readonly days: readonly string[];
  readonly surveys: readonly string[];
  /** Surveys before this index are done. */
  readonly cursor: number;
  readonly startedAt: string;
  readonly finishedAt?: string | undefined;
  /** An invocation working on the run holds it until then. */
  readonly leaseUntil?: string | undefined;
  /** Days every survey of the run reconciles in full, whatever changed (the newest days). */
  readonly freshDays?: readonly string[] | undefined;
  /** Surveys that failed in this run so far (their days were not checked). */
  readonly failedSurveys?: readonly string[] | undefined;
  /**
   * How often an invocation died (out of memory, out of time) holding the run with the cursor here: each resumes
   * where the cursor was saved, so a survey that kills every invocation would otherwise hold the run there for ever.
   */
  readonly stall?: { readonly cursor: number; readonly times: number } | undefined;
  /** Surveys the run passed over after invocations died on them twice; the next run takes them last. */
  readonly stoppedSurveys?: readonly string[] | undefined;
}

/**
 * The last finished run: every survey of it that did not fail had its fresh days checked at or after
 * `startedAt`, so those summaries need not be rewritten to say so.
 */
export interface FinishedRun {
  readonly runId: string;
  readonly startedAt: string;
  /**
   * As of when the run's reads of attempts were complete, when earlier than its start (read from the attempt feed,
   * which trails the table): what the run checked, it checked as of then.
   */
  readonly checkedAsOf?: string;
  readonly finishedAt: string;
  readonly freshDays: readonly string[];
  readonly surveys: readonly string[];
  readonly failedSurveys: readonly string[];
  /** Surveys passed over after invocations died on them (RunState.stoppedSurveys). */
  readonly stoppedSurveys?: readonly string[];
}

/** Where a page of a day's discrepancies ended: its survey, and the last row's token (as keyed) and partition key. */
export interface DiscrepancyPosition {
  readonly surveyId: string;
  readonly token: string;
  readonly pk: string;
}
type PagePosition = Pick<DiscrepancyPosition, 'token' | 'pk'>;

/** An attempt's key within its survey. */
export interface OutsiderKey {
  readonly pid: string;
  readonly token: string;
}

export interface ReconciliationStore {
  /** The attempts with these keys (pid and token of a survey), by point reads in batches; missing ones left out. */
  attemptsByKey(surveyId: string, keys: readonly { pid: string; token: string }[]): Promise<Attempt[]>;
  /** Writes a verdict onto its attempt (creating the attempt for a transaction never seen here). Idempotent. */
  /**
   * `readAt`: as of when the attempt was read (default `at`; earlier when read from the attempt feed, which trails
   * the table): a hit after it that made the verdict's condition fail overtook the read, and the day is flagged just
   * after it (the run records its checks as of then).
   */
  recordVerdict(verdict: AttemptVerdict, at: Date, readAt?: Date): Promise<VerdictChange>;
  /**
   * Retires an item an earlier run created for a transaction, now matched with an attempt that arrived under
   * another pid (`superseded` of verdict-rules.ts) or listed no more (`withdrawn`): out of the day and discrepancy
   * indexes, its verdict ended in its history with the reason. False, and nothing done, when a hit reached the
   * item meanwhile or its verdict is no more the one read (another run judged it since).
   */
  retireItem(item: Attempt, at: Date, reason: 'superseded' | 'withdrawn'): Promise<boolean>;
  /**
   * Clears the verdict of an attempt that no longer adds one of its own (`collapsed` of verdict-rules.ts): out of
   * the discrepancy index, the verdict ended in its history; it stays in the day index, an attempt like any other.
   * False, and nothing done, when a hit reached it since it was read (the next run judges it as it is then).
   */
  clearVerdict(attempt: Attempt, at: Date): Promise<boolean>;
  /**
   * Leaves on the item of a transaction the pid its attempt arrived under (`pointers` of verdict-rules.ts). False
   * when it already said so, or there is no such item yet. Its time (`at`) is kept beside it (`arrivedAt`).
   */
  pointToArrival(surveyId: string, pid: string, token: string, arrivedAs: string, at: Date): Promise<boolean>;
  /**
   * The attempts judged on these days of a survey from outside each day's own reading (ledger-schema.ts
   * `outsidersKey`): day to keys, for the days that have any (a batch of point reads).
   */
  outsidersOf(surveyId: string, days: readonly string[]): Promise<Map<string, OutsiderKey[]>>;
  /** Adds keys to a day's outsiders (idempotent: a set). */
  addOutsiders(surveyId: string, day: string, keys: readonly OutsiderKey[]): Promise<void>;
  /**
   * Writes a day summary's figures, reconciled and checked at `at`. With `asRead` (the figures the run read, undefined
   * when there were none), only over those or this run's own: false, and nothing written, when another run wrote the
   * day's figures in between (an operator's run beside the hourly one; whichever listing is older, the day is left to
   * be judged again rather than take the last writer's).
   */
  putDaySummary(
    summary: DaySummary,
    at: Date,
    runId: string,
    options?: { readonly asRead: StoredDaySummary | undefined },
  ): Promise<boolean>;
  /** Tells the next scheduled run to reconcile a day again (judged-day-flag.ts), as of `at`; no summary, no-op. */
  flagDay(surveyId: string, day: string, at: Date): Promise<void>;
  /** Records that a day whose figures did not change was checked at `at` (never moves back; no summary, no-op). */
  recordSummaryCheck(surveyId: string, day: string, at: Date): Promise<void>;
  /** A survey's summaries of the Pacific days given, those that exist (a batch of point reads). */
  summariesOf(surveyId: string, days: readonly string[]): Promise<StoredDaySummary[]>;
  /**
   * What reconciling a survey starts from: its state, its flagged days (day to the flag's time, judged-day-flag.ts)
   * and its summaries of the days given, in one batch read.
   */
  surveyRecords(
    surveyId: string,
    days: readonly string[],
  ): Promise<{
    state?: SurveyReconciliationState;
    summaries: StoredDaySummary[];
    flags?: ReadonlyMap<string, string>;
  }>;
  /** Removes flagged days a run has dealt with, each only if its flag is still the time read. */
  clearDayFlags(surveyId: string, flags: readonly { day: string; at: string }[]): Promise<void>;
  /** The summaries of a Pacific day, for all surveys (or the ones listed), through the index. */
  daySummaries(day: string): Promise<StoredDaySummary[]>;
  /** Attempts whose verdict on that Pacific day is a discrepancy, through the sparse index. */
  discrepancies(day: string, surveyId?: string): Promise<Attempt[]>;
  /**
   * A survey's attempts whose verdict is the discrepancy `kind` on one of the Pacific days given: a Query of the
   * sparse index per day, a few at once (a look across windows, for the days a summary says have one).
   */
  judgedAs(surveyId: string, kind: VerdictKind, days: readonly string[]): Promise<Attempt[]>;
  /**
   * One page of a day's discrepancies, optionally of one survey and one kind: by survey (in the index's text order),
   * then by token, so a row stays where it was when its verdict changes kind; `next` continues after the last.
   */
  discrepancyPage(
    day: string,
    options: {
      surveyId?: string;
      kind?: string;
      /** Kinds to leave out (read from each key, as a key cannot be filtered on). */
      excludeKinds?: readonly string[];
      limit: number;
      after?: DiscrepancyPosition;
    },
  ): Promise<{ attempts: Attempt[]; next?: DiscrepancyPosition }>;
  surveyState(surveyId: string): Promise<SurveyReconciliationState | undefined>;
  /** The states of these surveys that have one, by batch reads (eventually consistent: for reports). */
  surveyStates(surveyIds: readonly string[]): Promise<SurveyReconciliationState[]>;
  /**
   * Writes a survey's state. With `asRead` (the state the writer read, undefined when there was none), only if the
   * stored state is still that one: false, and nothing written, when another run wrote it in between (whose
   * open and reviewed days a write built from the older read would otherwise drop).
   */
  putSurveyState(
    state: SurveyReconciliationState,
    options?: { readonly asRead: SurveyReconciliationState | undefined },
  ): Promise<boolean>;
  runState(name: string): Promise<RunState | undefined>;
  /**
   * Writes a run's state. With `replacing` (the run id read, undefined when there was none), only if the stored run
   * is still that one: false, and nothing written, when another invocation started a run in between.
   */
  putRunState(
    name: string,
    state: RunState,
    options?: { readonly replacing: string | undefined },
  ): Promise<boolean>;
  /** Takes the run for one invocation until `until`; false when another invocation holds it. */
  acquireRun(name: string, runId: string, now: Date, until: Date): Promise<boolean>;
  finishedRun(name: string): Promise<FinishedRun | undefined>;
  putFinishedRun(name: string, run: FinishedRun): Promise<void>;
}

export function createReconciliationStore(
  client: DynamoDBDocumentClient,
  tableName: string,
): ReconciliationStore {
  const runLists = runListStore(client, tableName);
  const getItem = async (key: Record<string, string>) =>
    (await send(() => client.send(new GetCommand({ TableName: tableName, Key: key, ConsistentRead: true }))))
      .Item;
  /** A write, if its condition holds: false, and nothing written, when it does not. */
  const written = conditionally;
  /** An update, if its condition holds: false, and nothing written, when it does not. */
  const updated = (input: Omit<UpdateCommandInput, 'TableName'>) =>
    written(() => client.send(new UpdateCommand({ TableName: tableName, ...input })));
  /**
   * A conditional write of the item at `key`, true when it is written, also when its condition failed on this very
   * write: applied, its answer lost, and the SDK's retry refused by what the write itself changed (`own` tells it
   * from the item read after). What follows a write (a day flagged) must not be skipped for a write that was made.
   */
  const writtenOnce = async (
    write: () => Promise<unknown>,
    key: Record<string, string>,
    call: { at: string; what: string },
    own: (item: Record<string, unknown>) => boolean,
  ) => {
    const id = `${key.pk}|${key.sk}|${call.what}`;
    if (await written(write)) {
      made.note(call.at, id);
      return true;
    }
    // A call repeating a write this store made at the same time finds its own write: that one, not this, wrote.
    if (made.has(call.at, id)) return false;
    const item = await getItem(key);
    if (item === undefined || !own(item)) return false;
    made.note(call.at, id);
    return true;
  };
  /** An update written once (`writtenOnce`). */
  const updatedOnce = (
    input: Omit<UpdateCommandInput, 'TableName'> & { Key: Record<string, string> },
    call: { at: string; what: string },
    own: (item: Record<string, unknown>) => boolean,
  ) =>
    writtenOnce(
      () => client.send(new UpdateCommand({ TableName: tableName, ...input })),
      input.Key,
      call,
      own,
    );
  /**
   * The writes this store answered as made, by their time (the reconciler's `at`, one per survey) and item: the
   * item's own stamp (that time) tells a write whose answer was lost from one made by another run, but not from
   * this run's earlier call of the same write; this does. Surveys of a run are judged side by side, each at its own
   * time, so every time's are kept (forgotten all at once past 100,000: a container runs for hours).
   */
  const made = (() => {
    const ids = new Set<string>();
    return {
      note(time: string, id: string) {
        if (ids.size >= 100_000) ids.clear();
        ids.add(`${time}|${id}`);
      },
      has: (time: string, id: string) => ids.has(`${time}|${id}`),
    };
  })();

  const surveyRecords = async (surveyId: string, days: readonly string[], withState = true) => {
    // Point reads (the functions that reconcile may batch-read the table, not query it), consistent: the
    // figures compared against must be the last written.
    const stateKey = reconciliationStateKey(surveyId);
    const flagsKey = dayFlagsKey(surveyId);
    const items = await batchGet(
      client,
      tableName,
      [...(withState ? [stateKey, flagsKey] : []), ...days.map((day) => summaryKey(surveyId, day))],
      { consistent: true },
    );
    const stateItem = items.find((item) => item.pk === stateKey.pk && item.sk === stateKey.sk);
    const flagsItem = items.find((item) => item.pk === flagsKey.pk && item.sk === flagsKey.sk);
    // A day's flag without figures (judged-day-flag.ts) is no summary: the day has not been reconciled.
    const summaries = items
      .filter((item) => item !== stateItem && item !== flagsItem && item.here !== undefined)
      .map(summaryFromItem);
    const flags = new Map<string, string>();
    for (const [name, at] of Object.entries(flagsItem ?? {}))
      if (name.startsWith(DAY_FLAG_PREFIX) && typeof at === 'string')
        flags.set(name.slice(DAY_FLAG_PREFIX.length), at);
    return {
      ...(stateItem ? { state: stateFromItem(surveyId, stateItem) } : {}),
      summaries: summaries.sort((a, b) => a.day.localeCompare(b.day)),
      ...(withState ? { flags } : {}),
    };
  };

  return {
    async attemptsByKey(surveyId, keys) {
      const items = await batchGet(
        client,
        tableName,
        keys.map((k) => attemptKey(surveyId, k.pid, k.token)),
      );
      return items.map(attemptFromItem);
    },

    async recordVerdict(entry, at, readAt = at) {
      const { verdict } = entry;
      const existing = entry.attempt?.reconciliation;
      const marketplace = verdict.marketplace;
      if (verdictUnchanged(entry)) return 'unchanged';
      const sameVerdict = existing?.verdict === verdict.kind && existing.day === verdict.day;
      const key = entry.attempt
        ? attemptKey(entry.attempt.surveyId, entry.attempt.pid, entry.attempt.token)
        : attemptKey(entry.surveyId, entry.pid, entry.token);
      const now = at.toISOString();
      // Judged from the attempt as read: a hit since then (lastSeenAt moved) makes the verdict stale.
      const seen = entry.attempt?.lastSeenAt;
      const asRead = seen === undefined ? 'attribute_not_exists(lastSeenAt)' : 'lastSeenAt = :seen';
      const facts = {
        ':detail': verdict.detail,
        ':marketplace': marketplace ?? null,
        ':now': now,
        ...(seen === undefined ? {} : { ':seen': seen }),
      };
      /** The day must be judged again: flagged just after this run's check of it, `readAt` (judged-day-flag.ts). */
      const flagAgain = (day: string) =>
        flagJudgedDay(client, tableName, entry.surveyId, day, new Date(readAt.getTime() + 1));
      /**
       * After a failed condition: a hit overtook this run's read (its time after `readAt`, give or take a clock a
       * little off), or the item this run would make is an attempt that arrived (its reading did not hold it), and
       * the day is flagged; or not (another run wrote the same; an older hit, which flags its day itself) and nothing
       * is done.
       */
      const overtaken = async (current: Record<string, unknown> | undefined) => {
        const last = typeof current?.lastSeenAt === 'string' ? current.lastSeenAt : undefined;
        // An item this run would make is an attempt that arrived, whenever: one this run's reading did not hold
        // (a reader behind the table), judged as if nothing had arrived. Not counted; its day judged again.
        const unread = !entry.attempt && last !== undefined;
        if (
          !unread &&
          (last === undefined || last === seen || last < new Date(readAt.getTime() - 60_000).toISOString())
        )
          return false;
        await flagAgain(verdict.day);
        return true;
      };
      /**
       * The item after a failed condition, and whether it holds this run's own write: applied, its answer lost and
       * the SDK's retry refused by the condition the write itself made false. Taken as written, so the day a
       * verdict left is flagged as after any write.
       */
      const writeId = `${key.pk}|${key.sk}|verdict|${verdict.kind}|${verdict.day}`;
      const afterRefusal = async () => {
        const current = await getItem(key);
        const own =
          !made.has(now, writeId) &&
          current?.verdict === verdict.kind &&
          current.verdictDay === verdict.day &&
          current.verdictAt === now;
        if (own) made.note(now, writeId);
        return { current, own };
      };
      if (sameVerdict) {
        // Onto the verdict as read: one another run wrote since (an operator's beside the hourly one) is not given
        // this run's older facts, and the feed's fold (a later verdictAt wins) stays the table's order.
        const refreshed = await updated({
          Key: key,
          UpdateExpression: 'SET verdictDetail = :detail, marketplace = :marketplace, verdictAt = :now',
          ConditionExpression: `(${asRead}) AND verdict = :verdict AND verdictDay = :day AND verdictAt = :judgedAt`,
          ExpressionAttributeValues: {
            ...facts,
            ':verdict': verdict.kind,
            ':day': verdict.day,
            ':judgedAt': existing.at,
          },
        });
        if (refreshed) {
          made.note(now, writeId);
          return 'refreshed';
        }
        const { current, own } = await afterRefusal();
        if (own) return 'refreshed';
        return (await overtaken(current)) ? 'stale' : 'unchanged';
      }
      // Items for transactions this receiver never saw are placed in the day index by their click time.
      const placedAt = entry.attempt?.firstSeenAt ?? marketplace?.clickedAt ?? now;
      const day = attemptDayKey(entry.surveyId, key.sk, placedAt);
      const discrepancy = verdict.kind !== 'matched';
      const index = discrepancyIndexKey(
        verdict.day,
        entry.surveyId,
        verdict.kind,
        key.sk.replace(/^TOKEN#/, ''),
      );
      const written = await updated({
        Key: key,
        UpdateExpression:
          [
            'SET kind = if_not_exists(kind, :kind), surveyId = if_not_exists(surveyId, :surveyId)',
            'pid = if_not_exists(pid, :pid), #token = if_not_exists(#token, :token)',
            // An item it makes goes into the day index by its click; an attempt keeps its place, or its absence
            // (one the attempt feed covers: feed-coverage.ts), not indexed now at another write unit.
            ...(entry.attempt
              ? []
              : ['gsi1pk = if_not_exists(gsi1pk, :gsi1pk), gsi1sk = if_not_exists(gsi1sk, :gsi1sk)']),
            'verdict = :verdict, verdictDay = :day, verdictDetail = :detail, marketplace = :marketplace, verdictAt = :now',
            'verdictHistory = list_append(if_not_exists(verdictHistory, :empty), :entry)',
            ...(discrepancy ? ['gsi2pk = :gsi2pk, gsi2sk = :gsi2sk'] : []),
          ].join(', ') + (discrepancy ? '' : ' REMOVE gsi2pk, gsi2sk'),
        ConditionExpression: `(${asRead}) AND (attribute_not_exists(verdict) OR verdict <> :verdict OR verdictDay <> :day)`,
        ExpressionAttributeNames: { '#token': 'token' },
        ExpressionAttributeValues: {
          ...facts,
          ':kind': 'attempt',
          ':surveyId': entry.surveyId,
          ':pid': entry.attempt?.pid ?? entry.pid,
          ':token': entry.attempt?.token ?? entry.token,
          ...(entry.attempt ? {} : { ':gsi1pk': day.gsi1pk, ':gsi1sk': day.gsi1sk }),
          ':verdict': verdict.kind,
          ':day': verdict.day,
          ':empty': [],
          ':entry': [{ verdict: verdict.kind, day: verdict.day, at: now }],
          ...(discrepancy ? { ':gsi2pk': index.gsi2pk, ':gsi2sk': index.gsi2sk } : {}),
        },
      });
      // Either another run wrote the same verdict first (nothing to add) or a hit came after the read.
      if (written) made.note(now, writeId);
      else {
        const { current, own } = await afterRefusal();
        if (!own) return (await overtaken(current)) ? 'stale' : 'unchanged';
      }
      // The attempt moved to another day (its transaction found there): the day it left counted it.
      if (existing?.day && existing.day !== verdict.day) await flagAgain(existing.day);
      return existing ? 'changed' : 'new';
    },

    retireItem(item, at, reason) {
      const now = at.toISOString();
      return updatedOnce(
        {
          Key: attemptKey(item.surveyId, item.pid, item.token),
          UpdateExpression:
            'SET retiredAt = :now, verdictHistory = list_append(if_not_exists(verdictHistory, :empty), :entry) ' +
            'REMOVE verdict, verdictDay, verdictDetail, verdictAt, gsi1pk, gsi1sk, gsi2pk, gsi2sk',
          // Still nothing arrived for it (a hit sets lastSeenAt): otherwise it is an attempt, judged as one. And its
          // verdict as read: another run that judged it since, from a newer listing, is not undone.
          ConditionExpression: `attribute_exists(pk) AND attribute_not_exists(lastSeenAt) AND ${
            item.reconciliation ? 'verdictAt = :verdictAt' : 'attribute_not_exists(verdict)'
          }`,
          ExpressionAttributeValues: {
            ...(item.reconciliation ? { ':verdictAt': item.reconciliation.at } : {}),
            ':now': now,
            ':empty': [],
            ':entry': [{ verdict: reason, day: item.reconciliation?.day ?? '', at: now }],
          },
        },
        { at: now, what: 'retired' },
        (after) => after.retiredAt === now && after.verdict === undefined,
      );
    },

    clearVerdict(attempt, at) {
      const seen = attempt.lastSeenAt;
      return updated({
        Key: attemptKey(attempt.surveyId, attempt.pid, attempt.token),
        UpdateExpression:
          'SET verdictHistory = list_append(if_not_exists(verdictHistory, :empty), :entry) ' +
          'REMOVE verdict, verdictDay, verdictDetail, verdictAt, marketplace, gsi2pk, gsi2sk',
        ConditionExpression: `attribute_exists(verdict) AND ${seen === undefined ? 'attribute_not_exists(lastSeenAt)' : 'lastSeenAt = :seen'}`,
        ExpressionAttributeValues: {
          ':empty': [],
          ':entry': [{ verdict: 'collapsed', day: attempt.reconciliation?.day ?? '', at: at.toISOString() }],
          ...(seen === undefined ? {} : { ':seen': seen }),
        },
      });
    },

    async clearDayFlags(surveyId, flags) {
      // Each on its own and only as read: a day flagged again since (by a hit, or by this run's own verdicts) keeps
      // its flag for the next run, and the others go. Flags are few: late hits only.
      await Promise.all(
        flags.map(({ day, at }) =>
          updated({
            Key: dayFlagsKey(surveyId),
            UpdateExpression: 'REMOVE #flag',
            ConditionExpression: '#flag = :at',
            ExpressionAttributeNames: { '#flag': `${DAY_FLAG_PREFIX}${day}` },
            ExpressionAttributeValues: { ':at': at },
          }),
        ),
      );
    },

    pointToArrival(surveyId, pid, token, arrivedAs, at) {
      return updatedOnce(
        {
          Key: attemptKey(surveyId, pid, token),
          // With its time: the attempt feed orders an item's images by it (attempt-feed.ts `isLaterRecord`), so a
          // rebuilt image that has the pointer outranks a stream image from before it.
          UpdateExpression: 'SET arrivedAs = :arrivedAs, arrivedAt = :at',
          // On the item a run made for the transaction: none yet, and that run will make it and look again.
          ConditionExpression:
            'attribute_exists(pk) AND (attribute_not_exists(arrivedAs) OR arrivedAs <> :arrivedAs)',
          ExpressionAttributeValues: { ':arrivedAs': arrivedAs, ':at': at.toISOString() },
        },
        { at: at.toISOString(), what: `arrived|${arrivedAs}` },
        (after) => after.arrivedAs === arrivedAs && after.arrivedAt === at.toISOString(),
      );
    },

    async outsidersOf(surveyId, days) {
      const found = new Map<string, OutsiderKey[]>();
      // Consistent: the summary's count written after is what this read finds (rare: only days that have any).
      const lists = await Promise.all(
        days.map((day) =>
          queryAll(client, {
            TableName: tableName,
            KeyConditionExpression: 'pk = :pk AND begins_with(sk, :day)',
            ExpressionAttributeValues: {
              ':pk': outsidersKey(surveyId, day).pk,
              ':day': outsidersPrefix(day),
            },
            ConsistentRead: true,
          }),
        ),
      );
      days.forEach((day, i) => {
        const keys = new Map<string, OutsiderKey>();
        for (const item of lists[i] ?? []) {
          // An earlier release's one item of the day, its keys in a set; or one outsider, as written now.
          const listed =
            item.keys instanceof Set
              ? [...item.keys].map((key) => JSON.parse(String(key)))
              : [[item.pid, item.token]];
          for (const [pid, token] of listed as unknown[][])
            if (typeof pid === 'string' && typeof token === 'string')
              keys.set(JSON.stringify([pid, token]), { pid, token });
        }
        if (keys.size > 0) found.set(day, [...keys.values()]);
      });
      return found;
    },

    async addOutsiders(surveyId, day, keys) {
      // One item each, a few written at once: a day's outsiders have no bound (one written again is the same item).
      throwIfFailed(
        await runBounded(
          keys.map(
            ({ pid, token }) =>
              () =>
                send(() =>
                  client.send(
                    new PutCommand({
                      TableName: tableName,
                      Item: {
                        ...outsiderKey(surveyId, day, pid, token),
                        kind: 'outsider',
                        surveyId,
                        day,
                        pid,
                        token,
                      },
                    }),
                  ),
                ),
          ),
          { concurrency: 8 },
        ),
      );
    },

    async putDaySummary(summary, at, runId, options) {
      // An update rather than a put: a late hit's flag (ledgerChangedAt) set while the run read the day must
      // survive the figures it may not include.
      const fields: Record<string, unknown> = {
        ...summaryIndexKey(summary.surveyId, summary.day),
        kind: 'summary',
        ...summary,
        reconciledAt: at.toISOString(),
        checkedAt: at.toISOString(),
        runId,
      };
      const present = Object.entries(fields).filter(([, value]) => value !== undefined);
      const absent = OPTIONAL_SUMMARY_FIGURES.filter((name) => fields[name] === undefined);
      const read = options?.asRead;
      const condition = options
        ? {
            ConditionExpression: `${read ? '#was = :was' : 'attribute_not_exists(#here)'} OR #runId = :runId`,
            names: { ...(read ? { '#was': 'reconciledAt' } : { '#here': 'here' }), '#runId': 'runId' },
            values: { ...(read ? { ':was': read.reconciledAt } : {}), ':runId': runId },
          }
        : undefined;
      return written(() =>
        client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: summaryKey(summary.surveyId, summary.day),
            UpdateExpression:
              `SET ${present.map((_, i) => `#f${i} = :f${i}`).join(', ')}` +
              (absent.length > 0 ? ` REMOVE ${absent.map((_, i) => `#r${i}`).join(', ')}` : ''),
            ...(condition ? { ConditionExpression: condition.ConditionExpression } : {}),
            ExpressionAttributeNames: {
              ...Object.fromEntries([
                ...present.map(([name], i) => [`#f${i}`, name]),
                ...absent.map((name, i) => [`#r${i}`, name]),
              ]),
              ...condition?.names,
            },
            ExpressionAttributeValues: {
              ...Object.fromEntries(present.map(([, value], i) => [`:f${i}`, value])),
              ...condition?.values,
            },
          }),
        ),
      );
    },

    flagDay(surveyId, day, at) {
      return flagJudgedDay(client, tableName, surveyId, day, at);
    },

    recordSummaryCheck(surveyId, day, at) {
      return advanceSummaryTime(client, tableName, { surveyId, day }, 'checkedAt', at);
    },

    async summariesOf(surveyId, days) {
      return (await surveyRecords(surveyId, days, false)).summaries;
    },

    surveyRecords: (surveyId, days) => surveyRecords(surveyId, days),

    async daySummaries(day) {
      const keys = await queryAll(client, {
        TableName: tableName,
        IndexName: LEDGER.index.name,
        KeyConditionExpression: '#pk = :pk',
        ExpressionAttributeNames: { '#pk': LEDGER.index.partitionKey },
        ExpressionAttributeValues: { ':pk': summaryIndexKey('', day).gsi1pk },
      });
      const items = await batchGet(
        client,
        tableName,
        keys.map((k) => ({ pk: k.pk, sk: k.sk })),
      );
      return items.map(summaryFromItem).sort((a, b) => Number(a.surveyId) - Number(b.surveyId));
    },

    async judgedAs(surveyId, kind, days) {
      const { discrepancyIndex: index } = LEDGER;
      const prefix = discrepancyIndexKey('', surveyId, kind, '').gsi2sk;
      const keys = await runBounded(
        days.map(
          (day) => () =>
            queryAll(client, {
              TableName: tableName,
              IndexName: index.name,
              KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :prefix)',
              ExpressionAttributeNames: { '#pk': index.partitionKey, '#sk': index.sortKey },
              ExpressionAttributeValues: {
                ':pk': discrepancyIndexKey(day, '', '', '').gsi2pk,
                ':prefix': prefix,
              },
            }),
        ),
        { concurrency: 4 },
      );
      const items = await batchGet(
        client,
        tableName,
        valuesOrThrow(keys, () => [])
          .flat()
          .map((k) => ({ pk: k.pk, sk: k.sk })),
      );
      return items.map(attemptFromItem);
    },

    async discrepancies(day, surveyId) {
      const { discrepancyIndex: index } = LEDGER;
      const keys = await queryAll(client, {
        TableName: tableName,
        IndexName: index.name,
        KeyConditionExpression: surveyId ? '#pk = :pk AND begins_with(#sk, :survey)' : '#pk = :pk',
        ExpressionAttributeNames: {
          '#pk': index.partitionKey,
          ...(surveyId ? { '#sk': index.sortKey } : {}),
        },
        ExpressionAttributeValues: {
          ':pk': discrepancyIndexKey(day, '', '', '').gsi2pk,
          ...(surveyId ? { ':survey': `${surveyId}#` } : {}),
        },
      });
      const items = await batchGet(
        client,
        tableName,
        keys.map((k) => ({ pk: k.pk, sk: k.sk })),
      );
      return items
        .map(attemptFromItem)
        .sort((a, b) => `${a.surveyId}#${a.token}`.localeCompare(`${b.surveyId}#${b.token}`));
    },

    async discrepancyPage(day, options) {
      const { discrepancyIndex: index } = LEDGER;
      const partition = discrepancyIndexKey(day, '', '', '').gsi2pk;
      const partsOf = (key: Item) => {
        const [surveyId = '', kind = '', ...token] = String(key[index.sortKey]).split('#');
        return { key, surveyId, kind, token: token.join('#'), pk: String(key.pk) };
      };
      const wanted = (kind: string | undefined) =>
        kind !== undefined && (options.kind ? kind === options.kind : !options.excludeKinds?.includes(kind));
      const before = (a: PagePosition, b: PagePosition) =>
        a.token < b.token || (a.token === b.token && a.pk < b.pk);
      // A survey's discrepancies are paged in token order, not in the index's kind order: a verdict that changes
      // kind between two pages would move its row past the cursor (shown twice) or behind it (never shown). So the
      // keys are read in the index's order, from the cursor's survey on, and each survey's are taken once all are in
      // (a key of the next survey says so: every key of a survey starts `<id>#`).
      const from = options.after?.surveyId ?? options.surveyId;
      const picked: ReturnType<typeof partsOf>[] = [];
      let next: DiscrepancyPosition | undefined;
      let survey: ReturnType<typeof partsOf>[] = [];
      const take = () => {
        const after = options.after;
        const rows = [...new Map(survey.map((k) => [`${k.pk}|${String(k.key.sk)}`, k])).values()]
          .filter((k) => wanted(k.kind) && !(after && k.surveyId === after.surveyId && !before(after, k)))
          .sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
        picked.push(...rows.slice(0, options.limit - picked.length));
        survey = [];
        const last = picked.at(-1);
        if (picked.length >= options.limit && last)
          next = { surveyId: last.surveyId, token: last.token, pk: last.pk };
      };
      let startKey: Record<string, unknown> | undefined;
      do {
        const page = await send(() =>
          client.send(
            new QueryCommand({
              TableName: tableName,
              IndexName: index.name,
              KeyConditionExpression: options.surveyId
                ? '#pk = :pk AND begins_with(#sk, :from)'
                : from === undefined
                  ? '#pk = :pk'
                  : '#pk = :pk AND #sk >= :from',
              ExpressionAttributeNames: {
                '#pk': index.partitionKey,
                ...(from === undefined ? {} : { '#sk': index.sortKey }),
              },
              ExpressionAttributeValues: {
                ':pk': partition,
                ...(from === undefined ? {} : { ':from': `${from}#` }),
              },
              // The first read as long as the page (and one key past it); then up to a megabyte at a time, so a
              // survey with thousands of rows is read in a few round trips rather than in hundreds.
              ...(startKey ? { ExclusiveStartKey: startKey } : { Limit: Math.max(100, options.limit + 1) }),
            }),
          ),
        );
        for (const key of (page.Items ?? []) as Item[]) {
          const parts = partsOf(key);
          if (survey.length > 0 && parts.surveyId !== survey[0]?.surveyId) take();
          if (next) break;
          survey.push(parts);
        }
        startKey = page.LastEvaluatedKey;
      } while (startKey && !next);
      if (!next && survey.length > 0) take();
      const items = await batchGet(
        client,
        tableName,
        picked.map(({ key }) => ({ pk: key.pk, sk: key.sk })),
      );
      const order = new Map(picked.map(({ key }, i) => [`${key.pk}|${key.sk}`, i]));
      const attempts = items
        .sort((a, b) => (order.get(`${a.pk}|${a.sk}`) ?? 0) - (order.get(`${b.pk}|${b.sk}`) ?? 0))
        .map(attemptFromItem)
        // The index follows the table a moment late: a row whose verdict moved on since is shown as it is now, and
        // only if it is still of a kind asked for and of this day (a verdict moved to another day shows there).
        .filter((attempt) => wanted(attempt.reconciliation?.verdict) && attempt.reconciliation?.day === day);
      return { attempts, ...(next ? { next } : {}) };
    },

    async surveyState(surveyId) {
      const item = await getItem(reconciliationStateKey(surveyId));
      return item ? stateFromItem(surveyId, item) : undefined;
    },

    async surveyStates(surveyIds) {
      const items = await batchGet(client, tableName, surveyIds.map(reconciliationStateKey));
      return items.map((item) => stateFromItem(String(item.pk).slice('SURVEY#'.length), item));
    },

    async putSurveyState(state, options) {
      const { revision, ...fields } = state;
      const read = options?.asRead;
      const condition = options ? unchangedSinceRead('revision', read !== undefined, read?.revision) : {};
      const next = ((options ? read?.revision : revision) ?? 0) + 1;
      // Marked as this write's: two runs may write the same revision at the same time.
      const writer = randomUUID();
      const key = reconciliationStateKey(state.surveyId);
      return writtenOnce(
        () =>
          client.send(
            new PutCommand({
              TableName: tableName,
              Item: {
                ...key,
                kind: 'reconciliation',
                ...fields,
                failedDays: [...state.failedDays],
                revision: next,
                writtenBy: writer,
              },
              // Undefined optional fields are dropped by the client's marshalling.
              ...condition,
            }),
          ),
        key,
        { at: writer, what: 'state' },
        // Refused by the revision this very write made (applied, its answer lost): written, not another run's.
        (after) => after.writtenBy === writer,
      );
    },

    async runState(name) {
      const item = await getItem(runStateKey(name));
      if (!item) return undefined;
      const lists = await runLists.lists(name, item);
      // A run whose list is gone cannot be resumed: the next invocation starts a new one.
      if (!lists) return { ...runFields(item), surveys: [], cursor: 0, finishedAt: String(item.startedAt) };
      return { ...runFields(item), ...lists };
    },

    async putRunState(name, state, options) {
      const { surveys, failedSurveys, ...rest } = state;
      const lists = await runLists.attributes(
        name,
        state.runId,
        { surveys, failedSurveys: failedSurveys ?? [] },
        new Date(),
      );
      const condition = options
        ? unchangedSinceRead('runId', options.replacing !== undefined, options.replacing)
        : {};
      return written(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: { ...runStateKey(name), kind: 'run', ...rest, ...lists },
            ...condition,
          }),
        ),
      );
    },

    async finishedRun(name) {
      // A batch read of one key: finance may batch-read the table but not get an item.
      const [item] = await batchGet(client, tableName, [finishedRunKey(name)], { consistent: true });
      if (!item) return undefined;
      const lists = await runLists.lists(name, item);
      if (!lists) return undefined;
      const list = (value: unknown) => (Array.isArray(value) ? value.map(String) : []);
      return {
        runId: String(item.runId),
        startedAt: String(item.startedAt),
        ...(typeof item.checkedAsOf === 'string' ? { checkedAsOf: item.checkedAsOf } : {}),
        finishedAt: String(item.finishedAt),
        freshDays: list(item.freshDays),
        ...lists,
        ...(Array.isArray(item.stoppedSurveys) ? { stoppedSurveys: list(item.stoppedSurveys) } : {}),
      };
    },

    async putFinishedRun(name, run) {
      const { surveys, failedSurveys, ...rest } = run;
      const lists = await runLists.attributes(name, run.runId, { surveys, failedSurveys }, new Date());
      await send(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              ...finishedRunKey(name),
              kind: 'run',
              ...rest,
              freshDays: [...run.freshDays],
              ...lists,
            },
          }),
        ),
      );
    },

    acquireRun(name, runId, now, until) {
      // A lease written whose answer was lost is this invocation's: otherwise it would find its own lease held and
      // stand aside, and the next invocation take it for a death.
      // Marked as this call's: two invocations resuming the same run may ask for the same lease time.
      const holder = randomUUID();
      return updatedOnce(
        {
          Key: runStateKey(name),
          UpdateExpression: 'SET leaseUntil = :until, leaseHolder = :holder',
          ConditionExpression: 'runId = :runId AND (attribute_not_exists(leaseUntil) OR leaseUntil < :now)',
          ExpressionAttributeValues: {
            ':until': until.toISOString(),
            ':holder': holder,
            ':runId': runId,
            ':now': now.toISOString(),
          },
        },
        { at: until.toISOString(), what: `lease|${holder}` },
        (after) => after.leaseHolder === holder,
      );
    },
  };
}

/**
 * A Put's condition that the stored item is still the one its writer read: none stored when it read none; else
 * `attribute` as read (absent when the item read had none: written before the attribute was).
 */
function unchangedSinceRead(attribute: string, existed: boolean, value: string | number | undefined) {
  if (!existed) return { ConditionExpression: 'attribute_not_exists(pk)' };
  if (value === undefined)
    return { ConditionExpression: `attribute_exists(pk) AND attribute_not_exists(${attribute})` };
  return { ConditionExpression: `${attribute} = :asRead`, ExpressionAttributeValues: { ':asRead': value } };
}

/** A run state item's own fields (its lists are read apart, run-lists.ts). */
function runFields(item: Item): Omit<RunState, 'surveys' | 'failedSurveys'> {
  const {
    pk: _pk,
    sk: _sk,
    kind: _kind,
    surveys: _s,
    failedSurveys: _f,
    surveyChunks: _c,
    surveyCount: _n,
    failedMarks: _m,
    failedOthers: _o,
    ...rest
  } = item;
  return rest as unknown as Omit<RunState, 'surveys' | 'failedSurveys'>;
}

function stateFromItem(surveyId: string, item: Item): SurveyReconciliationState {
  return {
    surveyId,
    lastReconciledAt: item.lastReconciledAt as string | undefined,
    failedDays: (item.failedDays as string[] | undefined) ?? [],
    lastError: item.lastError as string | undefined,
    lastErrorAt: item.lastErrorAt as string | undefined,
    ...(typeof item.failingSince === 'string' ? { failingSince: item.failingSince } : {}),
    ...(Array.isArray(item.openDays) ? { openDays: item.openDays as string[] } : {}),
    ...(typeof item.openCheckedAt === 'string' ? { openCheckedAt: item.openCheckedAt } : {}),
    ...(Array.isArray(item.reviewedDays) ? { reviewedDays: item.reviewedDays as string[] } : {}),
    ...(typeof item.reviewedCheckedAt === 'string' ? { reviewedCheckedAt: item.reviewedCheckedAt } : {}),
    ...(typeof item.reviewedFinalDay === 'string' ? { reviewedFinalDay: item.reviewedFinalDay } : {}),
    ...(typeof item.rulesEdition === 'number' ? { rulesEdition: item.rulesEdition } : {}),
    ...(typeof item.rejudgeTriedAt === 'string' ? { rejudgeTriedAt: item.rejudgeTriedAt } : {}),
    ...(typeof item.rejudgedFrom === 'string' ? { rejudgedFrom: item.rejudgedFrom } : {}),
    ...(typeof item.listedByDayAt === 'string' ? { listedByDayAt: item.listedByDayAt } : {}),
    ...(item.emptyDays !== null && typeof item.emptyDays === 'object' && !Array.isArray(item.emptyDays)
      ? {
          emptyDays: Object.fromEntries(
            Object.entries(item.emptyDays as Record<string, unknown>).filter(
              (entry): entry is [string, string] => typeof entry[1] === 'string',
            ),
          ),
        }
      : {}),
    ...(typeof item.revision === 'number' ? { revision: item.revision } : {}),
  };
}

function summaryFromItem(item: Item): StoredDaySummary {
  return {
    surveyId: String(item.surveyId),
    day: String(item.day),
    here: item.here as DaySummary['here'],
    marketplace: item.marketplace as DaySummary['marketplace'],
    verdicts: (item.verdicts ?? {}) as Partial<Record<VerdictKind, number>>,
    ...(typeof item.awaiting === 'number' && item.awaiting > 0 ? { awaiting: item.awaiting } : {}),
    ...(typeof item.transactionsDigest === 'string' ? { transactionsDigest: item.transactionsDigest } : {}),
    ...(typeof item.outsiders === 'number' && item.outsiders > 0 ? { outsiders: item.outsiders } : {}),
    ...crossKeyedOf(item.crossKeyed),
    reconciledAt: String(item.reconciledAt),
    checkedAt: String(item.checkedAt ?? item.reconciledAt),
    runId: String(item.runId),
    ...(typeof item.ledgerChangedAt === 'string' ? { ledgerChangedAt: item.ledgerChangedAt } : {}),
  };
}

/** Summary figures a day may lack: an update that writes figures without them removes the stored ones. */
const OPTIONAL_SUMMARY_FIGURES = ['awaiting', 'transactionsDigest', 'outsiders', 'crossKeyed'] as const;

/** A stored summary's `crossKeyed`, when it reads. */
function crossKeyedOf(value: unknown): Pick<DaySummary, 'crossKeyed'> {
  if (typeof value !== 'object' || value === null) return {};
  const { tokens, count } = value as { tokens?: unknown; count?: unknown };
  if (!Array.isArray(tokens) || typeof count !== 'number') return {};
  return { crossKeyed: { tokens: tokens.map(String), count } };
}
