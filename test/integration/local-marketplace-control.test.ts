/** The local marketplace's control API (`/_sim`), as a developer drives it from the README: clear 4xx, never a 5xx. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalMarketplace, startLocalMarketplace } from '../../infra/local/marketplace/server';

let marketplace: LocalMarketplace;
beforeAll(async () => {
  marketplace = await startLocalMarketplace({ accessToken: 'control-token', seedSurveys: false });
});
afterAll(() => marketplace.stop());

const post = (path: string, body: unknown) =>
  fetch(`${marketplace.url}${path}`, { method: 'POST', body: JSON.stringify(body) });

describe('the local marketplace control API', () => {
  it('creates a survey priced as a number or a string, and sends its respondents', async () => {
    for (const [surveyId, cpi] of [
      [2101, 2.4],
      [2102, '2.40'],
    ] as const) {
      expect((await post('/_sim/surveys', { surveyId, cpi })).status).toBe(201);
      const sent = await post('/_sim/respondents', { surveyId, count: 2, status: 'Completed' });
      expect(sent.status).toBe(200);
      const listed = marketplace.state.transactions.filter((t) => t.surveyId === surveyId);
      expect(listed.map((t) => t.cpi ?? marketplace.state.surveys.get(surveyId)?.cpi)).toEqual([
        '2.40',
        '2.40',
      ]);
    }
  });

  it('refuses a price that is not an amount of money with a 400 naming it, creating nothing', async () => {
    for (const cpi of ['abc', -1, { amount: 1 }]) {
      const refused = await post('/_sim/surveys', { surveyId: 2103, cpi });
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ msg: expect.stringMatching(/cpi/) });
    }
    expect(marketplace.state.surveys.has(2103)).toBe(false);
  });
});
