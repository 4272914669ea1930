/**
 * The ledger in DynamoDB: the only module that speaks to the table.
 *
 * Every hit is one UpdateItem with no read before it. The update only ever sets attributes that are not yet
 * there (`if_not_exists`) and adds to counters, so concurrent and repeated hits commute: whatever order they
 * arrive in, the first outcome of each channel stands and the counts are exact.
 */
import { ConditionalCheckFailedException, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import {
  type Attempt,
  channelRecord,
  completeEvidence,
  type HitEffect,
  hasConflict,
  hitEffect,
  type Sighting,
} from './attempt';
import type { Hit, HitSource } from './hit-request';
import {
  attemptDayKey,
  attemptKey,
  attemptPartition,
  checkpointKey,
  LEDGER,
  REJECTED_RETENTION_DAYS,
  registrationIndexKey,
  registrationKey,
  rejectedKey,
  utcDay,
} from './ledger-schema';
import { type Channel, type Outcome, outcomesOf } from './outcome';

/** A hit refused before it could count: a forged or malformed redirect. Kept for investigation only. */
export interface RejectedHit {
  readonly at: string;
  readonly requestId: string;
  readonly channel: Channel;
  readonly reason: string;
  readonly surveyId?: string | undefined;
  readonly outcome?: string | undefined;
  readonly pid?: string | undefined;
  readonly token?: string | undefined;
  readonly sourceIp?: string | undefined;
}

export interface LedgerStore {
  /** Records one verified hit and returns the attempt as it stands afterwards. One write, no read. */
  recordHit(hit: Hit, at: Date): Promise<{ attempt: Attempt; effect: HitEffect }>;
  /** Keeps a refused hit apart from the attempts; it is never an outcome. */
  recordRejectedHit(rejected: RejectedHit): Promise<void>;
  /** The attempts of one respondent in one survey (one, unless the respondent entered more than once). */
  attemptsOf(surveyId: string, pid: string): Promise<Attempt[]>;
  /** Attempts of a survey first seen in [from, to), oldest first, through the day index (no scan). */
  attemptsOfSurvey(surveyId: string, from: Date, to: Date): Promise<Attempt[]>;
  /** Refused hits of one UTC day, oldest first. */
  rejectedHits(utcDay: string): Promise<RejectedHit[]>;
}

/** The store could not be reached or is refusing work (throttling, 5xx, timeouts): retry later. */
export class StoreUnavailable extends Error {
  override readonly name = 'StoreUnavailable';
}

export interface DocumentClientOptions {
  readonly region?: string | undefined;
  /** A local engine's URL; unset in AWS. */
  readonly endpoint?: string | undefined;
  /** Per-request socket timeout; the SDK retries within `maxAttempts`. */
  readonly requestTimeoutMs?: number;
  readonly maxAttempts?: number;
}

/** A document client configured for the ledger. Create once per process. */
export function createDocumentClient(options: DocumentClientOptions = {}): DynamoDBDocumentClient {
  const client = new DynamoDBClient({
    ...(options.region ? { region: options.region } : {}),
    ...(options.endpoint
      ? { endpoint: options.endpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
      : {}),
    maxAttempts: options.maxAttempts ?? 3,
    // Without throwOnRequestTimeout the handler only logs a warning and the request waits on for ever.
    requestHandler: {
      requestTimeout: options.requestTimeoutMs ?? 2000,
      connectionTimeout: 1000,
      throwOnRequestTimeout: true,
    },
  });
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

type Item = Record<string, unknown>;

const sightingAt = (channel: Channel, outcome: Outcome) => `${channel}_${outcome}_at`;
const sightingHits = (channel: Channel, outcome: Outcome) => `${channel}_${outcome}_hits`;
const standingOutcome = (channel: Channel) => `${channel}Outcome`;

export function createLedgerStore(client: DynamoDBDocumentClient, tableName: string): LedgerStore {
  return {
    async recordHit(hit, at) {
      const now = at.toISOString();
      const set = [
        'kind = :kind',
        'surveyId = :surveyId',
        'pid = :pid',
        '#token = :token',
        'firstSeenAt = if_not_exists(firstSeenAt, :now)',
        'lastSeenAt = :now',
        'gsi1pk = if_not_exists(gsi1pk, :gsi1pk)',
        'gsi1sk = if_not_exists(gsi1sk, :gsi1sk)',
        '#standing = if_not_exists(#standing, :outcome)',
        '#sightingAt = if_not_exists(#sightingAt, :now)',
      ];
      if (hit.channel === 'postback') set.push('postbackSource = if_not_exists(postbackSource, :source)');
      const day = attemptDayKey(hit.surveyId, now);
      const { Attributes } = await send(() =>
        client.send(
          new UpdateCommand({
            TableName: tableName,
            Key: attemptKey(hit.surveyId, hit.pid, hit.token),
            UpdateExpression: `SET ${set.join(', ')} ADD #sightingHits :one`,
            ExpressionAttributeNames: {
              '#token': 'token',
              '#standing': standingOutcome(hit.channel),
              '#sightingAt': sightingAt(hit.channel, hit.outcome),
              '#sightingHits': sightingHits(hit.channel, hit.outcome),
            },
            ExpressionAttributeValues: {
              ':kind': 'attempt',
              ':surveyId': hit.surveyId,
              ':pid': hit.pid,
              ':token': hit.token,
              ':now': now,
              ':gsi1pk': day.gsi1pk,
              ':gsi1sk': day.gsi1sk,
              ':outcome': hit.outcome,
              ':one': 1,
              ...(hit.channel === 'postback' ? { ':source': hit.source } : {}),
            },
            ReturnValues: 'ALL_NEW',
          }),
        ),
      );
      const attempt = attemptFromItem(Attributes ?? {});
      return { attempt, effect: hitEffect(attempt, hit.channel, hit.outcome) };
    },

    async recordRejectedHit(rejected) {
      const expiresAt = Math.floor(Date.parse(rejected.at) / 1000) + REJECTED_RETENTION_DAYS * 86_400;
      await send(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              ...rejectedKey(rejected.at, rejected.requestId),
              kind: 'rejected',
              at: rejected.at,
              requestId: rejected.requestId,
              channel: rejected.channel,
              reason: rejected.reason,
              surveyId: clip(rejected.surveyId),
              outcome: clip(rejected.outcome),
              pid: clip(rejected.pid),
              token: clip(rejected.token),
              sourceIp: clip(rejected.sourceIp),
              expiresAt,
            },
          }),
        ),
      );
    },

    async attemptsOf(surveyId, pid) {
      const items = await queryAll(client, {
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': attemptPartition(surveyId, pid) },
      });
      return items.map(attemptFromItem);
    },

    async attemptsOfSurvey(surveyId, from, to) {
      const keys: Item[] = [];
      const { index } = LEDGER;
      for (const day of utcDaysBetween(from, to)) {
        keys.push(
          ...(await queryAll(client, {
            TableName: tableName,
            IndexName: index.name,
            KeyConditionExpression: '#pk = :pk AND #sk BETWEEN :from AND :to',
            ExpressionAttributeNames: { '#pk': index.partitionKey, '#sk': index.sortKey },
            ExpressionAttributeValues: {
              ':pk': attemptDayKey(surveyId, `${day}T00:00:00.000Z`).gsi1pk,
              ':from': `${surveyId}#${from.toISOString()}`,
              // ISO instants sort as text; the end is exclusive, so stop just before it.
              ':to': `${surveyId}#${new Date(to.getTime() - 1).toISOString()}`,
            },
          })),
        );
      }
      const items = await batchGet(
        client,
        tableName,
        keys.map((key) => ({ pk: key.pk, sk: key.sk })),
      );
      return items.map(attemptFromItem).sort((a, b) => a.firstSeenAt.localeCompare(b.firstSeenAt));
    },

    async rejectedHits(day) {
      const items = await queryAll(client, {
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': `REJECTED#${day}` },
      });
      return items.map((item) => ({
        at: String(item.at),
        requestId: String(item.requestId),
        channel: item.channel as Channel,
        reason: String(item.reason),
        surveyId: optionalString(item.surveyId),
        outcome: optionalString(item.outcome),
        pid: optionalString(item.pid),
        token: optionalString(item.token),
        sourceIp: optionalString(item.sourceIp),
      }));
    },
  };
}

