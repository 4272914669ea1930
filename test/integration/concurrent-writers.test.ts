/**
 * Writers of the ledger racing each other: a reconciliation run against the drainer, two invocations starting a run
 * at once, an operator's run beside the hourly one. Each test pauses one actor between its read and its write.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { PutCommand, UpdateCommand, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BUFFERED_IDS } from '../../functions/ledger/attempt-store';
import { pacificDayRange } from '../../functions/marketplace/pacific-time';
import type { Attempt } from '../../functions/receiving/attempt';
import { SCHEDULED_RUN } from '../../functions/reconciliation/reconciler';
import type { VerdictKind } from '../../functions/reconciliation/verdict-kinds';
import { type AttemptVerdict, nextDay, type Verdict } from '../../functions/reconciliation/verdict-rules';
import { type LocalMarketplace, startLocalMarketplace } from '../../infra/local/marketplace/server';
import {
  engineOf,
  gate,
  HOUR,
  hitOf,
  isAttemptKey,
  survey,
  TODAY,
  TOKEN,
  transaction,
  type World,
  world,
} from '../support/concurrent-writers';
import { daySummary } from '../support/ledger';

/**
 * An actor whose next update naming `part` in its expression (armed by `lose(part)`) is applied and its answer lost:
 * the SDK's retry then meets the condition its own write made false. `lost()`: it has happened since.
 */
function losingAnswers(w: World) {
  const plain = w.actor();
  let armed: string | undefined;
  const actor = w.actor(async (command, input) => {
    if (
      armed === undefined ||
      command !== 'UpdateItemCommand' ||
      !String(input.UpdateExpression).includes(armed)
    )
      return;
    armed = undefined;
    await plain.client.send(new UpdateCommand(input as unknown as UpdateCommandInput));
    throw new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });
  });
  const lose = (part: string) => {
    armed = part;
  };
  return { actor, plain, lose, lost: () => armed === undefined };
}

let marketplace: LocalMarketplace;
beforeAll(async () => {
  marketplace = await startLocalMarketplace({ accessToken: TOKEN, seedSurveys: false });
});
afterAll(() => marketplace.stop());

const tuning = { settleMs: 10 * 60_000, freshDays: 1 };
const midnight = pacificDayRange(TODAY).start.getTime();
const yesterday = nextDay(TODAY, -1);

