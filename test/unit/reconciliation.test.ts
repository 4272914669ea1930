/**
 * Classification and windows, on hand-built attempts and transactions: every verdict kind, matching by token
 * and by pid, midnight, daylight-saving days and late finishers, and exact sums.
 */
import { describe, expect, it } from 'vitest';
import { attemptFromItem, type StoredDaySummary } from '../../functions/ledger/ledger-store';
import { CPI_HISTORY_LIMIT, pricedAt } from '../../functions/ledger/survey-registry';
import { distinctTransactions, type Transaction } from '../../functions/marketplace/marketplace-records';
import {
  formatPacificTime,
  pacificWallToUtc,
  parsePacificTime,
} from '../../functions/marketplace/pacific-time';
import type { Attempt } from '../../functions/receiving/attempt';
import {
  checkRegardless,
  freshDaysOf,
  lastCheckedAt,
  sameFigures,
} from '../../functions/reconciliation/recheck-policy';
import { transactionsDigest } from '../../functions/reconciliation/transactions-digest';
import { verdictUnchanged } from '../../functions/reconciliation/verdict-equality';
import {
  ATTEMPT_LEAD_MS,
  type AttemptVerdict,
  attemptKeysToRead,
  attemptRange,
  classify,
  type DaySummary,
  fetchRange,
  impliedDay,
  impliedMatch,
  lookbackRange,
  needsLookback,
  pacificDays,
  pricesAt,
  reconcileSurveyWindow,
} from '../../functions/reconciliation/verdict-rules';

const at = (iso: string) => parsePacificTime(formatPacificTime(new Date(iso)));

function transaction(
  token: string,
  status: string,
  clicked: string,
  extra: Partial<Transaction> = {},
): Transaction {
  return {
    token,
    pid: `p-${token}`,
    status,
    cpi: status === 'Completed' ? '1.25' : '0.00',
    verifyToken: 'Pending',
    clickedAt: at(clicked),
    ...(status === 'Completed' ? { completedAt: at(clicked) } : {}),
    ...extra,
  };
}

/** An attempt as the ledger holds it, from the channel outcomes seen. */
function attempt(
  token: string,
  seen: string,
  channels: { redirect?: string; postback?: string },
  pid = `p-${token}`,
): Attempt {
  const item: Record<string, unknown> = { surveyId: '1', pid, token, firstSeenAt: seen, lastSeenAt: seen };
  for (const [channel, outcome] of Object.entries(channels)) {
    item[`${channel}Outcome`] = outcome;
    item[`${channel}_${outcome}_at`] = seen;
    item[`${channel}_${outcome}_hits`] = 1;
  }
  return attemptFromItem(item);
}

const DAY = '2026-11-21';

/** An attempt whose success postback came at `seen`, judged on DAY as `judged` says (verdict, detail, marketplace). */
const postbackJudged = (token: string, seen: string, judged: Record<string, unknown>): Attempt =>
  attemptFromItem({
    surveyId: '1',
    pid: `p-${token}`,
    token,
    firstSeenAt: seen,
    lastSeenAt: seen,
    postbackOutcome: 'success',
    postback_success_at: seen,
    postback_success_hits: 1,
    verdictDay: DAY,
    ...judged,
  });
const noon = '2026-11-21T20:00:00.000Z'; // 12:00 PST