/** Reads an attempt item back into the domain's shape. */
export function attemptFromItem(item: Item): Attempt {
  const record = (channel: Channel) => {
    const sightings: Sighting[] = [];
    for (const outcome of outcomesOf(channel)) {
      const firstAt = item[sightingAt(channel, outcome)];
      if (typeof firstAt === 'string') {
        sightings.push({ outcome, firstAt, hits: Number(item[sightingHits(channel, outcome)] ?? 0) });
      }
    }
    return channelRecord(item[standingOutcome(channel)] as Outcome | undefined, sightings);
  };
  const redirect = record('redirect');
  const postbackRecord = record('postback');
  const postback = postbackRecord && {
    ...postbackRecord,
    ...(item.postbackSource ? { source: item.postbackSource as HitSource } : {}),
  };
  return {
    surveyId: String(item.surveyId),
    pid: String(item.pid),
    token: String(item.token),
    firstSeenAt: String(item.firstSeenAt),
    lastSeenAt: String(item.lastSeenAt),
    ...(redirect ? { redirect } : {}),
    ...(postback ? { postback } : {}),
    complete: completeEvidence(redirect, postback),
    conflict: hasConflict(redirect, postback),
  };
}

async function queryAll(client: DynamoDBDocumentClient, input: QueryCommand['input']): Promise<Item[]> {
  const items: Item[] = [];
  let ExclusiveStartKey: Record<string, unknown> | undefined;
  do {
    const page = await send(() => client.send(new QueryCommand({ ...input, ExclusiveStartKey })));
    items.push(...((page.Items ?? []) as Item[]));
    ExclusiveStartKey = page.LastEvaluatedKey;
  } while (ExclusiveStartKey);
  return items;
}

