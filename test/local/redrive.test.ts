/**
 * `npm run cli -- buffer redrive` against the local stack: hits parked in the dead-letter queue by a ledger outage
 * go back to the buffer and into the ledger, each exactly once, however often the redrive runs, whether it runs
 * twice at once, and whether a message was moved twice (a run stopped between sending and deleting it); a hit the
 * ledger had taken before it was parked is not counted again.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LedgerStore } from '../../functions/ledger/ledger-store';
import { LEDGER_PAUSE_MS } from '../../functions/receiving/ledger-circuit';
import type { LocalStack } from '../../infra/local/stack';
import { filledUrl } from '../support/api-events';
import type { EngineProxy, Fault } from '../support/engine-proxy';
import { TEST_KEY_RING } from '../support/ledger';
import { startTestStack } from '../support/local-stack';

const run = promisify(execFile);
let stack: LocalStack;
let proxy: EngineProxy;
let ledger: LedgerStore;

beforeAll(async () => {
  const started = await startTestStack(
    {
      STORE_TIMEOUT_MS: '150',
      LOCAL_DRAINER: 'manual',
      // Two receives instead of twelve: the same path to the dead-letter queue, in seconds.
      LOCAL_BUFFER_MAX_RECEIVES: '2',
    },
    { proxy: true },
  );
  ({ stack, ledger } = started);
  proxy = started.proxy as EngineProxy;
}, 60_000);
afterAll(async () => {
  await stack?.stop();
  await proxy?.stop();
});

interface Sent {
  readonly pid: string;
  readonly token: string;
}

const url = (channel: 'postback' | 'redirect', ids: Sent) =>
  filledUrl(TEST_KEY_RING, channel, '7007', 'success', ids).replace('https://hits.test', stack.apiUrl);

/** The operator's command, as a separate process that finds the local queues as `npm run cli` does. */
async function redrive(...args: string[]): Promise<{ stdout: string; code: number }> {
  try {
    const { stdout } = await run(
      'node_modules/.bin/tsx',
      ['functions/cli/main.ts', 'buffer', 'redrive', ...args],
      {
        env: { ...process.env, RECEIVER_TARGET: 'local' },
      },
    );
    return { stdout, code: 0 };
  } catch (error) {
    const failed = error as { stdout: string; stderr: string; code: number };
    throw new Error(`buffer redrive failed (${failed.code}): ${failed.stderr}`);
  }
}

/**
 * A postback and a redirect per respondent, acknowledged while the ledger fails with `fault`, then parked in the
 * dead-letter queue by a drainer that keeps failing.
 */
async function parkedHits(count: number, fault: Fault): Promise<Sent[]> {
  const sent = Array.from({ length: count }, () => ({
    pid: `p-${randomUUID().slice(0, 8)}`,
    token: randomUUID(),
  }));
  proxy.faults(() => fault);
  const answers = await Promise.all(
    sent.flatMap((ids) => [
      fetch(url('postback', ids)).then(async (r) => [
        r.status,
        ((await r.json()) as { effect?: string }).effect,
      ]),
      fetch(url('redirect', ids), { redirect: 'manual' }).then((r) => [r.status, 'redirect']),
    ]),
  );
  for (const [status, effect] of answers) {
    // Without a landing page configured, the respondent gets the plain page.
    if (effect === 'redirect') expect(status).toBe(200);
    else expect([status, effect]).toEqual([200, 'buffered']);
  }
  return sent;
}

/**
 * Delivers until the buffer is empty: a delivery the ledger answered too slowly on a loaded machine (the store
 * timeout is short here) waits out its backoff and is delivered again, as SQS would.
 */
async function drainAll() {
  const giveUp = Date.now() + 30_000;
  do {
    await stack.drainBuffer();
    if (stack.buffer.depth().waiting === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  } while (Date.now() < giveUp);
}

async function drainUntilParked(deadLetters: number) {
  proxy.faults(() => 'server-error');
  const giveUp = Date.now() + 40_000;
  while (stack.buffer.depth().deadLetters < deadLetters && Date.now() < giveUp) {
    await stack.drainBuffer();
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  proxy.faults(undefined);
  expect(stack.buffer.depth()).toEqual({ waiting: 0, deadLetters });
}

async function expectEachOnce(sent: Sent[]) {
  for (const ids of sent) {
    const attempts = await ledger.attemptsOf('7007', ids.pid);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]?.postback).toMatchObject({ outcome: 'success', hits: 1 });
    expect(attempts[0]?.redirect).toMatchObject({ outcome: 'success', hits: 1 });
  }
}