describe('classification', () => {
  it.each([
    [
      'a postback-confirmed complete the marketplace counts',
      transaction('a', 'Completed', noon),
      { postback: 'success', redirect: 'success' },
      'matched',
    ],
    [
      'a complete only a redirect reported',
      transaction('a', 'Completed', noon),
      { redirect: 'success' },
      'complete_not_received',
    ],
    ['a complete nothing reported', transaction('a', 'Completed', noon), undefined, 'complete_not_received'],
    [
      'a complete the marketplace invalidated and re-filed as a termination',
      transaction('a', 'Quality Termination', noon, { verifyToken: 'Invalid', cpi: '0.00' }),
      { postback: 'success' },
      'invalidated',
    ],
    [
      'a complete the marketplace invalidated',
      transaction('a', 'Completed', noon, { verifyToken: 'Invalid' }),
      { postback: 'success' },
      'invalidated',
    ],
    [
      'a postback complete the marketplace files as a termination',
      transaction('a', 'Quality Termination', noon),
      { postback: 'success' },
      'complete_not_paid',
    ],
    [
      'a success redirect alone the marketplace files as a termination (a claim)',
      transaction('a', 'Failed', noon),
      { redirect: 'success' },
      'contradicted_claim',
    ],
    ['a complete here with no transaction', undefined, { postback: 'success' }, 'complete_not_paid'],
    [
      'a success redirect alone, with no postback and no transaction (anyone can send one)',
      undefined,
      { redirect: 'success' },
      'unverified_claim',
    ],
    [
      'a success redirect the fail postback and the transaction contradict',
      transaction('a', 'Failed', noon),
      { redirect: 'success', postback: 'fail' },
      'contradicted_claim',
    ],
    [
      'a success redirect the fail postback contradicts, with no transaction',
      undefined,
      { redirect: 'success', postback: 'fail' },
      'contradicted_claim',
    ],
    [
      'a success redirect with a fail postback for a complete the marketplace counts',
      transaction('a', 'Completed', noon),
      { redirect: 'success', postback: 'fail' },
      'complete_not_received',
    ],
    [
      'over quota here, quality termination there',
      transaction('a', 'Quality Termination', noon),
      { redirect: 'overquota', postback: 'fail' },
      'status_mismatch',
    ],
    [
      'a fail postback for any non-complete',
      transaction('a', 'Over Quota', noon),
      { postback: 'fail' },
      'matched',
    ],
    [
      'the redirect the status implies',
      transaction('a', 'Pre Survey Termination', noon),
      { redirect: 'termination' },
      'matched',
    ],
    ['a non-complete never heard of here', transaction('a', 'Over Quota', noon), undefined, 'not_received'],
    [
      'a non-complete here the marketplace does not list',
      undefined,
      { redirect: 'fail' },
      'not_in_marketplace',
    ],
  ] as const)('%s: %s', (_, t, channels, kind) => {
    expect(classify(t, channels ? attempt('a', noon, channels) : undefined).kind).toBe(kind);
  });

  it("follows the marketplace's own later postback where its transaction list agrees with it, and says so", () => {
    const later = '2026-11-21T20:05:00.000Z';
    /** An attempt whose postback said `first`, then `then` (a correction after a status flipped). */
    const corrected = (first: string, then: string) =>
      attemptFromItem({
        surveyId: '1',
        pid: 'p-a',
        token: 'a',
        firstSeenAt: noon,
        lastSeenAt: later,
        postbackOutcome: first,
        [`postback_${first}_at`]: noon,
        [`postback_${first}_hits`]: 1,
        [`postback_${then}_at`]: later,
        [`postback_${then}_hits`]: 1,
      });
    // Fail, then success, and the list says Completed: the success was received here (it is no unreceived complete).
    expect(classify(transaction('a', 'Completed', noon), corrected('fail', 'success'), '1.25')).toMatchObject(
      {
        kind: 'matched',
        detail: { postback: 'fail', postbackCorrectedTo: 'success', conflict: true },
      },
    );
    // Success, then fail, and the list says Failed: a complete reversed by the marketplace itself, not one to chase.
    expect(classify(transaction('a', 'Failed', noon), corrected('success', 'fail'), '1.25')).toMatchObject({
      kind: 'invalidated',
      detail: {
        postback: 'success',
        postbackCorrectedTo: 'fail',
        receivedHere: 'postback',
        reversedCpi: '1.25',
      },
    });
    // The day's figures count the corrected success as a complete here: both sides one complete, nothing unexplained.
    const day = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [transaction('a', 'Completed', noon)],
      attempts: [corrected('fail', 'success')],
    }).summaries[0];
    expect(day?.verdicts).toEqual({ matched: 1 });
    expect(day?.here).toMatchObject({ postbackCompletes: 1, nonCompletes: 0 });
    expect(day?.marketplace.completes).toBe(1);
    // A correction to a fail the list does not agree with changes nothing: the list pays the complete.
    expect(classify(transaction('a', 'Completed', noon), corrected('success', 'fail')).kind).toBe('matched');
    // A correction to a success the list does not show paid, or no row at all: the server's latest word is a signed
    // complete (the panel may have credited it), one to chase, as a success first would be; whichever order the two
    // postbacks came in, the money is told.
    for (const [row, success] of [
      [transaction('a', 'Failed', noon), corrected('fail', 'success')],
      [undefined, corrected('fail', 'success')],
    ] as const)
      expect(classify(row, success, '1.25')).toMatchObject({
        kind: 'complete_not_paid',
        detail: {
          postback: 'fail',
          postbackCorrectedTo: 'success',
          evidence: 'postback',
          claimedCpi: '1.25',
        },
      });
    expect(classify(undefined, corrected('success', 'fail'), '1.25').kind).toBe('complete_not_paid');
    expect(classify(transaction('a', 'Failed', noon), corrected('success', 'fail'), '1.25').kind).toBe(
      'invalidated',
    );
  });

  it('says whether a success redirect arrived for a complete whose postback did not', () => {
    expect(
      classify(transaction('a', 'Completed', noon), attempt('a', noon, { redirect: 'success' })).detail,
    ).toMatchObject({
      successRedirect: true,
      attemptHere: true,
    });
    expect(classify(transaction('a', 'Completed', noon), undefined).detail).toMatchObject({
      successRedirect: false,
      attemptHere: false,
    });
  });

  it('makes a complete not paid of a postback only: a success redirect the marketplace files otherwise is a claim', () => {
    expect(classify(undefined, attempt('a', noon, { postback: 'success' })).detail).toMatchObject({
      evidence: 'postback',
      marketplaceStatus: 'missing',
    });
    expect(
      classify(transaction('a', 'Failed', noon), attempt('a', noon, { postback: 'success' })),
    ).toMatchObject({
      kind: 'complete_not_paid',
      detail: { evidence: 'postback', marketplaceStatus: 'Failed' },
    });
    // The respondent terminated at the marketplace types the success URL (or a preview bot fetches it): no money.
    expect(
      classify(transaction('a', 'Failed', noon), attempt('a', noon, { redirect: 'success' })),
    ).toMatchObject({
      kind: 'contradicted_claim',
      detail: { evidence: 'redirect', marketplaceStatus: 'Failed' },
    });
  });

  it('gives every reversal the price it took, whether the row stays Completed or is re-filed', () => {
    const invalid = (status: string, cpi: string) =>
      transaction('a', status, noon, { cpi, verifyToken: 'Invalid' });
    const postback = attempt('a', noon, { postback: 'success' });
    // A complete turned Invalid whose row now shows 0: the survey's price at the click, else nothing to show.
    expect(classify(invalid('Completed', '0'), postback, '1.50')).toMatchObject({
      kind: 'invalidated',
      detail: { reversedCpi: '1.50' },
    });
    // The row's own price while it still shows one: what owed counted, whatever the survey's price.
    expect(classify(invalid('Completed', '1.25'), postback).detail).toMatchObject({ reversedCpi: '1.25' });
    expect(classify(invalid('Completed', '2.00'), postback, '1.50').detail).toMatchObject({
      reversedCpi: '2.00',
    });
    expect(classify(invalid('Completed', '0'), postback).detail.reversedCpi).toBeUndefined();
    expect(classify(invalid('Quality Termination', '0'), postback, '1.50').detail).toMatchObject({
      reversedCpi: '1.50',
    });
  });

  it("keeps the price a reversal took on every run after, and re-filed rows never take their new status's price", () => {
    const postback = attempt('a', noon, { postback: 'success' });
    // What a run stores on the attempt: its verdict and the row as it read it.
    const judgedBy = (seen: Attempt, row: ReturnType<typeof transaction>, price: string): Attempt => {
      const { kind, detail } = classify(row, seen, price);
      return {
        ...seen,
        reconciliation: {
          verdict: kind,
          day: DAY,
          detail,
          at: noon,
          marketplace: { status: row.status, verifyToken: row.verifyToken ?? 'none', cpi: row.cpi },
          history: [],
        },
      };
    };
    for (const reversedRow of [
      transaction('a', 'Completed', noon, { cpi: '0', verifyToken: 'Invalid' }),
      transaction('a', 'Quality Termination', noon, { cpi: '0.25', verifyToken: 'Invalid' }),
    ]) {
      // Run 1: pending at the buyer's price; run 2: reviewed Invalid; runs 3 and 4: nothing changes.
      const pending = judgedBy(
        postback,
        transaction('a', 'Completed', noon, { cpi: '1.75', verifyToken: 'Pending' }),
        '1.50',
      );
      let seen = judgedBy(pending, reversedRow, '1.50');
      for (let run = 2; run <= 4; run++) {
        expect(seen.reconciliation, `${reversedRow.status}, run ${run}`).toMatchObject({
          verdict: 'invalidated',
          detail: { reversedCpi: '1.75' },
        });
        seen = judgedBy(seen, reversedRow, '1.50');
      }
    }
  });

  it('a complete that never arrived here, re-filed after its review, is a reversal once it was listed as a complete', () => {
    const refiled = transaction('a', 'Quality Termination', noon, { cpi: '0', verifyToken: 'Invalid' });
    // The item reconciliation made for the transaction when it was listed Completed (owed, never received here).
    const listed = (verdict: string, status: string): Attempt => ({
      ...attemptFromItem({ surveyId: '1', pid: 'p-a', token: 'a' }),
      reconciliation: {
        verdict,
        day: DAY,
        detail: {},
        at: noon,
        marketplace: { status, verifyToken: 'Valid', cpi: '1.25' },
        history: [],
      },
    });
    for (const item of [
      listed('complete_not_received', 'Completed'),
      listed('invalidated', 'Quality Termination'),
    ])
      expect(classify(refiled, item, '1.25')).toMatchObject({
        kind: 'invalidated',
        detail: { receivedHere: 'nothing', reversedCpi: '1.25' },
      });
    // Listed as a complete at another price than the survey's: reversed at the price owed counted it at.
    const listedAt = (cpi: string): Attempt => {
      const item = listed('complete_not_received', 'Completed');
      const prior = item.reconciliation as NonNullable<Attempt['reconciliation']>;
      return {
        ...item,
        reconciliation: { ...prior, marketplace: { ...prior.marketplace, status: 'Completed', cpi } },
      };
    };
    expect(classify(refiled, listedAt('1.75'), '1.25').detail).toMatchObject({ reversedCpi: '1.75' });
    expect(classify(refiled, listedAt('0'), '1.25').detail).toMatchObject({ reversedCpi: '1.25' });
    // Never listed as a complete: a termination like any other.
    expect(classify(refiled, listed('not_received', 'Quality Termination')).kind).toBe('not_received');
    expect(classify(refiled, undefined).kind).toBe('not_received');
  });

  it("a complete re-filed under another status without the buyer's Invalid is a reversal once listed as a complete", () => {
    // Statuses change after the fact ("adjusted to terminate") with the review left Valid, Pending or blank.
    const listedAsComplete = (channels?: { postback?: string; redirect?: string }): Attempt => ({
      ...(channels
        ? attempt('a', noon, channels)
        : attemptFromItem({ surveyId: '1', pid: 'p-a', token: 'a' })),
      reconciliation: {
        verdict: channels?.postback === 'success' ? 'matched' : 'complete_not_received',
        day: DAY,
        detail: {},
        at: noon,
        marketplace: { status: 'Completed', verifyToken: 'Valid', cpi: '1.75', clickedAt: noon },
        history: [],
      },
    });
    for (const verifyToken of ['Valid', 'Pending', undefined])
      for (const channels of [undefined, { postback: 'success' }, { redirect: 'success' }]) {
        const refiled = transaction('a', 'Failed', noon, {
          cpi: '0',
          ...(verifyToken ? { verifyToken } : {}),
        });
        expect(
          classify(refiled, listedAsComplete(channels), '1.25'),
          `${verifyToken} ${JSON.stringify(channels)}`,
        ).toMatchObject({
          kind: 'invalidated',
          detail: { marketplaceStatus: 'Failed', reversedCpi: '1.75' },
        });
        // Never listed as a complete here: as before (a postback is a complete not paid, a redirect a claim).
        const fresh = channels && attempt('a', noon, channels);
        const asBefore = channels?.postback
          ? 'complete_not_paid'
          : channels?.redirect
            ? 'contradicted_claim'
            : 'not_received';
        expect(classify(refiled, fresh, '1.25').kind).toBe(asBefore);
        // Listed as a complete, but another row (another click): an earlier pairing by pid with another attempt's
        // row, its own not listed yet. Not this row's reversal.
        const paired = listedAsComplete(channels);
        const prior = paired.reconciliation as NonNullable<Attempt['reconciliation']>;
        const elsewhere: Attempt = {
          ...paired,
          reconciliation: {
            ...prior,
            marketplace: {
              status: 'Completed',
              verifyToken: 'Valid',
              cpi: '1.75',
              clickedAt: '2026-11-21T19:00:00.000Z',
            },
          },
        };
        expect(classify(refiled, channels ? elsewhere : undefined, '1.25').kind).toBe(asBefore);
      }
  });

  it('lists a transaction under a status it does not know as money, in no owed figure, whatever arrived here', () => {
    const adjusted = transaction('a', 'Adjusted Complete', noon, { cpi: '1.50', verifyToken: 'Valid' });
    for (const channels of [
      undefined,
      { postback: 'success' },
      { redirect: 'success' },
      { redirect: 'fail' },
    ])
      expect(
        classify(adjusted, channels && attempt('a', noon, channels)),
        JSON.stringify(channels),
      ).toMatchObject({
        kind: 'unknown_status',
        detail: { marketplaceStatus: 'Adjusted Complete', verifyToken: 'Valid', cpi: '1.50' },
      });
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [adjusted, transaction('b', 'Completed', noon, { verifyToken: 'Valid' })],
      attempts: [attempt('b', noon, { postback: 'success' })],
    });
    expect(result.summaries[0]?.verdicts).toEqual({ unknown_status: 1, matched: 1 });
    expect(result.summaries[0]?.marketplace).toMatchObject({ owed: '1.25', completes: 1 });
    expect(result.summaries[0]?.marketplace.byStatus).toMatchObject({ 'Adjusted Complete': 1 });
  });

  it('lists a complete under a review it does not know as money, in neither owed nor pending, whatever arrived here', () => {
    for (const review of ['Rejected', 'Approved', 'In Valid', 'Reversed']) {
      const reviewed = transaction('a', 'Completed', noon, { cpi: '2.00', verifyToken: review });
      for (const channels of [undefined, { postback: 'success' }, { redirect: 'success' }])
        expect(classify(reviewed, channels && attempt('a', noon, channels)), review).toMatchObject({
          kind: 'unknown_status',
          detail: { marketplaceStatus: 'Completed', verifyToken: review, cpi: '2.00' },
        });
      const [summary] = reconcileSurveyWindow({
        surveyId: '1',
        days: [DAY],
        transactions: [
          reviewed,
          transaction('b', 'Completed', noon, { verifyToken: 'Valid' }),
          transaction('c', 'Completed', noon, { verifyToken: ' pending ' }),
          transaction('d', 'Completed', noon),
        ],
        attempts: ['a', 'b', 'c', 'd'].map((token) => attempt(token, noon, { postback: 'success' })),
      }).summaries;
      expect(summary?.verdicts, review).toEqual({ unknown_status: 1, matched: 3 });
      expect(summary?.marketplace, review).toMatchObject({
        completes: 4,
        validCompletes: 1,
        pendingCompletes: 2,
        invalidCompletes: 0,
        owed: '1.25',
        pending: '2.50',
      });
    }
    // The three the marketplace writes, in any case, and none yet, are known.
    for (const review of ['Pending', 'valid', 'INVALID', undefined])
      expect(
        classify(
          transaction('a', 'Completed', noon, { verifyToken: review }),
          attempt('a', noon, { postback: 'success' }),
        ).kind,
      ).not.toBe('unknown_status');
  });

  it('keeps, of two copies of a token, the one under a review it does not know, however cased: it earns nothing here', () => {
    for (const unknown of ['Rejected', 'rejected', 'Voided']) {
      const copy = (verifyToken: string) => transaction('t', 'Completed', noon, { cpi: '1.50', verifyToken });
      const { rows } = distinctTransactions([copy('Valid'), copy(unknown)]);
      expect(
        rows.map((t) => t.verifyToken),
        unknown,
      ).toEqual([unknown]);
      const [summary] = reconcileSurveyWindow({
        surveyId: '1',
        days: [DAY],
        transactions: rows,
        attempts: [],
      }).summaries;
      expect(summary?.marketplace.owed, unknown).toBe('0.00');
    }
  });

  it('pairs by pid a row placed on its day by a listing (its start just after midnight) as one carrying its click', () => {
    // An earlier attempt of the pid signed a complete at 10 am that is not listed; the pid clicks in again at
    // 11:59:40 pm, nothing arrives for it, and the marketplace lists that one as a complete.
    const early = attempt('t1', '2026-11-21T18:00:00.000Z', { postback: 'success' }, 'P');
    const row = (extra: Partial<Transaction>): Transaction => ({
      ...transaction('t2', 'Completed', noon, { verifyToken: 'Valid' }),
      pid: 'P',
      clickedAt: undefined,
      startedAt: at('2026-11-22T08:00:05.000Z'),
      completedAt: at('2026-11-22T08:20:00.000Z'),
      ...extra,
    });
    const kinds = (t: Transaction) =>
      reconcileSurveyWindow({ surveyId: '1', days: [DAY], transactions: [t], attempts: [early] })
        .verdicts.map((v) => `${v.token}:${v.verdict.kind}`)
        .sort();
    const withClick = kinds(row({ clickedAt: at('2026-11-22T07:59:40.000Z') }));
    expect(withClick).toEqual(['t1:complete_not_paid', 't2:complete_not_received']);
    expect(kinds(row({ createdWithin: '2026-11-22T07:59:59.999Z' }))).toEqual(withClick);
  });

  it("names in the day's summary the tokens of rows judged with an attempt under another key, the first 64, and counts them all", () => {
    const window = (n: number) =>
      reconcileSurveyWindow({
        surveyId: '1',
        days: [DAY],
        transactions: Array.from({ length: n }, (_, i) =>
          transaction(`t${String(i).padStart(3, '0')}`, 'Completed', noon),
        ),
        // The pid spelt otherwise (matched by token), one of them under its own key.
        attempts: Array.from({ length: n }, (_, i) => {
          const token = `t${String(i).padStart(3, '0')}`;
          return attempt(token, noon, { postback: 'success' }, i === 0 ? `p-${token}` : `P-${token}`);
        }),
      }).summaries[0];
    expect(window(1)?.crossKeyed).toBeUndefined();
    expect(window(3)?.crossKeyed).toEqual({ tokens: ['t001', 't002'], count: 2 });
    const many = window(70)?.crossKeyed;
    expect(many?.count).toBe(69);
    expect(many?.tokens).toHaveLength(64);
    expect(many?.tokens[0]).toBe('t001');
  });

  it('names the price a complete re-filed at 0 was reversed from, when one is known', () => {
    const paid = attempt('a', noon, { postback: 'success' });
    const refiled = transaction('a', 'Quality Termination', noon, { verifyToken: 'Invalid', cpi: '0.00' });
    expect(classify(refiled, paid, '1.50').detail).toMatchObject({ reversedCpi: '1.50' });
    expect(classify(refiled, paid).detail).not.toHaveProperty('reversedCpi');
  });

  it("names what a complete not paid was worth: the survey's price at the click", () => {
    const paid = attempt('a', noon, { postback: 'success' });
    expect(classify(undefined, paid, '1.50').detail).toMatchObject({ claimedCpi: '1.50' });
    // Around a price change the prices a row may carry come the one in force at the click first (pricesAt).
    expect(classify(undefined, paid, ['1.75', '1.50']).detail).toMatchObject({ claimedCpi: '1.75' });
    const refiled = transaction('a', 'Failed', noon, { cpi: '0.00' });
    expect(classify(refiled, paid, '1.50')).toMatchObject({
      kind: 'complete_not_paid',
      detail: { claimedCpi: '1.50', marketplaceStatus: 'Failed' },
    });
    expect(classify(undefined, paid).detail).not.toHaveProperty('claimedCpi');
  });

  it('names the price a complete not received was listed off, so what it was paid short is counted', () => {
    const short = transaction('a', 'Completed', noon, { cpi: '1.00' });
    expect(classify(short, undefined, '1.50')).toMatchObject({
      kind: 'complete_not_received',
      detail: { expectedCpi: '1.50' },
    });
    expect(classify(short, undefined, ['1.75', '1.50']).detail).toMatchObject({
      expectedCpi: '1.75 or 1.50',
    });
    expect(classify(short, undefined, ['1.00', '1.50']).detail).not.toHaveProperty('expectedCpi');
    expect(classify(short, undefined).detail).not.toHaveProperty('expectedCpi');
  });

  it('checks nothing against a survey price of 0 (revenue share, or none set): no mismatch, no claimed worth', () => {
    const paid = attempt('a', noon, { postback: 'success' });
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      expectedCpi: '0.00',
      transactions: [transaction('a', 'Completed', noon, { cpi: '0.85' })],
      attempts: [paid, attempt('b', noon, { postback: 'success' })],
    });
    expect(result.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.detail.claimedCpi])).toEqual([
      ['a', 'matched', undefined],
      ['b', 'complete_not_paid', undefined],
    ]);
  });

  it('checks the amount of a matched complete where the CPI is known, exactly', () => {
    const t = transaction('a', 'Completed', noon, { cpi: '1.30' });
    const a = attempt('a', noon, { postback: 'success' });
    expect(classify(t, a, '1.25')).toMatchObject({
      kind: 'cpi_mismatch',
      detail: { expectedCpi: '1.25', cpi: '1.30' },
    });
    expect(classify(t, a, '1.3').kind).toBe('matched');
    expect(classify(t, a).kind).toBe('matched');
  });
});