/** What this product has configured at the marketplace for one survey. */
export interface SurveyRegistration {
  readonly surveyId: string;
  /** `active`: our redirects should be in place; `removed`: the survey-level redirects were deleted. */
  readonly state: 'active' | 'removed';
  /** Fingerprint of the settings last sent, and the key id that signed them. */
  readonly fingerprint?: string | undefined;
  readonly kid?: string | undefined;
  readonly appliedAt?: string | undefined;
  /** The marketplace read back exactly what was sent. */
  readonly verified: boolean;
  readonly verifiedAt?: string | undefined;
  /** Why the last apply, verify or remove failed; cleared by the next success. */
  readonly lastError?: string | undefined;
  readonly lastErrorAt?: string | undefined;
  /** Failures in a row. */
  readonly failures: number;
  readonly removedAt?: string | undefined;
  readonly updatedAt: string;
}

export interface SurveyRegistry {
  get(surveyId: string): Promise<SurveyRegistration | undefined>;
  put(registration: SurveyRegistration): Promise<void>;
  /** Every registered survey, by id, through the index. */
  list(): Promise<SurveyRegistration[]>;
  /** A named checkpoint (ISO-8601 UTC), or undefined before the first. */
  checkpoint(name: string): Promise<string | undefined>;
  /** Moves a checkpoint forward; never backwards, even when two runs race. Returns false if it did not move. */
  advanceCheckpoint(name: string, to: string): Promise<boolean>;
}

const REGISTRATION_FIELDS = [
  'surveyId',
  'state',
  'fingerprint',
  'kid',
  'appliedAt',
  'verified',
  'verifiedAt',
  'lastError',
  'lastErrorAt',
  'failures',
  'removedAt',
  'updatedAt',
] as const;

