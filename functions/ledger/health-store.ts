/**
 * Each survey's health in the ledger table: one item per survey (`HEALTH#<surveyId>` / `STATE`) with its current
 * state, since when, the reasons, and its last transitions. The health check writes it only when the state or
 * its reason codes change, never on a run that finds nothing new, so a quiet deployment costs reads only.
 */
import { type DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { HealthReason, HealthState } from '../health/health-rules';
import { batchGet, conditionally, type Item, send } from './document-client';
import { healthKey, LEDGER } from './ledger-schema';

/** Transitions kept per survey: enough for a month of a flapping survey's story, small enough for one item. */
export const HEALTH_HISTORY_LIMIT = 20;
/**
 * Transitions into, within or out of `failing` kept besides, older than the last `HEALTH_HISTORY_LIMIT`: finance
 * lists each spell a survey was failing in a month, which a survey flapping between ok and warning (a refused
 * postback anyone can send) would otherwise push out of the history within days. About 5 KB at most.
 */
export const FAILING_HISTORY_LIMIT = 50;

export interface HealthTransition {
  readonly at: string;
  readonly from: HealthState;
  readonly to: HealthState;
  /** The reason codes the survey had after the transition. */
  readonly reasons: readonly string[];
  /** Of them, those of failing severity (absent on transitions stored before it was kept). */
  readonly failing?: readonly string[] | undefined;
}

export interface SurveyHealthRecord {
  readonly surveyId: string;
  readonly state: HealthState;
  /** When the survey entered its current state. */
  readonly since: string;
  readonly reasons: readonly HealthReason[];
  /** The latest postback the check had seen when it wrote this, as evidence for a later `postbacks_stopped`. */
  readonly lastPostbackAt?: string | undefined;
  /** Oldest first: the last HEALTH_HISTORY_LIMIT, and before them up to FAILING_HISTORY_LIMIT touching failing. */
  readonly history: readonly HealthTransition[];
  readonly updatedAt: string;
  /** Counts the writes, so two overlapping runs cannot overwrite each other's transition. */
  readonly revision: number;
}

export interface HealthStore {
  /** The stored health of each survey that has any, by survey id: one BatchGet per 100 surveys. */
  getMany(surveyIds: readonly string[]): Promise<Map<string, SurveyHealthRecord>>;
  /**
   * Writes a survey's health if the stored item is still at `record.revision - 1` (none for revision 1).
   * Returns false when another run wrote first.
   */
  put(record: SurveyHealthRecord): Promise<boolean>;
  /**
   * Takes the sending of the notice of a survey's change to `revision`: false when another run (a schedule's tick
   * delivered twice) has it. A claim given back (`releaseNotice`, the notice not sent) can be taken again.
   */
  claimNotice?(surveyId: string, revision: number, at: Date): Promise<boolean>;
  releaseNotice?(surveyId: string, revision: number): Promise<void>;
  /** Where the next scheduled check starts: the first survey the last one had no time for (none: the first). */
  resumePoint(): Promise<string | undefined>;
  putResumePoint(surveyId: string | undefined): Promise<void>;
}

/** How long a notice's claim is kept. */
const NOTICE_CLAIM_DAYS = 7;
/** The claim on sending the notice of a survey's health change to a revision (beside its health item). */
const noticeKey = (surveyId: string, revision: number) => ({
  pk: healthKey(surveyId).pk,
  sk: `NOTICE#${revision}`,
});

/** The health item that holds the check's resume point (survey ids are numeric, so it is no survey's). */
const RESUME_POINT = healthKey('resume-point');

const FIELDS = [
  'surveyId',
  'state',
  'since',
  'reasons',
  'lastPostbackAt',
  'history',
  'updatedAt',
  'revision',
] as const;

export function createHealthStore(client: DynamoDBDocumentClient, tableName: string): HealthStore {
  return {
    async getMany(surveyIds) {
      const items = await batchGet(
        client,
        tableName,
        [...new Set(surveyIds)].map((id) => healthKey(id)),
      );
      return new Map(items.map((item) => [String(item.surveyId), healthFromItem(item)]));
    },
    async resumePoint() {
      const [item] = await batchGet(client, tableName, [RESUME_POINT]);
      return typeof item?.surveyId === 'string' ? item.surveyId : undefined;
    },
    async putResumePoint(surveyId) {
      await send(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: { ...RESUME_POINT, kind: 'health-resume-point', ...(surveyId ? { surveyId } : {}) },
          }),
        ),
      );
    },
    claimNotice(surveyId, revision, at) {
      return conditionally(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              ...noticeKey(surveyId, revision),
              kind: 'health-notice',
              claimedAt: at.toISOString(),
              // Gone with the table's TTL: a claim matters only while two deliveries of one tick may overlap.
              [LEDGER.timeToLive]: Math.floor(at.getTime() / 1000) + NOTICE_CLAIM_DAYS * 86_400,
            },
            ConditionExpression: 'attribute_not_exists(pk) OR released = :yes',
            ExpressionAttributeValues: { ':yes': true },
          }),
        ),
      );
    },
    async releaseNotice(surveyId, revision) {
      await send(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: { ...noticeKey(surveyId, revision), kind: 'health-notice', released: true },
          }),
        ),
      );
    },
    async put(record) {
      return conditionally(() =>
        client.send(
          new PutCommand({
            TableName: tableName,
            Item: { ...healthKey(record.surveyId), kind: 'health', ...record },
            ConditionExpression: record.revision <= 1 ? 'attribute_not_exists(pk)' : '#revision = :previous',
            ...(record.revision <= 1
              ? {}
              : {
                  ExpressionAttributeNames: { '#revision': 'revision' },
                  ExpressionAttributeValues: { ':previous': record.revision - 1 },
                }),
          }),
        ),
      );
    },
  };
}

function healthFromItem(item: Item): SurveyHealthRecord {
  const record = Object.fromEntries(
    FIELDS.filter((f) => item[f] !== undefined).map((f) => [f, item[f]]),
  ) as unknown as SurveyHealthRecord;
  return { ...record, reasons: record.reasons ?? [], history: record.history ?? [] };
}