describe('a drained hit and a reconciliation run', () => {
  it('a buffered postback drained between the run reading its attempt and judging it: awaiting, re-read next run', async () => {
    const w = await world();
    const run = w.actor();
    const drainer = w.actor();
    await survey(marketplace, run.registry, 7301, midnight - 2 * HOUR);
    // Clicked 23:40 yesterday; its redirect live at 23:45; its postback made at 23:50 and buffered in an outage.
    const t = transaction(marketplace, 7301, new Date(midnight - 20 * 60_000));
    await drainer.attempts.recordHit(
      hitOf(t, 'redirect', 'success'),
      new Date(midnight - 15 * 60_000),
      'r-1',
    );
    const postbackMade = new Date(midnight - 10 * 60_000);
    // 00:20: the first run after midnight reads yesterday; the drainer writes the postback right after.
    w.clock.now = midnight + 20 * 60_000;
    const read = run.attempts.attemptsOfSurvey;
    let drained = false;
    run.attempts = {
      ...run.attempts,
      attemptsOfSurvey: async (surveyId, from, to) => {
        const found = await read(surveyId, from, to);
        if (!drained && found.some((a) => a.token === t.token)) {
          drained = true;
          await drainer.attempts.recordBufferedHit(hitOf(t, 'postback', 'success'), postbackMade, 'buf-1');
        }
        return found;
      },
    };
    const first = await engineOf(marketplace, w, run, tuning).scheduled(7, {
      deadline: new Date(w.clock.now + HOUR),
    });
    expect(drained).toBe(true);
    // The drained hit was made before the run began, but changed the ledger after its read: not the attempt read.
    expect(first?.outcomes[0]).toMatchObject({ awaiting: 1 });
    expect((await run.results.summariesOf('7301', [yesterday]))[0]?.verdicts).toEqual({});
    const [attempt] = await run.attempts.attemptsOf('7301', t.pid);
    expect(attempt?.lastSeenAt).toBe(new Date(w.clock.now).toISOString());
    expect(attempt?.postback?.sightings[0]?.firstAt).toBe(postbackMade.toISOString());
    // The next run reads the day again and judges the attempt as it is.
    w.clock.now += HOUR;
    await engineOf(marketplace, w, w.actor(), tuning).scheduled(7, {
      deadline: new Date(w.clock.now + HOUR),
    });
    expect((await run.results.summariesOf('7301', [yesterday]))[0]?.verdicts).toEqual({ matched: 1 });
  }, 60_000);

  it('a drained earlier outcome taking its place after the run read the attempt: no verdict on the outcome it replaced', async () => {
    const w = await world();
    const standEarlierReached = gate();
    const releaseStandEarlier = gate();
    const verdictPending = gate();
    const releaseVerdict = gate();
    let token = '';
    // The drainer pauses between its hit's update and the one that makes its earlier outcome stand.
    const drainer = w.actor(async (command, input) => {
      if (
        command === 'UpdateItemCommand' &&
        String(input.ConditionExpression ?? '').includes('#standing = :standing')
      ) {
        standEarlierReached.open();
        await releaseStandEarlier.wait();
      }
    });
    // The run pauses just before its verdict write on that attempt.
    const run = w.actor(async (command, input) => {
      if (
        command === 'UpdateItemCommand' &&
        isAttemptKey(input, token) &&
        String(input.UpdateExpression ?? '').includes('verdict = :verdict')
      ) {
        verdictPending.open();
        await releaseVerdict.wait();
      }
    });
    await survey(marketplace, run.registry, 7302, midnight - 2 * HOUR);
    const t = transaction(marketplace, 7302, new Date(midnight - 20 * 60_000));
    token = t.token;
    // 23:45 a success postback buffered in an outage; 23:50 a fail postback recorded live.
    const successMade = new Date(midnight - 15 * 60_000);
    await run.attempts.recordHit(hitOf(t, 'postback', 'fail'), new Date(midnight - 10 * 60_000), 'live-1');
    // The drain's first update at 00:19, the run from 00:20.
    w.clock.now = midnight + 19 * 60_000;
    const drain = drainer.attempts.recordBufferedHit(hitOf(t, 'postback', 'success'), successMade, 'buf-1');
    await standEarlierReached.wait();
    w.clock.now = midnight + 20 * 60_000;
    // Judged at once (no settling time): the run reads the attempt between the drainer's two updates.
    const runDone = engineOf(marketplace, w, run, { ...tuning, settleMs: 0 }).scheduled(7, {
      deadline: new Date(w.clock.now + HOUR),
    });
    await verdictPending.wait();
    releaseStandEarlier.open();
    expect(await drain).toBe(true);
    releaseVerdict.open();
    const report = await runDone;
    const [attempt] = await run.attempts.attemptsOf('7302', t.pid);
    expect(attempt?.complete).toBe('postback-confirmed');
    expect(report?.outcomes[0]).toMatchObject({ awaiting: 1 });
    expect(attempt?.reconciliation).toBeUndefined();
    expect(await run.results.discrepancies(yesterday, '7302')).toEqual([]);
    w.clock.now += HOUR;
    await engineOf(marketplace, w, w.actor(), tuning).scheduled(7, {
      deadline: new Date(w.clock.now + HOUR),
    });
    expect((await run.attempts.attemptsOf('7302', t.pid))[0]?.reconciliation?.verdict).toBe('matched');
  }, 60_000);
});

describe('a late hit and a run reconciling its day for the first time', () => {
  it("a postback between the day's verdicts and its first summary: the day is read again by the next run", async () => {
    const w = await world();
    const day = nextDay(TODAY, -3);
    const summaryPending = gate();
    const releaseSummary = gate();
    // The run pauses before it writes that day's first summary (its verdicts are written by then).
    const run = w.actor(async (command, input) => {
      const key = input.Key as { pk?: string; sk?: string } | undefined;
      if (
        command === 'UpdateItemCommand' &&
        key?.pk === 'SUMMARY#7310' &&
        key.sk === `DAY#${day}` &&
        String(input.UpdateExpression ?? '').includes('#f0')
      ) {
        summaryPending.open();
        await releaseSummary.wait();
      }
    });
    const late = w.actor();
    await survey(marketplace, run.registry, 7310, midnight - 5 * 24 * HOUR);
    // Clicked at noon three days ago; only its redirect came back then.
    const clicked = pacificDayRange(day).start.getTime() + 12 * HOUR;
    const t = transaction(marketplace, 7310, new Date(clicked));
    const now = w.clock.now;
    w.clock.now = clicked + 10 * 60_000;
    await late.attempts.recordHit(hitOf(t, 'redirect', 'success'), new Date(w.clock.now), 'r-1');
    w.clock.now = now;
    // The survey's first run reconciles every day of its window.
    const runDone = engineOf(marketplace, w, run, tuning).scheduled(7, { deadline: new Date(now + HOUR) });
    await summaryPending.wait();
    expect((await run.attempts.attemptsOf('7310', t.pid))[0]?.reconciliation).toMatchObject({
      verdict: 'complete_not_received',
      day,
    });
    // The postback, re-sent three days late, arrives now.
    w.clock.now = now + 1_000;
    await late.attempts.recordHit(hitOf(t, 'postback', 'success'), new Date(w.clock.now), 'p-1');
    releaseSummary.open();
    await runDone;
    expect((await run.results.summariesOf('7310', [day]))[0]?.here.postbackCompletes).toBe(0);
    // The next run, an hour later: the day is not due for its daily re-check, but its flag says to read it.
    w.clock.now = now + HOUR;
    await engineOf(marketplace, w, w.actor(), tuning).scheduled(7, {
      deadline: new Date(w.clock.now + HOUR),
    });
    expect((await run.attempts.attemptsOf('7310', t.pid))[0]?.reconciliation?.verdict).toBe('matched');
    expect((await run.results.summariesOf('7310', [day]))[0]?.here.postbackCompletes).toBe(1);
  }, 60_000);
});