describe('prices over time', () => {
  const history = [
    { cpi: '1.50', since: '' },
    { cpi: '1.75', since: '2026-11-21T12:00:00.000Z' },
    { cpi: '2.00', since: '2026-11-21T18:00:00.000Z' },
  ];
  it.each([
    ['long before any change', '2026-11-20T12:00:00.000Z', ['1.50']],
    ['within the hour before a change: either', '2026-11-21T11:30:00.000Z', ['1.50', '1.75']],
    [
      'within the hour after a change (seen late): either, the one in force first',
      '2026-11-21T12:45:00.000Z',
      ['1.75', '1.50'],
    ],
    ['between changes', '2026-11-21T15:00:00.000Z', ['1.75']],
    ['after the last change', '2026-11-22T15:00:00.000Z', ['2.00']],
  ])('a click %s carries the price then', (_, clicked, expected) => {
    expect(pricesAt(history, '2.00', clicked)).toEqual(expected);
  });

  it('a complete earned the price in force at its own click, or when it was seen if its row was re-filed later', () => {
    // 1.50 until 20:00 Pacific on the 21st, 2.00 since.
    const rise = [
      { cpi: '1.50', since: '' },
      { cpi: '2.00', since: '2026-11-22T04:00:00.000Z' },
    ];
    const window = { surveyId: '1', expectedCpi: '2.00', cpiHistory: rise };
    // Arrived at 11:10 on the 21st; its row re-filed onto 09:00 on the 22nd and listed at 1.00: short by 0.50 of
    // what it earned, not by 1.00 of the price of the day it was moved onto.
    const early = attempt('a', '2026-11-21T19:10:00.000Z', { postback: 'success' });
    const moved = reconcileSurveyWindow({
      ...window,
      days: ['2026-11-22'],
      transactions: [transaction('a', 'Completed', '2026-11-22T17:00:00.000Z', { cpi: '1.00' })],
      attempts: [early],
    });
    expect(moved.verdicts[0]?.verdict).toMatchObject({
      kind: 'cpi_mismatch',
      detail: { expectedCpi: '1.50 or 2.00', cpi: '1.00' },
    });
    // Its postback came at 21:00, after the rise; the row an earlier run saw (clicked at 11:00) is listed no more:
    // a complete not paid worth 1.50, the price at its click, not 2.00 at its postback.
    const late = postbackJudged('b', '2026-11-22T05:00:00.000Z', {
      verdict: 'matched',
      marketplace: { status: 'Completed', cpi: '1.50', clickedAt: '2026-11-21T19:00:00.000Z' },
    });
    const gone = reconcileSurveyWindow({ ...window, days: [DAY], transactions: [], attempts: [late] });
    expect(gone.verdicts[0]?.verdict).toMatchObject({
      kind: 'complete_not_paid',
      detail: { claimedCpi: '1.50' },
    });
    // The next run, from the verdict as stored (no row: the click kept in its detail): the same worth.
    const { detail } = gone.verdicts[0]?.verdict ?? { detail: {} };
    const stored = postbackJudged('b', '2026-11-22T05:00:00.000Z', {
      verdict: 'complete_not_paid',
      verdictDetail: detail,
    });
    for (let run = 0; run < 3; run++)
      expect(
        reconcileSurveyWindow({ ...window, days: [DAY], transactions: [], attempts: [stored] }).verdicts[0]
          ?.verdict.detail.claimedCpi,
      ).toBe('1.50');
    // A click an earlier run paired it with by pid (the respondent's failed try the day before the rise) widens what
    // its own row may carry, never sets the price it earned: its own click after the rise, 2.00.
    const paired = postbackJudged('c', '2026-11-22T18:10:00.000Z', {
      verdict: 'complete_not_paid',
      marketplace: { status: 'Failed', cpi: '0.00', clickedAt: '2026-11-21T18:00:00.000Z' },
    });
    const own = reconcileSurveyWindow({
      ...window,
      days: ['2026-11-22'],
      transactions: [transaction('c', 'Completed', '2026-11-22T18:00:00.000Z', { cpi: '1.00' })],
      attempts: [paired],
    });
    expect(own.verdicts[0]?.verdict.detail.expectedCpi).toBe('2.00 or 1.50');
  });

  it('checks no price for a click when the price in force then was 0, whatever the price beside it', () => {
    const zeroThenPriced = [
      { cpi: '0', since: '' },
      { cpi: '2.00', since: '2026-11-21T20:00:00.000Z' },
    ];
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      expectedCpi: '2.00',
      cpiHistory: zeroThenPriced,
      transactions: [transaction('z', 'Completed', '2026-11-21T19:40:00.000Z', { cpi: '0.00' })],
      attempts: [attempt('z', '2026-11-21T19:50:00.000Z', { postback: 'success' })],
    });
    expect(result.verdicts[0]?.verdict.kind).toBe('matched');
  });

  it('keep every price a click still judged may carry: changes every few hours for days, not the last twenty', () => {
    type Priced = ReturnType<typeof pricedAt>;
    const start = Date.parse('2026-09-01T00:00:00.000Z');
    const hoursOn = (hours: number) => new Date(start + hours * 3_600_000).toISOString();
    let registration: Priced = { expectedCpi: '1.00', cpiHistory: [{ cpi: '1.00', since: '' }] };
    const change = (hours: number, cpi: string) => {
      registration = pricedAt(registration, cpi, hoursOn(hours));
    };
    // Every six hours for a week and a half.
    for (let n = 1; n <= 30; n++) change(6 * n, (1 + n / 100).toFixed(2));
    expect(registration.cpiHistory).toHaveLength(31);
    // A click 15 hours in was at 1.02, still known.
    expect(pricesAt(registration.cpiHistory, registration.expectedCpi, hoursOn(15))).toEqual(['1.02']);
    // Seventy days after the first day, the prices no click still judged can carry go; the one in force then stays.
    change(71 * 24, '2.00');
    expect(registration.cpiHistory?.[0]).toEqual({ cpi: '1.04', since: hoursOn(24) });
    expect(registration.cpiHistory).toHaveLength(28);
    // However often it changes, the history stays bounded.
    for (let n = 1; n <= CPI_HISTORY_LIMIT + 10; n++) change(71 * 24 + n, (2 + (n % 2) / 100).toFixed(2));
    expect(registration.cpiHistory).toHaveLength(CPI_HISTORY_LIMIT);
  });

  it('without a history, the price known; before any known price, none checked', () => {
    expect(pricesAt(undefined, '1.25', noon)).toEqual(['1.25']);
    expect(pricesAt(undefined, undefined, noon)).toBeUndefined();
    expect(pricesAt([{ cpi: '1.25', since: '2026-11-22T00:00:00.000Z' }], '1.25', noon)).toBeUndefined();
  });
});

