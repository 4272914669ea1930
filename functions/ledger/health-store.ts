/**
 * Each survey's health in the ledger table: one item per survey (`HEALTH#<surveyId>` / `STATE`) with its current
 * state, since when, the reasons, and its last transitions. The health check writes it only when the state or
 * its reason codes change, never on a run that finds nothing new, so a quiet deployment costs reads only.
 */
import { type DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { HealthReason, HealthState } from '../health/health-rules';
import { batchGet, conditionally, type Item, send } from './document-client';
import { healthKey } from './ledger-schema';

/** Transitions kept per survey: enough for a month of a flapping survey's story, small enough for one item. */
export const HEALTH_HISTORY_LIMIT = 20;

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
  /** Oldest first, at most HEALTH_HISTORY_LIMIT. */
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
  /** Where the next scheduled check starts: the first survey the last one had no time for (none: the first). */
  resumePoint(): Promise<string | undefined>;
  putResumePoint(surveyId: string | undefined): Promise<void>;
}

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
