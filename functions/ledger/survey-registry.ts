/**
 * The survey registry and checkpoints in the ledger table: what this product configured at the marketplace for
 * each survey, and how far the scheduled jobs have got.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { batchGet, conditionally, type Item, queryAll, send } from './document-client';
import {
  checkpointKey,
  LEDGER,
  REGISTRY_ENDED,
  REGISTRY_LIVE,
  registrationIndexKey,
  registrationKey,
  surveyOfRegistrationIndex,
} from './ledger-schema';

/** What this product has configured at the marketplace for one survey. */
export interface SurveyRegistration {
  readonly surveyId: string;
  /** `active`: our redirects should be in place; `removed`: the survey-level redirects were deleted. */
  readonly state: 'active' | 'removed';
  /** Fingerprint of the settings last sent, and the key id that signed them. */
  readonly fingerprint?: string | undefined;
  readonly kid?: string | undefined;
  readonly appliedAt?: string | undefined;
  /**
   * When the marketplace first took this stack's redirects for the survey (kept from then on, a removal and a later
   * apply included): rows that ended before it that nothing here heard of were sent to another system's URLs, not
   * this stack's to account for. Absent on a registration older than the field: no bound.
   */
  readonly servingSince?: string | undefined;
  /**
   * Registered by an apply the marketplace refused, before any it took: `servingSince` is set by the first it takes.
   * (A registration without either is older than the field: no bound.)
   */
  readonly neverTaken?: boolean | undefined;
  /**
   * The times since `servingSince` the survey was removed here and then applied again (oldest first, those of the
   * last 62 days): rows that ended within one, nothing here heard of, went to another system's URLs.
   */
  readonly notServing?: readonly { readonly from: string; readonly to: string }[] | undefined;
  /** Removed, then applied again without the marketplace taking it: another system's since then, until one is taken. */
  readonly notServingSince?: string | undefined;
  /** The marketplace read back exactly what was sent. */
  readonly verified: boolean;
  readonly verifiedAt?: string | undefined;
  /** Why the last apply, verify or remove failed; cleared by the next success. */
  readonly lastError?: string | undefined;
  readonly lastErrorAt?: string | undefined;
  /**
   * Of the `failures` in a row, those that were the marketplace not answering (a 5xx, a 429, a timeout, no
   * connection) rather than a refusal of this survey: an outage reaches every survey at once.
   */
  readonly unavailableFailures?: number | undefined;
  /** Failures in a row. */
  readonly failures: number;
  readonly removedAt?: string | undefined;
  /**
   * Removed without ever having been registered here (another stack's survey, its redirects deleted by `remove`):
   * kept so the sync leaves it alone, never reconciled (its transactions are another stack's).
   */
  readonly neverApplied?: boolean | undefined;
  /**
   * When the marketplace said the survey is not live (Paused/Closed), after it dropped out of the list of live
   * surveys; cleared once it is listed live again. A survey closed before the reconciliation window is read only
   * for its days past the window (reviews), and it is neither read back nor retried meanwhile.
   */
  readonly closedAt?: string | undefined;
  /** When a lookup last found it live though the list of live surveys left it out (closure lookups go oldest first). */
  readonly liveCheckedAt?: string | undefined;
  /** When the sync last read a verified survey's redirects back (whatever came of it): one a day. */
  readonly readBackAt?: string | undefined;
  /**
   * The survey's created or modified time as the marketplace listed it (its own clock) when the sync last applied
   * or read back its redirects: a listing shows a change since only with a later time, however the marketplace's
   * clock or zone stands against this product's.
   */
  readonly changeLookedAt?: string | undefined;
  /** Daily read-backs of a verified survey that failed in a row (`READ_BACK_TRIES` of them unverify it). */
  readonly readBackFailures?: number | undefined;
  /** When the last of them was counted: one a day counts, whatever brought more read-backs. */
  readonly readBackFailedAt?: string | undefined;
  /** The survey's CPI as the marketplace last listed it: what reconciliation checks amounts against. */
  readonly expectedCpi?: string | undefined;
  /**
   * The survey's prices as this product saw them change, oldest first (those of the last 70 days, at most
   * `CPI_HISTORY_LIMIT`): a transaction is checked against the price in force when its respondent clicked in, not
   * today's. `since` is when a price was first seen ('' for one seen before the history was kept).
   */
  readonly cpiHistory?: readonly { readonly cpi: string; readonly since: string }[] | undefined;
  /** When a listing last showed the survey at `expectedCpi` (as written with it): a later change is after it. */
  readonly priceSeenAt?: string | undefined;
  readonly updatedAt: string;
}