describe('windows', () => {
  it('fetch one Pacific day more on each side', () => {
    expect(fetchRange(['2026-11-21', '2026-11-22'])).toEqual({
      startDate: '2026-11-20',
      endDate: '2026-11-23',
      from: new Date('2026-11-20T08:00:00.000Z'),
      to: new Date('2026-11-24T08:00:00.000Z'),
    });
    expect(pacificDays('2026-10-31', '2026-11-02')).toEqual(['2026-10-31', '2026-11-01', '2026-11-02']);
  });

  it('read attempts from two hours before the first day (clock skew), not the whole day before, to the day after', () => {
    // Pacific standard time: 2026-11-21 starts at 08:00 UTC.
    expect(attemptRange(['2026-11-21', '2026-11-22'])).toEqual({
      from: new Date('2026-11-21T06:00:00.000Z'),
      to: new Date('2026-11-24T08:00:00.000Z'),
    });
    // Across the change to daylight saving time the margin stays two hours of real time.
    expect(attemptRange(['2026-03-08']).from).toEqual(new Date('2026-03-08T06:00:00.000Z'));
    expect(attemptRange(['2026-03-09']).from).toEqual(new Date('2026-03-09T05:00:00.000Z'));
    expect(ATTEMPT_LEAD_MS).toBe(7_200_000);
  });

  it('an attempt that arrived under another pid takes the token before the item an earlier run made for it, which is retired', () => {
    // The transaction judged missing earlier: reconciliation made an item under its pid, nothing arrived for it.
    const made = attemptFromItem({
      surveyId: '1',
      pid: 'p-t',
      token: 't',
      verdict: 'complete_not_received',
      verdictDay: DAY,
      marketplace: { status: 'Completed', cpi: '1.25', clickedAt: noon },
    });
    const arrived = attempt('t', noon, { postback: 'success' }, 'P-T');
    for (const attempts of [
      [made, arrived],
      [arrived, made],
    ]) {
      const result = reconcileSurveyWindow({
        surveyId: '1',
        days: [DAY],
        transactions: [transaction('t', 'Completed', noon)],
        attempts,
      });
      expect(result.verdicts.map((v) => [v.pid, v.verdict.kind, v.verdict.matchedBy])).toEqual([
        ['p-t', 'matched', 'token'],
      ]);
      expect(result.verdicts[0]?.attempt).toBe(arrived);
      expect(result.superseded).toEqual([made]);
      expect(result.summaries[0]?.verdicts).toEqual({ matched: 1 });
    }
    // Without the attempt that arrived, the item stands for the transaction as before.
    const alone = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [transaction('t', 'Completed', noon)],
      attempts: [made],
    });
    expect(alone.verdicts.map((v) => v.verdict.kind)).toEqual(['complete_not_received']);
    expect(alone.superseded).toEqual([]);
    // Listed no more: the complete the owed figure counted is reversed, at the price it was listed at, and the
    // item is kept for it (not withdrawn).
    const gone = reconcileSurveyWindow({ surveyId: '1', days: [DAY], transactions: [], attempts: [made] });
    expect(gone.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.day])).toEqual([
      ['t', 'invalidated', DAY],
    ]);
    expect(gone.verdicts[0]?.verdict.detail).toMatchObject({
      marketplaceStatus: 'missing',
      receivedHere: 'nothing',
      reversedCpi: '1.25',
      clickedAt: noon,
    });
    expect(gone.withdrawn).toEqual([]);
    expect(gone.summaries[0]?.verdicts).toEqual({ invalidated: 1 });
    // The next run, from the item as judged: the same verdict, on the same day, at the same price.
    const judged = attemptFromItem({
      surveyId: '1',
      pid: 'p-t',
      token: 't',
      verdict: 'invalidated',
      verdictDay: DAY,
      verdictDetail: { reversedCpi: '1.25', clickedAt: noon },
    });
    const again = reconcileSurveyWindow({ surveyId: '1', days: [DAY], transactions: [], attempts: [judged] });
    expect(again.verdicts.map((v) => [v.verdict.kind, v.verdict.day, v.verdict.detail.reversedCpi])).toEqual([
      ['invalidated', DAY, '1.25'],
    ]);
    // Its token arrived here under another spelling of the pid while the row is listed no more: that attempt is
    // the token's complete not paid, and the item goes (one complete, not a reversal beside it).
    const heard = attemptFromItem({
      surveyId: '1',
      pid: 'P-T',
      token: 't',
      firstSeenAt: '2026-11-21T20:10:00.000Z',
      lastSeenAt: '2026-11-21T20:10:00.000Z',
      postbackOutcome: 'success',
      postback_success_at: '2026-11-21T20:10:00.000Z',
      postback_success_hits: 1,
    });
    const spelt = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [],
      attempts: [made, heard],
      expectedCpi: '1.25',
    });
    expect(spelt.verdicts.map((v) => [v.pid, v.verdict.kind])).toEqual([['P-T', 'complete_not_paid']]);
    expect(spelt.withdrawn).toEqual([made]);
    // A row never listed as a complete (a termination nothing arrived for) is withdrawn as before.
    const terminated = attemptFromItem({
      surveyId: '1',
      pid: 'p-q',
      token: 'q',
      verdict: 'not_received',
      verdictDay: DAY,
      marketplace: { status: 'Over Quota', cpi: '0', clickedAt: noon },
    });
    const dropped = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [],
      attempts: [terminated],
    });
    expect(dropped.verdicts).toEqual([]);
    expect(dropped.withdrawn).toEqual([terminated]);
  });

  it("the marketplace's postback takes the token before a redirect with the transaction's pid", () => {
    const redirect = attempt('t', noon, { redirect: 'success' }, 'p-t');
    const postback = attempt('t', noon, { postback: 'success' }, 'P-T');
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [transaction('t', 'Completed', noon)],
      attempts: [redirect, postback],
    });
    // The redirect under the other spelling is the same respondent: no verdict of its own, no look-back for it.
    expect(result.verdicts.map((v) => [v.attempt?.pid, v.verdict.kind])).toEqual([['P-T', 'matched']]);
    expect(
      needsLookback({
        surveyId: '1',
        days: [DAY],
        transactions: [transaction('t', 'Completed', noon)],
        attempts: [redirect, postback],
        lookbackDays: 7,
      }),
    ).toBe(false);
  });

  it('without a transaction, one token a postback and a redirect carried under two pids is judged once, by the postback', () => {
    const redirect = attempt('t2', noon, { redirect: 'success' }, 'b c');
    const postback = attempt('t2', noon, { postback: 'success' }, 'b+c');
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [],
      attempts: [redirect, postback],
    });
    // Not a complete not paid and an unverified claim side by side: the claim would count a forgery that is none.
    expect(result.verdicts.map((v) => [v.attempt?.pid, v.verdict.kind])).toEqual([
      ['b+c', 'complete_not_paid'],
    ]);
    // Not judged before: nothing to clear. Judged as a claim by a run before the postback came: cleared.
    expect(result.collapsed).toEqual([]);
    const judged = {
      ...redirect,
      reconciliation: { verdict: 'unverified_claim', day: DAY, detail: {}, at: noon, history: [] },
    };
    const again = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [],
      attempts: [judged, postback],
    });
    expect(again.verdicts.map((v) => v.attempt?.pid)).toEqual(['b+c']);
    expect(again.collapsed).toEqual([judged]);
    // Redirects alone on one token are each a claim: many pids on one token is how a forger shows up.
    const one = attempt('t3', noon, { redirect: 'success' }, 'x y');
    const other = attempt('t3', noon, { redirect: 'success' }, 'forger');
    const claims = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [],
      attempts: [one, other],
    });
    expect(claims.verdicts.map((v) => v.verdict.kind)).toEqual(['unverified_claim', 'unverified_claim']);
  });

  it('an item for a transaction filed by its start (no click time) keeps the time that places it', () => {
    const started = transaction('s', 'Completed', noon, { clickedAt: undefined, startedAt: at(noon) });
    const [verdict] = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [started],
      attempts: [],
    }).verdicts;
    expect(verdict?.verdict.marketplace?.clickedAt).toBe(noon);
  });

  it('a respondent who clicks in before midnight and finishes after belongs to the first day, with no false discrepancy', () => {
    const clicked = new Date(pacificWallToUtc(2026, 11, 21, 23, 55)).toISOString();
    const finished = new Date(pacificWallToUtc(2026, 11, 22, 0, 20)).toISOString();
    const window = {
      surveyId: '1',
      transactions: [transaction('late', 'Completed', clicked, { completedAt: at(finished) })],
      attempts: [attempt('late', finished, { postback: 'success', redirect: 'success' })],
    };
    const first = reconcileSurveyWindow({ ...window, days: ['2026-11-21'] });
    expect(first.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.day])).toEqual([
      ['late', 'matched', '2026-11-21'],
    ]);
    // The next day's run sees the same pair and leaves it to the day it belongs to.
    expect(reconcileSurveyWindow({ ...window, days: ['2026-11-22'] }).verdicts).toEqual([]);
  });

  it('a respondent who finishes hours later is matched, not reported missing on either side', () => {
    const clicked = '2026-11-21T20:00:00.000Z';
    const finished = '2026-11-22T04:30:00.000Z'; // eight and a half hours later
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [transaction('slow', 'Completed', clicked, { completedAt: at(finished) })],
      attempts: [attempt('slow', finished, { postback: 'success' })],
    });
    expect(result.verdicts.map((v) => v.verdict.kind)).toEqual(['matched']);
  });

  it.each([
    ['spring forward', '2026-03-08', '2026-03-08T09:59:00.000Z', '2026-03-08T10:01:00.000Z'],
    ['fall back', '2026-11-01', '2026-11-01T08:30:00.000Z', '2026-11-01T09:30:00.000Z'],
  ])(
    'daylight saving (%s): attempts on both sides of the change belong to the day',
    (_, day, before, after) => {
      const result = reconcileSurveyWindow({
        surveyId: '1',
        days: [day],
        transactions: [transaction('b', 'Completed', before), transaction('c', 'Over Quota', after)],
        attempts: [
          attempt('b', before, { postback: 'success' }),
          attempt('c', after, { redirect: 'overquota' }),
        ],
      });
      expect(result.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.day])).toEqual([
        ['b', 'matched', day],
        ['c', 'matched', day],
      ]);
    },
  );

  it('falls back to the pid when the token differs, only where that is unambiguous', () => {
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [
        transaction('t1', 'Completed', noon, { pid: 'solo' }),
        transaction('t2', 'Completed', noon, { pid: 'twice' }),
        transaction('t3', 'Completed', noon, { pid: 'twice' }),
      ],
      attempts: [
        attempt('x1', noon, { postback: 'success' }, 'solo'),
        attempt('x2', noon, { postback: 'success' }, 'twice'),
      ],
    });
    const byToken = Object.fromEntries(
      result.verdicts.map((v) => [v.token, [v.verdict.kind, v.verdict.matchedBy ?? '-']]),
    );
    expect(byToken).toEqual({
      t1: ['matched', 'pid'],
      t2: ['complete_not_received', '-'],
      t3: ['complete_not_received', '-'],
      x2: ['complete_not_paid', '-'],
    });
  });

  it('leaves discrepancies too recent to judge for the next run, but records agreement at once', () => {
    const recent = '2026-11-21T21:59:00.000Z';
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [transaction('fresh', 'Completed', recent), transaction('agreed', 'Completed', recent)],
      attempts: [attempt('agreed', recent, { postback: 'success' })],
      settledBefore: new Date('2026-11-21T21:55:00.000Z'),
    });
    expect(result.verdicts.map((v) => [v.token, v.verdict.kind])).toEqual([['agreed', 'matched']]);
    expect(result.awaiting).toBe(1);
  });
});