describe('two runs judging an item made for a transaction', () => {
  it('one retiring the item as it read it does not undo the verdict the other wrote since', async () => {
    const w = await world();
    const { results } = w.actor();
    const day = nextDay(TODAY, -2);
    const at = (hours: number) => new Date(pacificDayRange(TODAY).start.getTime() + hours * HOUR);
    const verdict = (kind: VerdictKind, detail: Verdict['detail']): AttemptVerdict => ({
      surveyId: '7320',
      pid: 'p-made',
      token: 'tx-made',
      verdict: { kind, day, detail },
    });
    // A run made the item for a complete only the marketplace listed.
    await results.recordVerdict(
      verdict('complete_not_received', { postback: 'none', redirect: 'none' }),
      at(1),
    );
    const [read] = await results.attemptsByKey('7320', [{ pid: 'p-made', token: 'tx-made' }]);
    expect(read?.reconciliation?.verdict).toBe('complete_not_received');
    // Another run, from a newer listing, judges it anew before the first retires it as withdrawn.
    await results.recordVerdict(
      {
        ...verdict('invalidated', { postback: 'none', redirect: 'none' }),
        ...(read ? { attempt: read } : {}),
      },
      at(2),
    );
    expect(await results.retireItem(read as NonNullable<typeof read>, at(3), 'withdrawn')).toBe(false);
    const [after] = await results.attemptsByKey('7320', [{ pid: 'p-made', token: 'tx-made' }]);
    expect(after?.reconciliation?.verdict).toBe('invalidated');
    // As read, it is retired.
    expect(await results.retireItem(after as NonNullable<typeof after>, at(4), 'withdrawn')).toBe(true);
    const [retired] = await results.attemptsByKey('7320', [{ pid: 'p-made', token: 'tx-made' }]);
    expect(retired?.reconciliation).toBeUndefined();
  });
});

describe('a verdict write whose answer was lost', () => {
  it("is taken as this run's own: a verdict moved to another day still flags the day it left", async () => {
    const w = await world();
    const seenDay = nextDay(TODAY, -1);
    const clickDay = nextDay(TODAY, -2);
    const { actor: run, lose, lost } = losingAnswers(w);
    const at = pacificDayRange(seenDay).start.getTime() + 12 * HOUR;
    await run.attempts.recordHit(
      {
        channel: 'postback',
        surveyId: '7331',
        outcome: 'success',
        pid: 'p-moved',
        token: 'tx-moved',
        source: 'query',
      },
      new Date(at),
    );
    await run.results.putDaySummary(
      daySummary('7331', seenDay, '0.00', '0.00', { complete_not_paid: 1 }),
      new Date(at + HOUR),
      'r1',
    );
    const [seen] = await run.results.attemptsByKey('7331', [{ pid: 'p-moved', token: 'tx-moved' }]);
    const entry = (kind: VerdictKind, day: string, attempt: Attempt): AttemptVerdict => ({
      surveyId: '7331',
      pid: 'p-moved',
      token: 'tx-moved',
      attempt,
      verdict: { kind, day, detail: { postback: 'success', redirect: 'none' } },
    });
    expect(
      await run.results.recordVerdict(
        entry('complete_not_paid', seenDay, seen as Attempt),
        new Date(at + HOUR),
      ),
    ).toBe('new');
    // The marketplace lists it on its click's day a day later: the verdict moves there.
    const [judged] = await run.results.attemptsByKey('7331', [{ pid: 'p-moved', token: 'tx-moved' }]);
    lose('verdictHistory');
    const movedAt = new Date(at + 25 * HOUR);
    expect(await run.results.recordVerdict(entry('matched', clickDay, judged as Attempt), movedAt)).toBe(
      'changed',
    );
    expect(lost()).toBe(true);
    const [after] = await run.results.attemptsByKey('7331', [{ pid: 'p-moved', token: 'tx-moved' }]);
    expect(after?.reconciliation).toMatchObject({ verdict: 'matched', day: clickDay });
    // The same write again, from the attempt as read before it: nothing written, and said so.
    expect(await run.results.recordVerdict(entry('matched', clickDay, judged as Attempt), movedAt)).toBe(
      'unchanged',
    );
    const { flags } = await run.results.surveyRecords('7331', [seenDay]);
    expect(flags?.has(seenDay)).toBe(true);
  });
});

