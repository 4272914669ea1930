/**
 * What keeping the attempt feed costs (the `attemptFeed` setting): an hour of the cost model's traffic shape sent
 * through the real consumer (`createStreamConsumer`) and the real feed store, whose writes are caught instead of
 * sent, each priced by DynamoDB's item size rules. Stream batches are cut as Lambda cuts them: per shard (one per
 * table partition: an assumption, `shards`), every `windowSeconds` (the event source mapping's batching window) or
 * at 1,000 changes. Each attempt is also judged by reconciliation (`verdictWrites` times: its first verdict at the run
 * after it, and a later write when its verdict or the facts it keeps change), each a change of its item the feed
 * records: those come in bursts, all the attempts a run judges within its minute.
 */
import { randomUUID } from 'node:crypto';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue, DynamoDBRecord } from 'aws-lambda';
import { createStreamConsumer } from '../../functions/feed/stream-consumer';
import { createAttemptFeed } from '../../functions/ledger/attempt-feed';
import { firstHitItem } from '../../functions/ledger/attempt-store';
import type { Item } from '../../functions/ledger/document-client';
import { itemSize } from '../support/item-size';

export interface FeedCostInputs {
  readonly hitsPerMonth: number;
  readonly activeSurveys: number;
  readonly hitsPerAttempt: number;
  readonly windowSeconds: number;
  readonly shards: number;
  /** How long after an attempt's first hit its second arrives, at most (uniformly): both come at the survey's end. */
  readonly secondHitWithinSeconds?: number;
  /**
   * Verdict writes per attempt over its life, a fraction for a share of them (default 2: judged, then written again;
   * run.ts passes the write units an attempt the simulated week's verdicts took, one a write at these sizes).
   */
  readonly verdictWrites?: number;
}

export interface FeedCost {
  readonly attempts: number;
  readonly changes: number;
  readonly records: number;
  /** Records written, after each batch kept one an attempt. */
  readonly kept: number;
  readonly items: number;
  readonly writeUnitsPerAttempt: number;
  readonly bytesPerRecord: number;
  readonly invocationsPerMonth: number;
  /** CPU of the consumer per invocation on this machine (grouping, compressing), ms. */
  readonly cpuMsPerInvocation: number;
  readonly itemsPerInvocation: number;
}

const image = (item: Item) =>
  marshall(item, { removeUndefinedValues: true }) as Record<string, AttributeValue>;