export function createSurveyRegistry(client: DynamoDBDocumentClient, tableName: string): SurveyRegistry {
  const fromItem = (item: Item): SurveyRegistration =>
    Object.fromEntries(
      REGISTRATION_FIELDS.filter((f) => item[f] !== undefined).map((f) => [f, item[f]]),
    ) as unknown as SurveyRegistration;
  return {
    async get(surveyId) {
      const { Item } = await send(() =>
        client.send(
          new GetCommand({ TableName: tableName, Key: registrationKey(surveyId), ConsistentRead: true }),
        ),
      );
      return Item ? fromItem(Item) : undefined;
    },
    async put(registration) {
      await send(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              ...registrationKey(registration.surveyId),
              ...registrationIndexKey(registration.surveyId),
              kind: 'survey',
              ...registration,
            },
          }),
        ),
      );
    },
    async list() {
      const keys = await queryAll(client, {
        TableName: tableName,
        IndexName: LEDGER.index.name,
        KeyConditionExpression: '#pk = :pk',
        ExpressionAttributeNames: { '#pk': LEDGER.index.partitionKey },
        ExpressionAttributeValues: { ':pk': registrationIndexKey('').gsi1pk },
      });
      const items = await batchGet(
        client,
        tableName,
        keys.map((key) => ({ pk: key.pk, sk: key.sk })),
      );
      return items.map(fromItem).sort((a, b) => Number(a.surveyId) - Number(b.surveyId));
    },
    async checkpoint(name) {
      const { Item } = await send(() =>
        client.send(new GetCommand({ TableName: tableName, Key: checkpointKey(name), ConsistentRead: true })),
      );
      return typeof Item?.at === 'string' ? Item.at : undefined;
    },
    async advanceCheckpoint(name, to) {
      try {
        await send(() =>
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
        return true;
      } catch (error) {
        if (error instanceof ConditionalCheckFailedException) return false;
        throw error;
      }
    },
  };
}

/** Reads items by key, 100 per request, retrying what the table leaves unprocessed. */
async function batchGet(client: DynamoDBDocumentClient, tableName: string, keys: Item[]): Promise<Item[]> {
  const items: Item[] = [];
  for (let start = 0; start < keys.length; start += 100) {
    let pending: Item[] = keys.slice(start, start + 100);
    for (let round = 0; pending.length > 0; round++) {
      if (round > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 50 * 2 ** round)));
      if (round > 8) throw new StoreUnavailable('the ledger store left keys unprocessed');
      const page = await send(() =>
        client.send(new BatchGetCommand({ RequestItems: { [tableName]: { Keys: pending } } })),
      );
      items.push(...((page.Responses?.[tableName] ?? []) as Item[]));
      pending = (page.UnprocessedKeys?.[tableName]?.Keys ?? []) as Item[];
    }
  }
  return items;
}

/** The UTC days an interval [from, to) touches. */
function utcDaysBetween(from: Date, to: Date): string[] {
  const days: string[] = [];
  for (let day = utcDay(from.toISOString()); day < to.toISOString(); ) {
    days.push(day);
    const next = new Date(`${day}T00:00:00.000Z`);
    next.setUTCDate(next.getUTCDate() + 1);
    day = utcDay(next.toISOString());
  }
  return days;
}

const TRANSIENT = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
  'InternalServerError',
  'ServiceUnavailable',
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
]);

/** Turns "the store is down or throttling" into StoreUnavailable; anything else is a bug and propagates. */
async function send<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (isTransient(error)) throw new StoreUnavailable('the ledger store is unavailable', { cause: error });
    throw error;
  }
}

function isTransient(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const code = (error as { code?: string }).code;
  return (
    TRANSIENT.has(error.name) ||
    (status !== undefined && status >= 500) ||
    (code !== undefined && /^(ECONN|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)/.test(code))
  );
}

/** Raw values from refused hits are attacker-controlled: keep them short and printable. */
function clip(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping control characters is the point
  return value.replace(/[\u0000-\u001f\u007f]/g, '?').slice(0, 100);
}

const optionalString = (value: unknown): string | undefined =>
  typeof value === 'string' ? value : undefined;
