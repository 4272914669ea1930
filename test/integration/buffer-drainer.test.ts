/**
 * The drainer against the real store: several buffered hits of one attempt delivered in one batch (a respondent's
 * end page refreshed during an outage, the marketplace's fail postback and a later success) end as the ledger would
 * have taken them live, whatever order SQS put them in.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import type { SQSEvent } from 'aws-lambda';
import { beforeAll, expect, it } from 'vitest';
import {
  createDocumentClient,
  createLedgerStore,
  type LedgerStore,
} from '../../functions/ledger/ledger-store';
import { createDrainHandler } from '../../functions/receiving/buffer-drainer';
import type { Hit } from '../../functions/receiving/hit-request';
import { freshTable } from '../support/ledger';

let store: LedgerStore;
beforeAll(async () => {
  const { endpoint, tableName } = await freshTable();
  store = createLedgerStore(createDocumentClient({ endpoint }), tableName);
});

const made = (minute: number) => new Date(Date.parse('2026-11-27T08:00:00.000Z') + minute * 60_000);
/** One respondent's hits in the order they were made: the marketplace's first postback is the fail. */
const HITS: readonly [Hit['channel'], string, number][] = [
  ['redirect', 'fail', 4],
  ['postback', 'fail', 15],
  ['redirect', 'success', 26],
  ['postback', 'success', 32],
  ['redirect', 'quality', 43],
  ['redirect', 'overquota', 49],
];

const hitOf = (pid: string, [channel, outcome]: (typeof HITS)[number]): Hit =>
  ({ channel, surveyId: '8801', outcome, pid, token: `${pid}-token`, source: 'query' }) as Hit;