export async function feedWriteCost(inputs: FeedCostInputs): Promise<FeedCost> {
  const hour = 3_600;
  const attemptsPerSecond = inputs.hitsPerMonth / inputs.hitsPerAttempt / (30 * 86_400);
  const attempts = Math.round(attemptsPerSecond * hour);
  const surveys = Array.from({ length: inputs.activeSurveys }, (_, n) => String(30_000 + n * 13));
  const start = Date.parse('2026-11-24T10:00:00.000Z');
  /** Every change of the hour: when, which shard, its stream record. */
  const changes: { at: number; shard: number; record: DynamoDBRecord }[] = [];
  let sequence = 10n ** 20n;
  for (let n = 0; n < attempts; n++) {
    const at = start + Math.random() * hour * 1000;
    const surveyId = surveys[Math.floor(Math.random() * surveys.length)] as string;
    const ids = { surveyId, pid: `p${Math.floor(Math.random() * 1e9)}`, token: randomUUID() };
    const first = firstHitItem(
      { ...ids, channel: 'redirect', outcome: 'success', source: 'query', from: 'q7Rk2mXa9ZcB' },
      new Date(at),
    );
    const secondAt = at + Math.random() * (inputs.secondHitWithinSeconds ?? 30) * 1000;
    const second: Item = {
      ...first,
      lastSeenAt: new Date(secondAt).toISOString(),
      postbackOutcome: 'success',
      postback_success_at: new Date(secondAt).toISOString(),
      postback_success_hits: 1,
      postbackSource: 'query',
    };
    const shard = n % inputs.shards;
    const record = (after: Item, before: Item | undefined, when: number): DynamoDBRecord => {
      sequence += 1n;
      return {
        eventName: before ? 'MODIFY' : 'INSERT',
        dynamodb: {
          ApproximateCreationDateTime: Math.floor(when / 1000),
          Keys: image({ pk: first.pk, sk: first.sk }),
          NewImage: image(after),
          ...(before ? { OldImage: image(before) } : {}),
          SequenceNumber: String(sequence),
        },
      };
    };
    changes.push({ at, shard, record: record(first, undefined, at) });
    if (inputs.hitsPerAttempt >= 2)
      changes.push({ at: secondAt, shard, record: record(second, first, secondAt) });
    // Judged by the hourly run after it (five minutes past the hour, within the run's minute), and written again by
    // the run after the buyer's review two days later (a reversal, a discrepancy's review: its facts change).
    let judged = inputs.hitsPerAttempt >= 2 ? second : first;
    // A fraction of a write an attempt is that share of the attempts written once more.
    const verdictWrites = inputs.verdictWrites ?? 2;
    const writes = Math.floor(verdictWrites) + (Math.random() < verdictWrites % 1 ? 1 : 0);
    for (let v = 0; v < writes; v++) {
      const runAt = start + hour * 1000 + v * 2 * 86_400_000 + 300_000 + Math.random() * 60_000;
      const verdictAt = new Date(runAt).toISOString();
      const verifyToken = v === 0 ? 'Pending' : 'Valid';
      const after: Item = {
        ...judged,
        verdict: 'matched',
        verdictDay: verdictAt.slice(0, 10),
        verdictAt,
        verdictDetail: {
          postback: 'success',
          redirect: 'success',
          marketplaceStatus: 'Completed',
          verifyToken,
        },
        marketplace: {
          status: 'Completed',
          verifyToken,
          cpi: '1.75',
          clickedAt: new Date(at - 600_000).toISOString(),
          completedAt: new Date(at).toISOString(),
        },
        verdictHistory: [
          ...((judged.verdictHistory as unknown[] | undefined) ?? []),
          ...(v === 0 ? [{ verdict: 'matched', day: verdictAt.slice(0, 10), at: verdictAt }] : []),
        ],
      };
      changes.push({ at: runAt, shard, record: record(after, judged, runAt) });
      judged = after;
    }
  }
  changes.sort((a, b) => a.at - b.at);
  // The feed store as deployed, its writes caught and priced instead of sent.
  let writeUnits = 0;
  let items = 0;
  let kept = 0;
  let recordBytes = 0;
  const client = {
    send: async (command: { input: { Item: Item } }) => {
      // The feed's start, marked once a container: not a batch's cost.
      if (command.input.Item.kind !== 'attempt-feed') return {};
      const size = itemSize(command.input.Item);
      writeUnits += Math.ceil(size / 1024);
      items += 1;
      kept += Number(command.input.Item.count);
      recordBytes += (command.input.Item.records as Uint8Array).byteLength;
      return {};
    },
  };
  const consume = createStreamConsumer({
    feed: createAttemptFeed(client as unknown as Parameters<typeof createAttemptFeed>[0], 'ledger'),
  });
  let records = 0;
  let invocations = 0;
  let cpuMicros = 0;
  for (let shard = 0; shard < inputs.shards; shard++) {
    const ofShard = changes.filter((c) => c.shard === shard);
    for (let from = 0; from < ofShard.length; ) {
      const windowEnd = (ofShard[from] as { at: number }).at + inputs.windowSeconds * 1000;
      let to = from + 1;
      while (to < ofShard.length && to - from < 1_000 && (ofShard[to] as { at: number }).at < windowEnd) to++;
      const cpu = process.cpuUsage();
      const result = await consume({ Records: ofShard.slice(from, to).map((c) => c.record) });
      const used = process.cpuUsage(cpu);
      cpuMicros += used.user + used.system;
      records += result.consumed.recorded;
      invocations += 1;
      from = to;
    }
  }
  return {
    attempts,
    changes: changes.length,
    records,
    kept,
    items,
    writeUnitsPerAttempt: writeUnits / attempts,
    bytesPerRecord: recordBytes / records,
    invocationsPerMonth: invocations * 24 * 30,
    cpuMsPerInvocation: cpuMicros / 1000 / invocations,
    itemsPerInvocation: items / invocations,
  };
}