describe('settling', () => {
  it('a discrepancy is judged once what it rests on is settled, however often its hits repeat since', () => {
    const settledBefore = new Date('2026-11-21T21:50:00.000Z');
    const hour = '2026-11-21T21:00:00.000Z';
    const item = {
      surveyId: '1',
      pid: 'p-r',
      token: 'r',
      firstSeenAt: hour,
      // The success redirect refreshed a minute ago: a repeat, nothing new.
      lastSeenAt: '2026-11-21T21:59:00.000Z',
      postbackOutcome: 'success',
      postback_success_at: hour,
      postback_success_hits: 1,
      redirectOutcome: 'success',
      redirect_success_at: hour,
      redirect_success_hits: 9,
    };
    const repeated = attemptFromItem(item);
    const judged = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [],
      attempts: [repeated],
      settledBefore,
    });
    expect(judged.awaiting).toBe(0);
    expect(judged.verdicts.map((v) => v.verdict.kind)).toEqual(['complete_not_paid']);
    // Something new (the fail postback, a conflict) is another matter: it waits for the other side.
    const fresh = attemptFromItem({
      ...item,
      postback_fail_at: '2026-11-21T21:58:00.000Z',
      postback_fail_hits: 1,
    });
    expect(
      reconcileSurveyWindow({
        surveyId: '1',
        days: [DAY],
        transactions: [],
        attempts: [fresh],
        settledBefore,
      }).awaiting,
    ).toBe(1);
    // A hit drained from the buffer a minute ago is new now, whenever it was made; repeats after an old drain are
    // repeats still.
    const drained = attemptFromItem({ ...item, drainedAt: '2026-11-21T21:58:30.000Z' });
    expect(
      reconcileSurveyWindow({
        surveyId: '1',
        days: [DAY],
        transactions: [],
        attempts: [attemptFromItem({ ...item, drainedAt: '2026-11-21T21:05:00.000Z' })],
        settledBefore,
      }).awaiting,
    ).toBe(0);
    expect(
      reconcileSurveyWindow({
        surveyId: '1',
        days: [DAY],
        transactions: [],
        attempts: [drained],
        settledBefore,
      }).awaiting,
    ).toBe(1);
  });
});

