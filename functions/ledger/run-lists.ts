/**
 * A reconciliation run's survey lists, as its state and finished-run items keep them. A run of a few hundred surveys
 * keeps its lists in the item; past RUN_SURVEYS_INLINE the survey list goes to items of its own, written once per
 * run (`SURVEYS#<runId>#<n>`, RUN_SURVEYS_PER_CHUNK ids each, expiring after RUN_SURVEYS_RETENTION_DAYS), and the
 * failed surveys to a bitmap over it. Kept whole in the state item, the list of a supplier with tens of thousands of
 * surveys in its review horizon outgrew DynamoDB's 400 KB item (every run then failed at its start), and 10,000
 * surveys cost 110 write units at every saved cursor, every ten seconds of the run.
 */
import { type DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { batchGet, type Item, send } from './document-client';
import { runSurveysKey } from './ledger-schema';

/** The longest survey list kept in the run's own item. */
export const RUN_SURVEYS_INLINE = 1_000;
/** Survey ids per item of a longer list: 5,000 ids of 12 digits are about 70 KB. */
export const RUN_SURVEYS_PER_CHUNK = 5_000;
/** A list's items outlive any run (and its finished record) still read: past the 60-day review horizon. */
const RUN_SURVEYS_RETENTION_DAYS = 70;

export interface RunLists {
  readonly surveys: readonly string[];
  readonly failedSurveys: readonly string[];
}

/**
 * Writes and reads a run's lists. `written` remembers the runs whose list items this process wrote or read, so a
 * run's list is written once however often its cursor is saved.
 */
export function runListStore(client: DynamoDBDocumentClient, tableName: string) {
  const written = new Set<string>();
  return {
    /** The attributes that stand for the lists in the run's item, the list's own items written first if needed. */
    async attributes(name: string, runId: string, lists: RunLists, now: Date): Promise<Item> {
      if (lists.surveys.length <= RUN_SURVEYS_INLINE)
        return { surveys: [...lists.surveys], failedSurveys: [...lists.failedSurveys] };
      const chunks = Math.ceil(lists.surveys.length / RUN_SURVEYS_PER_CHUNK);
      const key = `${name}#${runId}`;
      if (!written.has(key)) {
        const expiresAt = Math.floor(now.getTime() / 1000) + RUN_SURVEYS_RETENTION_DAYS * 86_400;
        for (let index = 0; index < chunks; index++) {
          const surveys = lists.surveys.slice(
            index * RUN_SURVEYS_PER_CHUNK,
            (index + 1) * RUN_SURVEYS_PER_CHUNK,
          );
          await send(() =>
            client.send(
              new PutCommand({
                TableName: tableName,
                Item: { ...runSurveysKey(name, runId, index), kind: 'run-surveys', surveys, expiresAt },
              }),
            ),
          );
        }
        written.add(key);
      }
      const position = new Map(lists.surveys.map((surveyId, index) => [surveyId, index]));
      const others = lists.failedSurveys.filter((surveyId) => !position.has(surveyId));
      return {
        surveyChunks: chunks,
        surveyCount: lists.surveys.length,
        failedMarks: marks(
          lists.surveys.length,
          lists.failedSurveys.map((s) => position.get(s) ?? -1),
        ),
        ...(others.length > 0 ? { failedOthers: others } : {}),
      };
    },

    /** The lists a run's item stands for; undefined when its list items are gone (expired). */
    async lists(name: string, item: Item): Promise<RunLists | undefined> {
      const strings = (value: unknown) => (Array.isArray(value) ? value.map(String) : []);
      if (item.surveyChunks === undefined)
        return { surveys: strings(item.surveys), failedSurveys: strings(item.failedSurveys) };
      const runId = String(item.runId);
      const chunks = Number(item.surveyChunks);
      const found = await batchGet(
        client,
        tableName,
        Array.from({ length: chunks }, (_, index) => runSurveysKey(name, runId, index)),
        { consistent: true },
      );
      const bySk = new Map(found.map((chunk) => [String(chunk.sk), strings(chunk.surveys)]));
      const parts = Array.from({ length: chunks }, (_, index) =>
        bySk.get(runSurveysKey(name, runId, index).sk),
      );
      if (parts.some((part) => part === undefined)) return undefined;
      const surveys = parts.flatMap((part) => part ?? []);
      if (surveys.length !== Number(item.surveyCount)) return undefined;
      written.add(`${name}#${runId}`);
      const failed = markedIndexes(String(item.failedMarks ?? ''), surveys.length).map(
        (i) => surveys[i] as string,
      );
      return { surveys, failedSurveys: [...failed, ...strings(item.failedOthers)] };
    },
  };
}

/** A bitmap of `size` bits, base64, with the given positions set. */
function marks(size: number, positions: readonly number[]): string {
  const bytes = Buffer.alloc(Math.ceil(size / 8));
  for (const position of positions)
    if (position >= 0 && position < size)
      bytes[position >> 3] = (bytes[position >> 3] as number) | (1 << (position & 7));
  return bytes.toString('base64');
}

function markedIndexes(bitmap: string, size: number): number[] {
  const bytes = Buffer.from(bitmap, 'base64');
  const set: number[] = [];
  for (let position = 0; position < size; position++)
    if (((bytes[position >> 3] ?? 0) >> (position & 7)) & 1) set.push(position);
  return set;
}