describe('writes after which a day is flagged, their answers lost', () => {
  it("are taken as made: a pointer to the attempt's arrival and a retired item each say they were written", async () => {
    const w = await world();
    const { actor: run, lose, lost, plain } = losingAnswers(w);
    const day = nextDay(TODAY, -2);
    const at = new Date(pacificDayRange(TODAY).start.getTime() + HOUR);
    const made = (pid: string): AttemptVerdict => ({
      surveyId: '7332',
      pid,
      token: `tx-${pid}`,
      verdict: { kind: 'complete_not_received', day, detail: { postback: 'none', redirect: 'none' } },
    });
    await run.results.recordVerdict(made('p-pointed'), at);
    lose('arrivedAs');
    expect(await run.results.pointToArrival('7332', 'p-pointed', 'tx-p-pointed', 'p-other', at)).toBe(true);
    expect(lost()).toBe(true);
    // The same call again at the same time writes nothing, and says so.
    expect(await run.results.pointToArrival('7332', 'p-pointed', 'tx-p-pointed', 'p-other', at)).toBe(false);
    await run.results.recordVerdict(made('p-retired'), at);
    const [item] = await run.results.attemptsByKey('7332', [{ pid: 'p-retired', token: 'tx-p-retired' }]);
    lose('retiredAt');
    expect(await run.results.retireItem(item as Attempt, new Date(at.getTime() + HOUR), 'withdrawn')).toBe(
      true,
    );
    expect(lost()).toBe(true);
    expect(await run.results.retireItem(item as Attempt, new Date(at.getTime() + HOUR), 'withdrawn')).toBe(
      false,
    );
    // A survey's state: written, not another run's.
    const state = { surveyId: '7332', lastReconciledAt: at.toISOString(), failedDays: [] };
    let losePut = true;
    const lostPut = w.actor(async (command, input) => {
      if (command !== 'PutItemCommand' || (input.Item as { kind?: string }).kind !== 'reconciliation') return;
      if (!losePut) return;
      losePut = false;
      await plain.client.send(
        new PutCommand({ TableName: w.tableName, Item: input.Item as Record<string, unknown> }),
      );
      throw new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });
    });
    expect(await lostPut.results.putSurveyState(state, { asRead: undefined })).toBe(true);
    expect(losePut).toBe(false);
    // Another run's write of the same revision is not taken for this one's.
    expect(
      await run.results.putSurveyState(
        { ...state, lastReconciledAt: new Date(at.getTime() + 1).toISOString() },
        { asRead: undefined },
      ),
    ).toBe(false);
    // Written by another run before (not this one's own write): still false.
    expect(
      await run.results.pointToArrival(
        '7332',
        'p-pointed',
        'tx-p-pointed',
        'p-other',
        new Date(at.getTime() + 2 * HOUR),
      ),
    ).toBe(false);
  });
});

describe("a run's surveys side by side, each with its own time", () => {
  it("a repeated retire says it wrote nothing even when another survey's write came between", async () => {
    const w = await world();
    const { actor: run, lose } = losingAnswers(w);
    const day = nextDay(TODAY, -2);
    const at = new Date(pacificDayRange(TODAY).start.getTime() + HOUR);
    const made = (surveyId: string, pid: string): AttemptVerdict => ({
      surveyId,
      pid,
      token: `tx-${pid}`,
      verdict: { kind: 'complete_not_received', day, detail: { postback: 'none', redirect: 'none' } },
    });
    await run.results.recordVerdict(made('7333', 'p-a'), at);
    await run.results.recordVerdict(made('7334', 'p-b'), at);
    const [itemA] = await run.results.attemptsByKey('7333', [{ pid: 'p-a', token: 'tx-p-a' }]);
    const atA = new Date(at.getTime() + HOUR);
    lose('retiredAt');
    expect(await run.results.retireItem(itemA as Attempt, atA, 'withdrawn')).toBe(true);
    // Another survey of the run, its time a few milliseconds later, writes between.
    expect(
      await run.results.pointToArrival('7334', 'p-b', 'tx-p-b', 'p-other', new Date(atA.getTime() + 7)),
    ).toBe(true);
    expect(await run.results.retireItem(itemA as Attempt, atA, 'withdrawn')).toBe(false);
  });
});