/** When a registration's survey ended here: removed, or closed at the marketplace; undefined while it is live. */
export const endedAt = (registration: SurveyRegistration): string | undefined =>
  registration.state === 'removed'
    ? (registration.removedAt ?? registration.updatedAt)
    : registration.closedAt;

/** Which registrations a listing returns: every live one, and the ended ones since `endedSince` (all if unset). */
export interface RegistryListing {
  readonly endedSince?: string | undefined;
}

export interface SurveyRegistry {
  get(surveyId: string): Promise<SurveyRegistration | undefined>;
  /** The registrations of these surveys that exist, live or ended (point reads in batches). */
  many(surveyIds: readonly string[]): Promise<SurveyRegistration[]>;
  put(registration: SurveyRegistration): Promise<void>;
  /**
   * Writes it only if the survey's registration is still the one read (`read`, by its `updatedAt`; undefined: none
   * was read, and none must exist). False when another writer got there first (theirs stands).
   */
  replace(registration: SurveyRegistration, read: SurveyRegistration | undefined): Promise<boolean>;
  /** The registered surveys, by id, through the index: the live ones and those ended since `endedSince`. */
  list(listing?: RegistryListing): Promise<SurveyRegistration[]>;
  /** The ids `list` would give, from the keys-only index alone (no item read). */
  surveyIds(listing?: RegistryListing): Promise<string[]>;
  /**
   * Moves up to `limit` ended registrations that a release before the ended part of the index kept among the live
   * ones to where they belong; the number moved (0 once none is left).
   */
  relocateEnded(limit: number): Promise<number>;
  /** A named checkpoint (ISO-8601 UTC), or undefined before the first. */
  checkpoint(name: string): Promise<string | undefined>;
  /** Moves a checkpoint forward; never backwards, even when two runs race. Returns false if it did not move. */
  advanceCheckpoint(name: string, to: string): Promise<boolean>;
  /**
   * Takes a named lease for `holder` until `until`, unless another holds it past `now`: then says until when (a
   * conditional write, so two takers at once cannot both have it).
   */
  takeLease(
    name: string,
    holder: string,
    until: Date,
    now: Date,
  ): Promise<{ taken: boolean; heldUntil?: string }>;
  /** Gives a lease back, if `holder` still holds it. */
  releaseLease(name: string, holder: string, now: Date): Promise<void>;
}

const REGISTRATION_FIELDS = [
  'surveyId',
  'state',
  'fingerprint',
  'kid',
  'appliedAt',
  'servingSince',
  'neverTaken',
  'notServing',
  'notServingSince',
  'verified',
  'verifiedAt',
  'lastError',
  'lastErrorAt',
  'unavailableFailures',
  'failures',
  'removedAt',
  'neverApplied',
  'closedAt',
  'liveCheckedAt',
  'readBackAt',
  'changeLookedAt',
  'readBackFailures',
  'readBackFailedAt',
  'expectedCpi',
  'cpiHistory',
  'priceSeenAt',
  'updatedAt',
] as const;

/**
 * How long a price stays in the history once another followed it: as long as a click at that price can still be
 * judged (reconciliation's review horizon of 60 days, a week's look-back, a margin).
 */
export const CPI_HISTORY_KEPT_MS = 70 * 86_400_000;
/**
 * How many prices the history keeps at most, whatever their age (about 60 bytes each: a survey repriced every
 * sync, four times an hour, for five days). A click before the oldest kept is judged without a price (`unpriced`).
 */
export const CPI_HISTORY_LIMIT = 500;
/** How long a registration keeps a removal between applies (`notServing`): past it, no review reads its days. */
export const SERVING_GAPS_KEPT_MS = 62 * 86_400_000;

/**
 * A registration's price fields once a listing seen at `seenAt` shows it at `cpi`, a change of price dated `at` (the
 * survey's modified time, or when it was seen): the history grows only when the price changes. A change is never
 * dated before a listing last showed the old price, nor before the price before it: a price changed without the
 * survey's modified time moving would otherwise be backdated over completes made at the old price, and the history
 * fall out of order.
 */
