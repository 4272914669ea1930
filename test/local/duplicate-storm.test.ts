/**
 * A duplicate storm against the local stack: many concurrent senders replaying overlapping postbacks and
 * redirects, some contradicting each other, in random order. Afterwards the ledger's counts are exact.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LedgerStore } from '../../functions/ledger/ledger-store';
import { LOCAL_RESPONDENT_ADDRESS } from '../../infra/local/api-gateway';
import type { LocalStack } from '../../infra/local/stack';
import { filledUrl } from '../support/api-events';
import { TEST_KEY_RING } from '../support/ledger';
import { startTestStack } from '../support/local-stack';

const ATTEMPTS = Number(process.env.STORM_ATTEMPTS ?? 40);
const REPLAYS = Number(process.env.STORM_REPLAYS ?? 5);
const SENDERS = Number(process.env.STORM_SENDERS ?? 16);
let stack: LocalStack;
let ledger: LedgerStore;

beforeAll(async () => {
  ({ stack, ledger } = await startTestStack());
}, 60_000);
afterAll(() => stack.stop());

describe('a duplicate storm', () => {
  it('leaves exact counts and one standing outcome per channel', async () => {
    const attempts = Array.from({ length: ATTEMPTS }, (_, i) => ({
      pid: `storm-${i}`,
      token: randomUUID(),
      contradicted: i % 4 === 0,
    }));
    const requests: { url: string; attempt: number }[] = [];
    attempts.forEach((ids, i) => {
      for (let r = 0; r < REPLAYS; r++) {
        requests.push({ url: filledUrl(TEST_KEY_RING, 'postback', '7007', 'success', ids), attempt: i });
        requests.push({ url: filledUrl(TEST_KEY_RING, 'redirect', '7007', 'success', ids), attempt: i });
        if (ids.contradicted)
          requests.push({ url: filledUrl(TEST_KEY_RING, 'postback', '7007', 'fail', ids), attempt: i });
      }
    });
    // Shuffle, then send from many senders at once.
    for (let i = requests.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [requests[i], requests[j]] = [requests[j] as (typeof requests)[0], requests[i] as (typeof requests)[0]];
    }
    let next = 0;
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: SENDERS }, async () => {
        while (next < requests.length) {
          const { url, attempt } = requests[next++] as (typeof requests)[0];
          // Each attempt's hits from its respondent's address (the local gateway's header), as in life.
          const response = await fetch(url.replace('https://hits.test', stack.apiUrl), {
            redirect: 'manual',
            headers: { [LOCAL_RESPONDENT_ADDRESS]: `10.0.${attempt >> 8}.${attempt & 255}` },
          });
          await response.arrayBuffer();
          statuses.push(response.status);
        }
      }),
    );
    expect(statuses.every((s) => s === 200 || s === 302)).toBe(true);

    for (const ids of attempts) {
      const [attempt] = await ledger.attemptsOf('7007', ids.pid);
      expect(attempt?.redirect).toMatchObject({ outcome: 'success', hits: REPLAYS });
      const postbacks = attempt?.postback?.sightings.reduce((sum, s) => sum + s.hits, 0);
      expect(postbacks).toBe(ids.contradicted ? 2 * REPLAYS : REPLAYS);
      expect(attempt?.postback?.sightings.map((s) => s.outcome).sort()).toEqual(
        ids.contradicted ? ['fail', 'success'] : ['success'],
      );
      expect(attempt?.conflict).toBe(ids.contradicted);
    }
  }, 120_000);
});