describe('a resumed run whose lease was written and its answer lost', () => {
  it('is run by the invocation that wrote it, not left standing aside nor taken for a death by the next', async () => {
    const w = await world();
    const { actor: a, lose, lost } = losingAnswers(w);
    for (const id of [7414, 7415]) await survey(marketplace, a.registry, id, w.clock.now - HOUR);
    // A run started and left unfinished (its deadline already past), its lease given back.
    await engineOf(marketplace, w, a, tuning).scheduled(7, { deadline: new Date(w.clock.now - 1) });
    w.clock.now += 60_000;
    lose('SET leaseUntil');
    const report = await engineOf(marketplace, w, a, tuning).scheduled(7, {
      deadline: new Date(w.clock.now + HOUR),
      leaseUntil: new Date(w.clock.now + 2 * HOUR),
    });
    expect(lost()).toBe(true);
    expect(report?.complete).toBe(true);
    expect(await a.results.runState(SCHEDULED_RUN)).toMatchObject({ finishedAt: expect.any(String) });
    expect((await a.results.runState(SCHEDULED_RUN))?.stall).toBeUndefined();
  }, 60_000);
});

describe('runs beside each other', () => {
  const isRunStatePut = (command: string, input: Record<string, unknown>) =>
    command === 'PutItemCommand' &&
    (input.Item as { pk?: string } | undefined)?.pk === `RUN#${SCHEDULED_RUN}` &&
    (input.Item as { sk?: string }).sk === 'STATE';

  it('two invocations starting a run at once: one runs it, the other answers busy', async () => {
    const w = await world();
    const bRead = gate();
    const aTook = gate();
    let aPuts = 0;
    let bPuts = 0;
    // A writes its new run once B has read the run before it (both found it finished); B writes its own once A
    // has taken A's (the write of a new run holds its lease).
    const a = w.actor(async (command, input) => {
      if (isRunStatePut(command, input) && aPuts++ === 0) await bRead.wait();
    });
    const b = w.actor(async (command, input) => {
      if (isRunStatePut(command, input) && bPuts++ === 0) await aTook.wait();
    });
    const putA = a.results.putRunState;
    a.results = {
      ...a.results,
      putRunState: async (...args) => {
        const written = await putA(...args);
        aTook.open();
        return written;
      },
    };
    const readB = b.results.runState;
    b.results = {
      ...b.results,
      runState: async (name) => {
        const state = await readB(name);
        bRead.open();
        return state;
      },
    };
    for (const id of [7401, 7402]) await survey(marketplace, a.registry, id, w.clock.now - HOUR);
    const start = w.clock.now;
    const [reportA, reportB] = await Promise.all([
      engineOf(marketplace, { ...w, clock: { now: start } }, a).scheduled(7, {
        deadline: new Date(start + HOUR),
      }),
      engineOf(marketplace, { ...w, clock: { now: start + 1 } }, b).scheduled(7, {
        deadline: new Date(start + HOUR),
      }),
    ]);
    expect([reportA, reportB].filter((report) => report !== undefined)).toHaveLength(1);
  }, 60_000);

  it("a new run's first write whose answer was lost: the invocation finds the run its own and runs it", async () => {
    const w = await world();
    const plain = w.actor();
    let lost = true;
    const a = w.actor(async (command, input) => {
      if (!lost || !isRunStatePut(command, input)) return;
      lost = false;
      // The write lands and its answer is lost: the SDK's retry then meets the condition its own write broke.
      await plain.client.send(
        new PutCommand({ TableName: w.tableName, Item: input.Item as Record<string, unknown> }),
      );
      throw new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });
    });
    await survey(marketplace, a.registry, 7413, w.clock.now - HOUR);
    const report = await engineOf(marketplace, w, a).scheduled(7, { deadline: new Date(w.clock.now + HOUR) });
    expect(report?.complete).toBe(true);
    expect(await a.results.runState(SCHEDULED_RUN)).toMatchObject({ finishedAt: expect.any(String) });
  }, 60_000);

  it('an invocation that starts a run holds it from that write: one reading it just after answers busy', async () => {
    const w = await world();
    const a = w.actor();
    const b = w.actor();
    const aWrote = gate();
    const bDone = gate();
    const putA = a.results.putRunState;
    let aPuts = 0;
    a.results = {
      ...a.results,
      putRunState: async (...args) => {
        const written = await putA(...args);
        if (aPuts++ === 0) {
          aWrote.open();
          await bDone.wait();
        }
        return written;
      },
    };
    await survey(marketplace, a.registry, 7411, w.clock.now - HOUR);
    const start = w.clock.now;
    const runA = engineOf(marketplace, { ...w, clock: { now: start } }, a).scheduled(7, {
      deadline: new Date(start + HOUR),
    });
    await aWrote.wait();
    const reportB = await engineOf(marketplace, { ...w, clock: { now: start + 1 } }, b).scheduled(7, {
      deadline: new Date(start + HOUR),
    });
    bDone.open();
    expect(reportB).toBeUndefined();
    expect((await runA)?.complete).toBe(true);
  }, 60_000);

  it('a survey state an earlier release wrote (no revision) is written over by the next run, then by revision', async () => {
    const w = await world();
    const { client, registry, results } = w.actor();
    await survey(marketplace, registry, 7701, w.clock.now - 10 * 24 * HOUR);
    await client.send(
      new PutCommand({
        TableName: w.tableName,
        Item: {
          pk: 'SURVEY#7701',
          sk: 'RECONCILIATION',
          kind: 'reconciliation',
          surveyId: '7701',
          failedDays: [TODAY],
          lastError: 'marketplace answered 503',
        },
      }),
    );
    const read = await results.surveyState('7701');
    expect(read?.revision).toBeUndefined();
    const report = await engineOf(marketplace, w, w.actor(), tuning).scheduled(7, {
      deadline: new Date(w.clock.now + HOUR),
    });
    expect(report?.outcomes[0]).toMatchObject({ status: 'reconciled' });
    expect(await results.surveyState('7701')).toMatchObject({ failedDays: [], revision: 1 });
    // Written over that read again: refused; over the state as it now is: written.
    expect(await results.putSurveyState({ surveyId: '7701', failedDays: [] }, { asRead: read })).toBe(false);
    const now = await results.surveyState('7701');
    expect(await results.putSurveyState({ surveyId: '7701', failedDays: [] }, { asRead: now })).toBe(true);
    expect((await results.surveyState('7701'))?.revision).toBe(2);
  }, 60_000);

  it("an operator's run finishing after the hourly one does not put back a day's figures from its older listing", async () => {
    const w = await world();
    const atSummary = gate();
    const release = gate();
    const manual = w.actor(async (command, input) => {
      const key = input.Key as { pk?: string; sk?: string } | undefined;
      if (
        command === 'UpdateItemCommand' &&
        key?.pk === 'SUMMARY#7602' &&
        key.sk?.startsWith('DAY#') &&
        String(input.UpdateExpression).startsWith('SET #f0')
      ) {
        atSummary.open();
        await release.wait();
      }
    });
    const hourly = w.actor();
    await survey(marketplace, hourly.registry, 7602, w.clock.now - 10 * 24 * HOUR);
    const t = transaction(marketplace, 7602, new Date(w.clock.now - 3 * HOUR), { verifyToken: 'Valid' });
    await hourly.attempts.recordHit(
      hitOf(t, 'postback', 'success'),
      new Date(t.clickedAt.getTime() + 6 * 60_000),
      'p',
    );
    // The operator's run lists the complete as paid, and stops at the day's figures.
    const manualRun = engineOf(marketplace, w, manual, { settleMs: 0 }).run(TODAY, TODAY, ['7602']);
    await atSummary.wait();
    // The buyer reverses it; the hourly run sees that and writes the day's figures.
    t.verifyToken = 'Invalid';
    t.cpi = '0';
    await engineOf(marketplace, w, hourly, tuning).scheduled(7, { deadline: new Date(w.clock.now + HOUR) });
    const figures = async () => (await hourly.results.summariesOf('7602', [TODAY]))[0];
    expect((await figures())?.marketplace).toMatchObject({ owed: '0.00', invalidCompletes: 1 });
    release.open();
    await manualRun;
    // The newer figures stand, and the day is flagged for the next run.
    expect((await figures())?.marketplace).toMatchObject({ owed: '0.00', invalidCompletes: 1 });
    expect((await hourly.results.surveyRecords('7602', [TODAY])).flags?.has(TODAY)).toBe(true);
    expect((await hourly.attempts.attemptsOf('7602', t.pid))[0]?.reconciliation?.verdict).toBe('invalidated');
  }, 60_000);

  it("an operator's run finishing after the hourly one does not put back the state it read", async () => {
    const w = await world();
    const oldest = nextDay(TODAY, -6);
    const manualAtPut = gate();
    const releaseManual = gate();
    const manual = w.actor(async (command, input) => {
      const item = input.Item as { pk?: string; sk?: string } | undefined;
      if (command === 'PutItemCommand' && item?.pk === 'SURVEY#7601' && item.sk === 'RECONCILIATION') {
        manualAtPut.open();
        await releaseManual.wait();
      }
    });
    const hourly = w.actor();
    await survey(marketplace, hourly.registry, 7601, w.clock.now - 10 * 24 * HOUR);
    // A complete on the window's oldest day, its postback here, still Pending review at the marketplace.
    const t = transaction(marketplace, 7601, new Date(pacificDayRange(oldest).start.getTime() + 10 * HOUR), {
      verifyToken: 'Pending',
    });
    await hourly.attempts.recordHit(
      hitOf(t, 'postback', 'success'),
      new Date(t.clickedAt.getTime() + 6 * 60_000),
      'p',
    );
    await hourly.results.putSurveyState({
      surveyId: '7601',
      failedDays: [TODAY],
      lastError: 'marketplace answered 503',
      lastErrorAt: new Date(w.clock.now - HOUR).toISOString(),
    });
    const manualRun = engineOf(marketplace, w, manual, { settleMs: 0 }).run(TODAY, TODAY, ['7601']);
    await manualAtPut.wait();
    await engineOf(marketplace, w, hourly, tuning).scheduled(7, { deadline: new Date(w.clock.now + HOUR) });
    expect((await hourly.results.surveyState('7601'))?.openDays).toEqual([oldest]);
    releaseManual.open();
    const report = await manualRun;
    // The hourly run's open days stand; the operator's run says the survey must be run again.
    expect((await hourly.results.surveyState('7601'))?.openDays).toEqual([oldest]);
    expect(report.outcomes[0]).toMatchObject({ status: 'failed' });
    expect(report.outcomes[0]?.error).toMatch(/written by another run/);
    // So the buyer's later review reaches what is owed.
    t.verifyToken = 'Valid';
    t.verifiedAt = new Date(w.clock.now + 20 * HOUR);
    for (let d = 1; d <= 2; d++) {
      w.clock.now += 24 * HOUR;
      await engineOf(marketplace, w, w.actor(), tuning).scheduled(7, {
        deadline: new Date(w.clock.now + HOUR),
      });
    }
    expect((await hourly.results.summariesOf('7601', [oldest]))[0]?.marketplace).toMatchObject({
      pendingCompletes: 0,
      owed: '1.50',
    });
  }, 60_000);
});