export function pricedAt(
  registration: Pick<SurveyRegistration, 'expectedCpi' | 'cpiHistory' | 'priceSeenAt'> | undefined,
  cpi: string | undefined,
  at: string,
  seenAt: string = at,
): Pick<SurveyRegistration, 'expectedCpi' | 'cpiHistory' | 'priceSeenAt'> {
  const previous = registration?.expectedCpi;
  const history = registration?.cpiHistory ?? (previous !== undefined ? [{ cpi: previous, since: '' }] : []);
  const seen = cpi === undefined ? registration?.priceSeenAt : seenAt;
  const seenField = seen === undefined ? {} : { priceSeenAt: seen };
  if (cpi === undefined || cpi === previous)
    return previous === undefined ? {} : { expectedCpi: previous, cpiHistory: history, ...seenField };
  const since = [
    at,
    previous === undefined ? '' : (registration?.priceSeenAt ?? ''),
    history.at(-1)?.since ?? '',
  ]
    .sort()
    .at(-1) as string;
  return {
    expectedCpi: cpi,
    cpiHistory: recentPrices([...history, { cpi, since }], at),
    ...seenField,
  };
}

/** The prices a click still judged may have been made at: the one in force `CPI_HISTORY_KEPT_MS` before `at`, and on. */
function recentPrices<T extends { readonly since: string }>(history: readonly T[], at: string): T[] {
  const now = Date.parse(at);
  let first = 0;
  if (!Number.isNaN(now)) {
    const cutoff = new Date(now - CPI_HISTORY_KEPT_MS).toISOString();
    while (first < history.length - 1 && (history[first + 1] as T).since <= cutoff) first++;
  }
  return history.slice(Math.max(first, history.length - CPI_HISTORY_LIMIT));
}