describe('late finishers', () => {
  const clicked = '2026-11-18T20:00:00.000Z'; // three Pacific days before DAY
  const late = attempt('late', noon, { postback: 'success' });

  it('the look-back covers the days before the window the window does not fetch', () => {
    expect(lookbackRange(['2026-11-21', '2026-11-22'], 7)).toEqual({
      startDate: '2026-11-13',
      endDate: '2026-11-19',
    });
    expect(lookbackRange(['2026-11-21'], 0)).toBeUndefined();
  });

  it("a window's transaction whose attempt was first seen later is read by its key", () => {
    const window = {
      days: ['2026-11-18'],
      transactions: [transaction('late', 'Completed', clicked), transaction('seen', 'Completed', clicked)],
      attempts: [attempt('seen', clicked, { postback: 'success' })],
    };
    expect(attemptKeysToRead(window)).toEqual([{ pid: 'p-late', token: 'late' }]);
    const result = reconcileSurveyWindow({ surveyId: '1', ...window, attempts: [...window.attempts, late] });
    expect(result.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.day])).toEqual([
      ['late', 'matched', '2026-11-18'],
      ['seen', 'matched', '2026-11-18'],
    ]);
  });

  it('an attempt whose transaction is on a look-back day is left to that day, and never judged missing', () => {
    const window = { surveyId: '1', days: [DAY], transactions: [], attempts: [late], lookbackDays: 7 };
    expect(needsLookback(window)).toBe(true);
    const result = reconcileSurveyWindow({ ...window, earlier: [transaction('late', 'Completed', clicked)] });
    expect(result.verdicts).toEqual([]);
    expect(result.earlier).toBe(1);
  });

  it('an attempt whose token a look-back lists on two days is left to the first of them', () => {
    const window = { surveyId: '1', days: [DAY], transactions: [], attempts: [late], lookbackDays: 7 };
    const copy = transaction('late', 'Completed', '2026-11-19T20:00:00.000Z');
    for (const earlier of [
      [copy, transaction('late', 'Completed', clicked)],
      [transaction('late', 'Completed', clicked), copy],
    ])
      expect(reconcileSurveyWindow({ ...window, earlier }).elsewhere.map((e) => e.day)).toEqual([
        '2026-11-18',
      ]);
  });

  it("a postback re-sent days late beside a newer transaction of the same pid is not that one's: each is judged as its own", () => {
    // The respondent's complete of three days ago (its postback re-sent today) and today's complete, whose
    // postback was lost: same pid, two tokens.
    const resent = attempt('late', noon, { postback: 'success' }, 'p-same');
    const today = transaction('today', 'Completed', noon, { pid: 'p-same' });
    const window = { surveyId: '1', days: [DAY], transactions: [today], attempts: [resent], lookbackDays: 7 };
    // Paired by pid alone, the attempt's own token is still looked for on the days before.
    expect(needsLookback(window)).toBe(true);
    const result = reconcileSurveyWindow({
      ...window,
      earlier: [transaction('late', 'Completed', clicked, { pid: 'p-same' })],
    });
    expect(result.verdicts.map((v) => [v.token, v.verdict.kind])).toEqual([
      ['today', 'complete_not_received'],
    ]);
    expect(result.earlier).toBe(1);
    // Its token listed nowhere it looked: the pair by pid stands (a token the sender spelt otherwise).
    const alone = reconcileSurveyWindow({ ...window, earlier: [] });
    expect(alone.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.matchedBy])).toEqual([
      ['today', 'matched', 'pid'],
    ]);
  });

  it('the same respondent sent again days later: an attempt heard of before the new click is not paired with it by pid', () => {
    // Three days ago the respondent completed and the postback came; the marketplace lists that row no more. Today
    // the panel sends the same id again: a complete whose redirect and postback were both lost.
    const days = ['2026-11-18', '2026-11-19', '2026-11-20', DAY];
    const before = attempt('old', '2026-11-18T20:10:00.000Z', { postback: 'success' }, 'p-same');
    const today = transaction('new', 'Completed', noon, { pid: 'p-same' });
    const result = reconcileSurveyWindow({ surveyId: '1', days, transactions: [today], attempts: [before] });
    expect(result.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.day])).toEqual([
      ['new', 'complete_not_received', DAY],
      ['old', 'complete_not_paid', '2026-11-18'],
    ]);
    // First seen after the click, or before it by less than the clocks may be apart (ATTEMPT_LEAD_MS, two hours):
    // the pair by pid stands. Two hours and ten minutes before: it is not the transaction's.
    const pairedWhenSeen = (seen: string) =>
      reconcileSurveyWindow({
        surveyId: '1',
        days,
        transactions: [today],
        attempts: [attempt('old', seen, { postback: 'success' }, 'p-same')],
      }).verdicts.map((v) => v.verdict.matchedBy);
    expect(pairedWhenSeen('2026-11-21T20:25:00.000Z')).toEqual(['pid']);
    expect(pairedWhenSeen('2026-11-21T18:10:00.000Z')).toEqual(['pid']);
    expect(pairedWhenSeen('2026-11-21T17:50:00.000Z')).toEqual([undefined, undefined]);
  });

  it("the autumn change's repeated hour: a click the marketplace writes '1:30 am PST' while it was 1:30 PDT still pairs by pid", () => {
    // Read as the later 1:30 (PST, 09:30 UTC); the postback came at 1:40 PDT (08:40 UTC), fifty minutes "before".
    const days = ['2026-10-31', '2026-11-01'];
    const clicked = transaction('refiled', 'Completed', '2026-11-01T09:30:00.000Z', { pid: 'p-dst' });
    const arrived = attempt('spelt-otherwise', '2026-11-01T08:40:00.000Z', { postback: 'success' }, 'p-dst');
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days,
      transactions: [clicked],
      attempts: [arrived],
    });
    expect(result.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.matchedBy])).toEqual([
      ['refiled', 'matched', 'pid'],
    ]);
  });

  it('an attempt an earlier edition of the rules paired by pid with a later click is judged on its own day again', () => {
    // Stored by edition 1: matched with the new transaction, whose click (three days after the attempt was first
    // seen) it kept. Judged again, the click is not its own: its first-seen day, as a complete not paid.
    const days = ['2026-11-18', '2026-11-19', '2026-11-20', DAY];
    const wronglyPaired = attemptFromItem({
      surveyId: '1',
      pid: 'p-same',
      token: 'old',
      firstSeenAt: '2026-11-18T20:10:00.000Z',
      lastSeenAt: '2026-11-18T20:10:00.000Z',
      postbackOutcome: 'success',
      postback_success_at: '2026-11-18T20:10:00.000Z',
      postback_success_hits: 1,
      verdict: 'matched',
      verdictDay: DAY,
      marketplace: { status: 'Completed', cpi: '1.25', clickedAt: noon },
    });
    const today = transaction('new', 'Completed', noon, { pid: 'p-same' });
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days,
      transactions: [today],
      attempts: [wronglyPaired],
    });
    expect(result.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.day])).toEqual([
      ['new', 'complete_not_received', DAY],
      ['old', 'complete_not_paid', '2026-11-18'],
    ]);
    expect(result.verdicts[1]?.verdict.detail.clickedAt).toBeUndefined();
  });

  it('an item kept for a transaction nothing arrived for is not paired by pid with a new transaction of that pid', () => {
    // Made by an earlier run for a complete whose postback never came; its row is listed no more. A new complete of
    // the same respondent today: its own verdict, and the old item judged reversed on its own (the complete it was
    // listed as is gone), not paired with the new one.
    const kept = attemptFromItem({
      surveyId: '1',
      pid: 'p-same',
      token: 'old',
      verdict: 'complete_not_received',
      verdictDay: DAY,
      marketplace: { status: 'Completed', cpi: '1.25', clickedAt: '2026-11-21T17:00:00.000Z' },
    });
    const today = transaction('new', 'Completed', noon, { pid: 'p-same' });
    const result = reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [today],
      attempts: [kept],
    });
    expect(result.verdicts.map((v) => [v.token, v.verdict.kind, v.verdict.matchedBy])).toEqual([
      ['new', 'complete_not_received', undefined],
      ['old', 'invalidated', undefined],
    ]);
    expect(result.verdicts[0]?.attempt).toBeUndefined();
    expect(result.verdicts[1]?.attempt).toBe(kept);
    expect(result.withdrawn).toEqual([]);
  });

  it('without a transaction within the look-back, the verdict says from which day it looked', () => {
    const window = { surveyId: '1', days: [DAY], transactions: [], attempts: [late], lookbackDays: 1 };
    const result = reconcileSurveyWindow({ ...window, earlier: [transaction('late', 'Completed', clicked)] });
    expect(result.verdicts.map((v) => [v.verdict.kind, v.verdict.detail.searchedFrom])).toEqual([
      ['complete_not_paid', '2026-11-19'],
    ]);
  });

  it('an attempt an earlier run matched belongs to its transaction day, not to the day it was first seen', () => {
    const judged = {
      ...late,
      reconciliation: {
        verdict: 'matched',
        day: '2026-11-18',
        detail: {},
        at: noon,
        marketplace: { status: 'Completed', cpi: '1.25', clickedAt: clicked },
        history: [{ verdict: 'matched', day: '2026-11-18', at: noon }],
      },
    };
    const window = { surveyId: '1', days: [DAY], transactions: [], attempts: [judged], lookbackDays: 0 };
    expect(needsLookback(window)).toBe(false);
    expect(reconcileSurveyWindow(window).verdicts).toEqual([]);
  });
});