describe('drained hits of one attempt', () => {
  const postbackOf = (t: ReturnType<typeof transaction>, outcome: 'success' | 'fail') =>
    hitOf(t, 'postback', outcome);
  const redirectOf = (t: ReturnType<typeof transaction>, outcome: 'success' | 'fail') =>
    hitOf(t, 'redirect', outcome);
  const minute = (n: number) => new Date(midnight + n * 60_000);
  /** A drainer whose store gives way once, on the update that makes a drained hit's outcome take its place. */
  const failingOnceAtStand = (w: Awaited<ReturnType<typeof world>>) => {
    let failOnce = true;
    return w.actor((command, input) => {
      if (
        failOnce &&
        command === 'UpdateItemCommand' &&
        String(input.ConditionExpression ?? '').includes('#standing = :standing')
      ) {
        failOnce = false;
        throw Object.assign(new Error('injected: throughput exceeded'), {
          name: 'ProvisionedThroughputExceededException',
        });
      }
    });
  };

  it('an earlier success and a later fail drained at once, the fail taking the place first: the success, made first, stands', async () => {
    const w = await world();
    const successAtStand = gate();
    const releaseSuccess = gate();
    // The success's drain pauses between its hit's update and the one that makes its earlier outcome stand.
    const successDrain = w.actor(async (command, input) => {
      if (
        command === 'UpdateItemCommand' &&
        String(input.ConditionExpression ?? '').includes('#standing = :standing')
      ) {
        successAtStand.open();
        await releaseSuccess.wait();
      }
    });
    const failDrain = w.actor();
    const t = transaction(marketplace, 7310, minute(-30));
    // A success made at 23:40 and a fail at 23:42, both buffered in an outage; a success recorded live at 23:45.
    await failDrain.attempts.recordHit(postbackOf(t, 'success'), minute(-15), 'live-1');
    w.clock.now = minute(19).getTime();
    const success = successDrain.attempts.recordBufferedHit(postbackOf(t, 'success'), minute(-20), 'buf-s');
    await successAtStand.wait();
    // The fail drains whole meanwhile: made before the live success, it takes that one's place.
    expect(await failDrain.attempts.recordBufferedHit(postbackOf(t, 'fail'), minute(-18), 'buf-f')).toBe(
      true,
    );
    releaseSuccess.open();
    expect(await success).toBe(true);
    const [attempt] = await failDrain.attempts.attemptsOf(String(t.surveyId), t.pid);
    expect(attempt?.postback).toMatchObject({ outcome: 'success', firstAt: minute(-20).toISOString() });
    expect(attempt?.complete).toBe('postback-confirmed');
  });

  it('a drained hit whose place-taking update failed: its redelivery, a repeat, still makes the first made stand', async () => {
    const w = await world();
    // The store gives way just as the drained hit is to take its place (after its own update was written).
    const drainer = failingOnceAtStand(w);
    const t = transaction(marketplace, 7311, minute(-30));
    // A success made at 23:40 and buffered; a fail recorded live at 23:45.
    await drainer.attempts.recordHit(postbackOf(t, 'fail'), minute(-15), 'live-1');
    w.clock.now = minute(19).getTime();
    await expect(
      drainer.attempts.recordBufferedHit(postbackOf(t, 'success'), minute(-20), 'buf-s'),
    ).rejects.toThrow();
    expect((await drainer.attempts.attemptsOf(String(t.surveyId), t.pid))[0]?.postback?.outcome).toBe('fail');
    // The queue delivers the message again: its hit is held already, so it is not counted twice.
    w.clock.now = minute(21).getTime();
    expect(await drainer.attempts.recordBufferedHit(postbackOf(t, 'success'), minute(-20), 'buf-s')).toBe(
      false,
    );
    const [attempt] = await drainer.attempts.attemptsOf(String(t.surveyId), t.pid);
    expect(attempt?.postback).toMatchObject({ outcome: 'success', firstAt: minute(-20).toISOString() });
    expect(attempt?.postback?.sightings.find((s) => s.outcome === 'success')?.hits).toBe(1);
  });

  it('the same, on an attempt whose set of drained ids is full: the redelivery still makes the first made stand', async () => {
    const w = await world();
    const drainer = failingOnceAtStand(w);
    const t = transaction(marketplace, 7312, minute(-30));
    // The outage buffered many refreshes of the end page: the attempt remembers as many drained ids as it keeps.
    for (let i = 0; i < MAX_BUFFERED_IDS; i++)
      await drainer.attempts.recordBufferedHit(redirectOf(t, 'fail'), minute(-25), `refresh-${i}`);
    await drainer.attempts.recordHit(postbackOf(t, 'success'), minute(-15), 'live-1');
    w.clock.now = minute(19).getTime();
    await expect(
      drainer.attempts.recordBufferedHit(postbackOf(t, 'fail'), minute(-20), 'buf-f'),
    ).rejects.toThrow();
    expect((await drainer.attempts.attemptsOf(String(t.surveyId), t.pid))[0]?.postback?.outcome).toBe(
      'success',
    );
    w.clock.now = minute(21).getTime();
    expect(await drainer.attempts.recordBufferedHit(postbackOf(t, 'fail'), minute(-20), 'buf-f')).toBe(false);
    const [attempt] = await drainer.attempts.attemptsOf(String(t.surveyId), t.pid);
    expect(attempt?.postback).toMatchObject({ outcome: 'fail', firstAt: minute(-20).toISOString() });
  });
});