export function createSurveyRegistry(client: DynamoDBDocumentClient, tableName: string): SurveyRegistry {
  const fromItem = (item: Item): SurveyRegistration =>
    Object.fromEntries(
      REGISTRATION_FIELDS.filter((f) => item[f] !== undefined).map((f) => [f, item[f]]),
    ) as unknown as SurveyRegistration;
  const partitionKeys = (partition: string, sortFrom?: string) =>
    queryAll(client, {
      TableName: tableName,
      IndexName: LEDGER.index.name,
      KeyConditionExpression: sortFrom === undefined ? '#pk = :pk' : '#pk = :pk AND #sk >= :from',
      ExpressionAttributeNames: {
        '#pk': LEDGER.index.partitionKey,
        ...(sortFrom === undefined ? {} : { '#sk': LEDGER.index.sortKey }),
      },
      ExpressionAttributeValues: {
        ':pk': partition,
        ...(sortFrom === undefined ? {} : { ':from': sortFrom }),
      },
    });
  const registrationKeys = async (listing: RegistryListing = {}) =>
    (
      await Promise.all([partitionKeys(REGISTRY_LIVE), partitionKeys(REGISTRY_ENDED, listing.endedSince)])
    ).flat();
  // Once: a registration just moved between the live and the ended part can show in both for a moment (the index
  // is eventually consistent), and a batch read refuses a key given twice.
  const read = async (keys: readonly Item[]) =>
    (
      await batchGet(client, tableName, [
        ...new Map(keys.map((key) => [`${key.pk}\n${key.sk}`, { pk: key.pk, sk: key.sk }])).values(),
      ])
    ).map(fromItem);
  const byId = (a: SurveyRegistration, b: SurveyRegistration) => Number(a.surveyId) - Number(b.surveyId);
  /**
   * `unchangedSince`: only over the registration of that `updatedAt` (`''`: one without any, written by hand); null:
   * only where there is none.
   */
  const put = async (registration: SurveyRegistration, options: { unchangedSince?: string | null } = {}) => {
    try {
      await send(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              ...registrationKey(registration.surveyId),
              ...registrationIndexKey(registration.surveyId, endedAt(registration)),
              kind: 'survey',
              ...registration,
            },
            ...(options.unchangedSince === undefined
              ? {}
              : options.unchangedSince === null
                ? { ConditionExpression: 'attribute_not_exists(pk)' }
                : options.unchangedSince === ''
                  ? { ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(updatedAt)' }
                  : {
                      ConditionExpression: 'updatedAt = :read',
                      ExpressionAttributeValues: { ':read': options.unchangedSince },
                    }),
          }),
        ),
      );
      return true;
    } catch (error) {
      // Written by someone else since it was read: theirs stands (and is in the right place).
      if (!(options.unchangedSince !== undefined && error instanceof ConditionalCheckFailedException))
        throw error;
      return false;
    }
  };
  return {
    async get(surveyId) {
      const { Item } = await send(() =>
        client.send(
          new GetCommand({ TableName: tableName, Key: registrationKey(surveyId), ConsistentRead: true }),
        ),
      );
      return Item ? fromItem(Item) : undefined;
    },
    async many(surveyIds) {
      const keys = [...new Set(surveyIds)].map((surveyId) => registrationKey(surveyId));
      return (await batchGet(client, tableName, keys, { consistent: true })).map(fromItem);
    },
    put: async (registration) => {
      await put(registration);
    },
    replace: (registration, read) =>
      put(registration, { unchangedSince: read === undefined ? null : (read.updatedAt ?? '') }),
    async list(listing) {
      return (await read(await registrationKeys(listing))).sort(byId);
    },
    async surveyIds(listing) {
      return [
        ...new Set(
          (await registrationKeys(listing)).map((key) =>
            surveyOfRegistrationIndex(String(key[LEDGER.index.sortKey])),
          ),
        ),
      ].sort((a, b) => Number(a) - Number(b));
    },
    async relocateEnded(limit) {
      const misplaced = (await read(await partitionKeys(REGISTRY_LIVE)))
        .filter((registration) => endedAt(registration) !== undefined)
        .slice(0, limit);
      // Each written back as read, only if no one wrote it since (an operator's apply or remove meanwhile wins).
      for (const registration of misplaced)
        await put(registration, { unchangedSince: registration.updatedAt });
      return misplaced.length;
    },
    async checkpoint(name) {
      const { Item } = await send(() =>
        client.send(new GetCommand({ TableName: tableName, Key: checkpointKey(name), ConsistentRead: true })),
      );
      return typeof Item?.at === 'string' ? Item.at : undefined;
    },
    async takeLease(name, holder, until, at) {
      const taken = await conditionally(() =>
        client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: checkpointKey(`lease#${name}`),
            UpdateExpression: 'SET leaseUntil = :until, holder = :holder, kind = :kind, updatedAt = :now',
            ConditionExpression: 'attribute_not_exists(leaseUntil) OR leaseUntil <= :now OR holder = :holder',
            ExpressionAttributeValues: {
              ':until': until.toISOString(),
              ':holder': holder,
              ':kind': 'lease',
              ':now': at.toISOString(),
            },
          }),
        ),
      );
      if (taken) return { taken };
      const { Item } = await send(() =>
        client.send(
          new GetCommand({ TableName: tableName, Key: checkpointKey(`lease#${name}`), ConsistentRead: true }),
        ),
      );
      return { taken, ...(typeof Item?.leaseUntil === 'string' ? { heldUntil: Item.leaseUntil } : {}) };
    },
    async releaseLease(name, holder, at) {
      await conditionally(() =>
        client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: checkpointKey(`lease#${name}`),
            // Removed, not set to this machine's now: another's clock behind it would read it as still held.
            UpdateExpression: 'REMOVE leaseUntil SET updatedAt = :now',
            ConditionExpression: 'holder = :holder',
            ExpressionAttributeValues: { ':holder': holder, ':now': at.toISOString() },
          }),
        ),
      );
    },
    async advanceCheckpoint(name, to) {
      return conditionally(() =>
        client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: checkpointKey(name),
            UpdateExpression: 'SET #at = :to, kind = :kind, updatedAt = :now',
            ConditionExpression: 'attribute_not_exists(#at) OR #at < :to',
            ExpressionAttributeNames: { '#at': 'at' },
            ExpressionAttributeValues: {
              ':to': to,
              ':kind': 'checkpoint',
              ':now': new Date().toISOString(),
            },
          }),
        ),
      );
    },
  };
}