/** A fixed shuffle of the hits per run (SQS keeps no order). */
const shuffled = <T>(items: readonly T[], seed: number): T[] => {
  const out = [...items];
  let state = seed * 7919 + 1;
  for (let i = out.length - 1; i > 0; i--) {
    state = (state * 48271) % 2_147_483_647;
    const j = state % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
};

it("one batch of an attempt's buffered hits stands as the ledger would have taken them live, in any order", async () => {
  const drain = createDrainHandler({
    store,
    redelivery: undefined,
    backoff: { baseSeconds: 1, maxSeconds: 2 },
    circuitSeconds: 0,
  });
  const live = 'live';
  for (const [n, hit] of HITS.entries()) await store.recordHit(hitOf(live, hit), made(hit[2]), `live-${n}`);
  const [expected] = await store.attemptsOf('8801', live);
  expect(expected).toMatchObject({ redirect: { outcome: 'fail' }, postback: { outcome: 'fail' } });
  const standing = (pid: string) =>
    store.attemptsOf('8801', pid).then(([a]) => ({
      redirect: a?.redirect?.outcome,
      postback: a?.postback?.outcome,
      complete: a?.complete,
      firstSeenAt: a?.firstSeenAt,
    }));
  // Half the runs in an order where each hit made before one already written must take its place (the one most
  // often lost to a race when they were written side by side), half shuffled.
  const madeLast = [HITS[5], HITS[3], HITS[2], HITS[1], HITS[4], HITS[0]] as (typeof HITS)[number][];
  for (let run = 0; run < 40; run++) {
    const pid = `drained-${run}`;
    const Records = (run % 2 === 0 ? madeLast : shuffled(HITS, run)).map((hit, i) => ({
      messageId: `m${i}`,
      receiptHandle: `r${i}`,
      attributes: { ApproximateReceiveCount: '1' },
      body: JSON.stringify({
        id: `buffered-${run}-${i}`,
        at: made(hit[2]).toISOString(),
        hit: hitOf(pid, hit),
      }),
    }));
    expect((await drain({ Records } as unknown as SQSEvent)).batchItemFailures).toEqual([]);
    expect(await standing(pid)).toEqual(await standing(live));
  }
});

it('a drained hit that cannot take its place for other writes racing it fails its delivery, and its repeat settles it', async () => {
  const { endpoint, tableName } = await freshTable();
  const client = createDocumentClient({ endpoint });
  let racing = false;
  // Every conditional write that would make a drained hit's outcome stand loses, as if another hit came first.
  client.middlewareStack.add(
    (next) => async (args) => {
      const input = args.input as { ConditionExpression?: string };
      if (racing && input.ConditionExpression?.startsWith('#standing = :standing'))
        throw new ConditionalCheckFailedException({ message: 'raced', $metadata: {} });
      return next(args);
    },
    { step: 'initialize', name: 'racingWrites' },
  );
  const racedStore = createLedgerStore(client, tableName);
  const later = HITS[3] as (typeof HITS)[number];
  const earlier = HITS[1] as (typeof HITS)[number];
  await racedStore.recordHit(hitOf('raced', later), made(later[2]), 'live-success');
  racing = true;
  await expect(
    racedStore.recordBufferedHit(hitOf('raced', earlier), made(earlier[2]), 'buffered-fail'),
  ).rejects.toThrow(/outcome not settled/);
  racing = false;
  // Delivered again: already counted, now made to stand.
  expect(await racedStore.recordBufferedHit(hitOf('raced', earlier), made(earlier[2]), 'buffered-fail')).toBe(
    false,
  );
  const [attempt] = await racedStore.attemptsOf('8801', 'raced');
  expect(attempt?.postback?.outcome).toBe('fail');
  expect(attempt?.complete).toBe('none');
});

it("a drained hit made before a later one of its outcome written live takes back that outcome's first sighting, and the channel's first sender", async () => {
  const at = (minute: number) => made(minute);
  const postback = (pid: string, outcome: string, source: Hit['source']): Hit =>
    ({ channel: 'postback', surveyId: '8802', outcome, pid, token: `${pid}-t`, source }) as Hit;
  const redirect = (pid: string, from: string): Hit =>
    ({
      channel: 'redirect',
      surveyId: '8802',
      outcome: 'success',
      pid,
      token: `${pid}-t`,
      source: 'query',
      from,
    }) as Hit;
  const seen = async (pid: string) => {
    const [a] = await store.attemptsOf('8802', pid);
    return {
      postback: a?.postback && {
        outcome: a.postback.outcome,
        sightings: a.postback.sightings,
        source: a.postback.source,
      },
      redirect: a?.redirect && {
        outcome: a.redirect.outcome,
        sightings: a.redirect.sightings,
        from: a.redirect.from,
      },
      firstSeenAt: a?.firstSeenAt,
    };
  };
  // The marketplace's fail postback, its success postback (buffered, as a form), the success sent again (JSON).
  await store.recordHit(postback('up', 'fail', 'query'), at(0), 'a');
  await store.recordHit(postback('up', 'success', 'form'), at(10), 'b');
  await store.recordHit(postback('up', 'success', 'json'), at(30), 'c');
  await store.recordHit(postback('drained', 'fail', 'query'), at(0), 'a');
  await store.recordHit(postback('drained', 'success', 'json'), at(30), 'c');
  await store.recordBufferedHit(postback('drained', 'success', 'form'), at(10), 'b');
  expect(await seen('drained')).toEqual(await seen('up'));
  // A respondent's first redirect (buffered) and a reload from another address written live before it drained.
  await store.recordHit(redirect('r-up', 'sender-a'), at(0), 'x');
  await store.recordHit(redirect('r-up', 'sender-b'), at(20), 'y');
  await store.recordHit(redirect('r-drained', 'sender-b'), at(20), 'y');
  await store.recordBufferedHit(redirect('r-drained', 'sender-a'), at(0), 'x');
  expect(await seen('r-drained')).toEqual(await seen('r-up'));
  expect((await seen('r-drained')).redirect?.from).toBe('sender-a');
});
