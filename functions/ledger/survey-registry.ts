/**
 * The survey registry and checkpoints in the ledger table: what this product configured at the marketplace for
 * each survey, and how far the scheduled jobs have got.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { batchGet, type Item, queryAll, send } from './document-client';
import { checkpointKey, LEDGER, registrationIndexKey, registrationKey } from './ledger-schema';

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
  /** The survey's CPI as the marketplace last listed it: what reconciliation checks amounts against. */
  readonly expectedCpi?: string | undefined;
  /**
   * The survey's prices as this product saw them change, oldest first (at most `CPI_HISTORY_LIMIT`): a
   * transaction is checked against the price in force when its respondent clicked in, not today's. `since` is
   * when a price was first seen ('' for one seen before the history was kept).
   */
  readonly cpiHistory?: readonly { readonly cpi: string; readonly since: string }[] | undefined;
  readonly updatedAt: string;
}

export interface SurveyRegistry {
  get(surveyId: string): Promise<SurveyRegistration | undefined>;
  put(registration: SurveyRegistration): Promise<void>;
  /** Every registered survey, by id, through the index. */
  list(): Promise<SurveyRegistration[]>;
  /** The ids of every registered survey, from the keys-only index alone (no item read). */
  surveyIds(): Promise<string[]>;
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
  'closedAt',
  'liveCheckedAt',
  'readBackAt',
  'expectedCpi',
  'cpiHistory',
  'updatedAt',
] as const;

export const CPI_HISTORY_LIMIT = 20;

/** A registration's price fields once `cpi` is listed at `at`: the history grows only when the price changes. */
export function pricedAt(
  registration: Pick<SurveyRegistration, 'expectedCpi' | 'cpiHistory'> | undefined,
  cpi: string | undefined,
  at: string,
): Pick<SurveyRegistration, 'expectedCpi' | 'cpiHistory'> {
  const previous = registration?.expectedCpi;
  const history = registration?.cpiHistory ?? (previous !== undefined ? [{ cpi: previous, since: '' }] : []);
  if (cpi === undefined || cpi === previous)
    return previous === undefined ? {} : { expectedCpi: previous, cpiHistory: history };
  return { expectedCpi: cpi, cpiHistory: [...history, { cpi, since: at }].slice(-CPI_HISTORY_LIMIT) };
}

export function createSurveyRegistry(client: DynamoDBDocumentClient, tableName: string): SurveyRegistry {
  const fromItem = (item: Item): SurveyRegistration =>
    Object.fromEntries(
      REGISTRATION_FIELDS.filter((f) => item[f] !== undefined).map((f) => [f, item[f]]),
    ) as unknown as SurveyRegistration;
  const registrationKeys = () =>
    queryAll(client, {
      TableName: tableName,
      IndexName: LEDGER.index.name,
      KeyConditionExpression: '#pk = :pk',
      ExpressionAttributeNames: { '#pk': LEDGER.index.partitionKey },
      ExpressionAttributeValues: { ':pk': registrationIndexKey('').gsi1pk },
    });
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
      const keys = await registrationKeys();
      const items = await batchGet(
        client,
        tableName,
        keys.map((key) => ({ pk: key.pk, sk: key.sk })),
      );
      return items.map(fromItem).sort((a, b) => Number(a.surveyId) - Number(b.surveyId));
    },
    async surveyIds() {
      return (await registrationKeys())
        .map((key) => String(key[LEDGER.index.sortKey]))
        .sort((a, b) => Number(a) - Number(b));
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