async function sendToDeadLetters(body: string) {
  const response = await fetch(stack.buffer.endpoint, {
    method: 'POST',
    headers: { 'x-amz-target': 'AmazonSQS.SendMessage', 'content-type': 'application/x-amz-json-1.0' },
    body: JSON.stringify({ QueueUrl: stack.buffer.deadLetterUrl, MessageBody: body }),
  });
  expect(response.status).toBe(200);
}

describe('buffer redrive', () => {
  it('moves every parked hit back, twice run is once moved, and the ledger counts each hit once', async () => {
    // Never written (the store answered 5xx), and written by the receiver but its answer lost (timed out).
    const neverWritten = await parkedHits(4, 'server-error');
    // The receivers send hits straight to the buffer for a while after the ledger failed one: these must try it.
    await new Promise((resolve) => setTimeout(resolve, LEDGER_PAUSE_MS + 100));
    const written = await parkedHits(3, 'lost-answer');
    const sent = [...neverWritten, ...written];
    await drainUntilParked(14);
    // Parked, yet already in the ledger: replaying these must not count them again.
    await expectEachOnce(written);
    expect(await ledger.attemptsOf('7007', neverWritten[0]?.pid as string)).toEqual([]);
    // A run stopped between sending a message and deleting it leaves it in both queues: here, in the
    // dead-letter queue twice.
    await sendToDeadLetters(stack.buffer.deadLetters()[0] as string);

    const counted = JSON.parse((await redrive('--dry-run', '--json')).stdout);
    expect(counted).toEqual({
      dryRun: true,
      deadLetterQueueUrl: stack.buffer.deadLetterUrl,
      queueUrl: stack.buffer.queueUrl,
      waiting: 15,
      inFlight: 0,
    });
    expect(stack.buffer.depth()).toEqual({ waiting: 0, deadLetters: 15 });

    const first = JSON.parse((await redrive('--json')).stdout);
    expect(first).toEqual({
      deadLetterQueueUrl: stack.buffer.deadLetterUrl,
      queueUrl: stack.buffer.queueUrl,
      moved: 15,
      failed: 0,
      notDeleted: 0,
      // SQS moves them itself (the stand-in as SQS does); the copy loop is unit-tested (dead-letters.test.ts).
      by: 'move-task',
    });
    expect(stack.buffer.depth()).toEqual({ waiting: 15, deadLetters: 0 });

    const second = await redrive();
    expect(second.stdout).toContain('moved 0 hits from');
    expect(second.stdout).toContain("(SQS's move task)");
    expect(stack.buffer.depth()).toEqual({ waiting: 15, deadLetters: 0 });

    await drainAll();
    expect(stack.buffer.depth()).toEqual({ waiting: 0, deadLetters: 0 });
    await expectEachOnce(sent);

    // Run again after the drainer: nothing to move, nothing counted again.
    expect(JSON.parse((await redrive('--json')).stdout)).toMatchObject({ moved: 0 });
    await stack.drainBuffer();
    await expectEachOnce(sent);
  }, 90_000);

  it('two redrives at once move each parked hit once between them', async () => {
    const sent = await parkedHits(12, 'server-error');
    await drainUntilParked(24);
    const [a, b] = await Promise.all([redrive('--json'), redrive('--json')]);
    const moved = [JSON.parse(a.stdout).moved, JSON.parse(b.stdout).moved];
    expect(moved[0] + moved[1]).toBe(24);
    expect(stack.buffer.depth()).toEqual({ waiting: 24, deadLetters: 0 });
    await drainAll();
    expect(stack.buffer.depth()).toEqual({ waiting: 0, deadLetters: 0 });
    await expectEachOnce(sent);
  }, 90_000);
});