describe('claims waiting for the whole-window look-back (claimsWait)', () => {
  const noon = '2026-11-21T20:00:00.000Z';
  const window = (attempts: Attempt[], claimsWait: boolean, lookbackDays = 7) =>
    reconcileSurveyWindow({
      surveyId: '1',
      days: [DAY],
      transactions: [],
      attempts,
      expectedCpi: '1.25',
      settledBefore: new Date('2026-11-22T20:00:00.000Z'),
      lookbackDays,
      claimsWait,
    });
  const kinds = (result: ReturnType<typeof window>) => result.verdicts.map((v) => v.verdict.kind);

  it('a claim never looked for waits, awaiting, and a whole-window run judges it', () => {
    const claim = attempt('c', noon, { redirect: 'success' });
    expect(kinds(window([claim], true))).toEqual([]);
    expect(window([claim], true).awaiting).toBe(1);
    expect(kinds(window([claim], false))).toEqual(['unverified_claim']);
  });

  it('not one judged before against a listed row: its row gone is judged at once, as a whole-window run would', () => {
    const seen = attempt('a', noon, { redirect: 'success' });
    const { kind, detail } = classify(transaction('a', 'Completed', noon), seen, '1.25');
    expect(kind).toBe('complete_not_received');
    const judged: Attempt = {
      ...seen,
      reconciliation: {
        verdict: kind,
        day: DAY,
        detail,
        at: noon,
        marketplace: { status: 'Completed', verifyToken: 'Pending', cpi: '1.25', clickedAt: noon },
        history: [],
      },
    };
    expect(kinds(window([judged], true))).toEqual(kinds(window([judged], false)));
    expect(window([judged], true).awaiting).toBe(0);
  });

  it('not without a look-back to wait for', () => {
    const claim = attempt('n', noon, { redirect: 'success' });
    expect(kinds(window([claim], true, 0))).toEqual(['unverified_claim']);
  });
});

describe('day summaries', () => {
  it('count both sides and sum the CPI of valid completes exactly', () => {
    const transactions = [
      ...Array.from({ length: 10 }, (_, i) =>
        transaction(`v${i}`, 'Completed', noon, { cpi: '0.10', verifyToken: 'Valid' }),
      ),
      transaction('p', 'Completed', noon, { cpi: '2.675' }),
      transaction('i', 'Completed', noon, { cpi: '5.00', verifyToken: 'Invalid' }),
      transaction('o', 'Over Quota', noon),
    ];
    const attempts = transactions
      .filter((t) => t.token !== 'o')
      .map((t) => attempt(t.token, noon, { postback: 'success' }));
    attempts.push(attempt('r', noon, { redirect: 'success' }));
    const [summary] = reconcileSurveyWindow({ surveyId: '1', days: [DAY], transactions, attempts }).summaries;
    expect(summary).toEqual({
      surveyId: '1',
      day: DAY,
      here: { attempts: 13, postbackCompletes: 12, redirectOnlyCompletes: 0, nonCompletes: 0 },
      marketplace: {
        transactions: 13,
        byStatus: { Completed: 12, 'Over Quota': 1 },
        completes: 12,
        validCompletes: 10,
        pendingCompletes: 1,
        invalidCompletes: 1,
        owed: '1.00',
        pending: '2.675',
      },
      verdicts: { matched: 11, invalidated: 1, not_received: 1, unverified_claim: 1 },
      transactionsDigest: transactionsDigest(transactions, DAY),
    });
  });
});