describe('live hits of one attempt, written in another order than made', () => {
  const minute = (n: number) => new Date(midnight + n * 60_000);

  it('a success postback whose write was overtaken by a later fail (its write retried under throttling): the success, made first, stands', async () => {
    const w = await world();
    const live = w.actor();
    const t = transaction(marketplace, 7603, minute(-30));
    // The fail, made at 23:42, lands first; the success, made at 23:40 on another container, lands after it.
    await live.attempts.recordHit(hitOf(t, 'postback', 'fail'), minute(-18), 'live-f');
    const recorded = await live.attempts.recordHit(hitOf(t, 'postback', 'success'), minute(-20), 'live-s');
    expect(recorded.effect).toBe('recorded');
    const [attempt] = await live.attempts.attemptsOf(String(t.surveyId), t.pid);
    expect(attempt?.postback).toMatchObject({ outcome: 'success', firstAt: minute(-20).toISOString() });
    expect(attempt?.complete).toBe('postback-confirmed');
    // The attempt was first seen when the success was made, not when the fail landed.
    expect(attempt?.firstSeenAt).toBe(minute(-20).toISOString());
    // Counted once each, as in any order.
    expect(attempt?.postback?.sightings.map((s) => [s.outcome, s.hits])).toEqual(
      expect.arrayContaining([
        ['success', 1],
        ['fail', 1],
      ]),
    );
  });

  it('two outcomes made in the same millisecond: the same one stands whichever lands first', async () => {
    const standing = async (surveyId: number, order: readonly ('success' | 'quality')[]) => {
      const w = await world();
      const live = w.actor();
      const t = transaction(marketplace, surveyId, minute(-30));
      for (const outcome of order)
        await live.attempts.recordHit(hitOf(t, 'redirect', outcome), minute(-10), outcome);
      return (await live.attempts.attemptsOf(String(t.surveyId), t.pid))[0]?.redirect?.outcome;
    };
    const one = await standing(7604, ['success', 'quality']);
    expect(await standing(7605, ['quality', 'success'])).toBe(one);
  });
});