describe('settled days', () => {
  const rows = [
    transaction('a', 'Completed', noon, { verifyToken: 'Valid' }),
    transaction('b', 'Failed', noon),
    transaction('c', 'Completed', '2026-11-22T20:00:00.000Z'),
  ];
  const stored = (checkedAt: string, digest = transactionsDigest(rows, DAY)): StoredDaySummary => ({
    ...(reconcileSurveyWindow({ surveyId: '1', days: [DAY], transactions: rows, attempts: [] })
      .summaries[0] as DaySummary),
    surveyId: '1',
    day: DAY,
    transactionsDigest: digest,
    reconciledAt: '2026-11-20T00:00:00.000Z',
    checkedAt,
    runId: 'r',
  });

  it("fingerprint a day's rows whatever their order, and only that day's", () => {
    const digest = transactionsDigest(rows, DAY);
    expect(transactionsDigest([...rows].reverse(), DAY)).toBe(digest);
    // A reversal on the day (Completed to Invalid) changes it; a change on the next day does not.
    const reversed = [{ ...(rows[0] as Transaction), verifyToken: 'Invalid' }, ...rows.slice(1)];
    expect(transactionsDigest(reversed, DAY)).not.toBe(digest);
    const nextDayChanged = [...rows.slice(0, 2), { ...(rows[2] as Transaction), status: 'Failed' }];
    expect(transactionsDigest(nextDayChanged, DAY)).toBe(digest);
    // A row without a click time takes part in every day's matching: it changes every day's fingerprint.
    const undated = transaction('u', 'Failed', noon, { clickedAt: undefined });
    expect(transactionsDigest([...rows, undated], DAY)).not.toBe(digest);
  });

  it('the newest days of a run are its fresh days', () => {
    expect(freshDaysOf(pacificDays('2026-11-15', DAY), 2)).toEqual(['2026-11-20', DAY]);
    expect(freshDaysOf(pacificDays('2026-11-15', DAY), 7)).toHaveLength(7);
  });

  it('a settled day is checked when unreconciled, failed, awaiting judgements, or not checked for the recheck period; else left', () => {
    const plan = { freshDays: new Set(['2026-11-22', '2026-11-23']), settledRecheckMs: 24 * 3_600_000 };
    const now = new Date('2026-11-23T12:00:00.000Z');
    const context = { surveyId: '1', failedDays: [] as string[], now };
    expect(checkRegardless('2026-11-23', plan, { ...context, stored: undefined })).toBe('fresh');
    expect(checkRegardless(DAY, plan, { ...context, stored: undefined })).toBe('unreconciled');
    const recent = stored('2026-11-23T01:00:00.000Z');
    expect(checkRegardless(DAY, plan, { ...context, stored: recent, failedDays: [DAY] })).toBe('failed');
    expect(checkRegardless(DAY, plan, { ...context, stored: recent })).toBeUndefined();
    // Discrepancies left too recent to judge: the next run judges them, however recently the day was checked.
    expect(checkRegardless(DAY, plan, { ...context, stored: { ...recent, awaiting: 2 } })).toBe('awaiting');
    const old = stored('2026-11-22T11:59:59.000Z');
    expect(checkRegardless(DAY, plan, { ...context, stored: old })).toBe('due');
    // Checked in full by the last finished run (a fresh day of it): not due, unless the survey failed in it.
    const lastRun = {
      runId: 'x',
      startedAt: '2026-11-23T11:00:00.000Z',
      finishedAt: '2026-11-23T11:05:00.000Z',
      freshDays: [DAY, '2026-11-22'],
      surveys: ['1'],
      failedSurveys: [],
    };
    expect(checkRegardless(DAY, { ...plan, lastRun }, { ...context, stored: old })).toBeUndefined();
    expect(lastCheckedAt(old, lastRun)).toBe(lastRun.startedAt);
    const failed = { ...lastRun, failedSurveys: ['1'] };
    expect(checkRegardless(DAY, { ...plan, lastRun: failed }, { ...context, stored: old })).toBe('due');
    expect(lastCheckedAt(old, failed)).toBe(old.checkedAt);
    expect(lastCheckedAt(old, { ...lastRun, surveys: ['2'] })).toBe(old.checkedAt);
  });

  it('unchanged figures need no write; a changed count or fingerprint does', () => {
    const summary = stored('2026-11-23T01:00:00.000Z');
    expect(sameFigures({ ...summary }, summary)).toBe(true);
    expect(sameFigures({ ...summary, awaiting: 1 }, summary)).toBe(false);
    expect(sameFigures({ ...summary, verdicts: { matched: 99 } }, summary)).toBe(false);
    expect(sameFigures({ ...summary, transactionsDigest: 'other' }, summary)).toBe(false);
    expect(sameFigures(summary, undefined)).toBe(false);
  });
});

describe('stored verdicts', () => {
  const listing = (verifyToken: string | undefined, extra: Record<string, string> = {}) => ({
    status: 'Completed',
    ...(verifyToken ? { verifyToken } : {}),
    cpi: '1.25',
    clickedAt: noon,
    completedAt: noon,
    ...extra,
  });
  const facts = (verifyToken: string | undefined) => ({
    postback: 'success',
    redirect: 'success',
    marketplaceStatus: 'Completed',
    verifyToken: verifyToken ?? 'none',
  });
  /** An attempt judged `kind` while its row's review said `listed`, judged again now that it says `now`. */
  const judgedAgain = (
    kind: string,
    listed: string | undefined,
    now: string | undefined,
    changed: Record<string, string> = {},
  ): AttemptVerdict => {
    const base = attempt('t', noon, { postback: 'success', redirect: 'success' });
    return {
      surveyId: '1',
      pid: base.pid,
      token: base.token,
      attempt: {
        ...base,
        reconciliation: {
          verdict: kind,
          day: DAY,
          detail: facts(listed),
          marketplace: listing(listed),
          at: noon,
          history: [{ verdict: kind, day: DAY, at: noon }],
        },
      },
      verdict: {
        kind: kind as AttemptVerdict['verdict']['kind'],
        day: DAY,
        detail: facts(now),
        marketplace: listing(now, changed),
      },
    };
  };

  it('a matched complete whose review went from Pending (or none yet) to Valid is not written again', () => {
    expect(verdictUnchanged(judgedAgain('matched', 'Pending', 'Pending'))).toBe(true);
    expect(verdictUnchanged(judgedAgain('matched', 'Pending', 'Valid'))).toBe(true);
    expect(verdictUnchanged(judgedAgain('matched', undefined, 'valid'))).toBe(true);
  });

  it('any other change of facts is written: a price, a time, a review going back, a discrepancy finance lists', () => {
    expect(verdictUnchanged(judgedAgain('matched', 'Pending', 'Valid', { cpi: '1.30' }))).toBe(false);
    expect(verdictUnchanged(judgedAgain('matched', 'Pending', 'Valid', { completedAt: DAY }))).toBe(false);
    expect(verdictUnchanged(judgedAgain('matched', 'Valid', 'Pending'))).toBe(false);
    expect(verdictUnchanged(judgedAgain('matched', undefined, 'Pending'))).toBe(false);
    expect(verdictUnchanged(judgedAgain('cpi_mismatch', 'Pending', 'Valid'))).toBe(false);
    const moved = judgedAgain('matched', 'Pending', 'Valid');
    expect(verdictUnchanged({ ...moved, verdict: { ...moved.verdict, day: '2026-11-22' } })).toBe(false);
  });
});

describe('agreements an attempt tells by itself (matchedVerdicts implied)', () => {
  const failed = transaction('f', 'Failed', noon);
  const seen = attempt('f', noon, { postback: 'fail', redirect: 'fail' });

  it('a non-complete first seen on its click day, without a conflict', () => {
    expect(impliedMatch(failed, seen, DAY)).toBe(true);
    expect(impliedDay(seen)).toBe(DAY);
  });

  it('not a complete (its listing prices a reversal), another day, a conflict, an item made for a row, a verdict kept', () => {
    expect(
      impliedMatch(transaction('c', 'Completed', noon), attempt('c', noon, { postback: 'success' }), DAY),
    ).toBe(false);
    expect(impliedMatch(failed, seen, '2026-11-20')).toBe(false);
    expect(impliedMatch(failed, { ...seen, conflict: true }, DAY)).toBe(false);
    expect(impliedMatch(failed, attemptFromItem({ surveyId: '1', pid: 'p-f', token: 'f' }), DAY)).toBe(false);
    expect(impliedMatch(undefined, seen, DAY)).toBe(false);
    const judged = {
      ...seen,
      reconciliation: { verdict: 'matched', day: DAY, detail: {}, at: noon, history: [] },
    };
    expect(impliedDay(judged)).toBeUndefined();
  });
});
