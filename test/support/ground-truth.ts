/**
 * A seeded ground truth for a week of a supplier's traffic: which respondents clicked in when, how they ended, what
 * reached this side (redirects, postbacks, late, twice, forged), what the marketplace lists and when (late, twice,
 * withdrawn, never, reviewed and reversed later), and, from that alone, the verdict every attempt should end with
 * and the money every day should show. Computed here without the product's rules, so the finance figures can be
 * checked against it to the cent.
 */
import { formatPacificTime, pacificDay, pacificDayRange } from '../../functions/marketplace/pacific-time';
import type { Outcome } from '../../functions/receiving/outcome';
import { nextDay, pacificDays } from '../../functions/reconciliation/verdict-rules';

export const MINUTE = 60_000;
export const HOUR = 3_600_000;
export const DAY = 86_400_000;

/** A small seeded generator (mulberry32): the same scenario for the same seed on every machine. */
function seeded(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An amount in cents, from the marketplace's decimal string or number (never through a float sum). */
export const cents = (amount: string | number): bigint => {
  const [whole = '0', fraction = ''] = String(amount).split('.');
  return BigInt(whole) * 100n + BigInt(`${fraction}00`.slice(0, 2));
};
export const formatCents = (value: bigint) => `${value / 100n}.${String(value % 100n).padStart(2, '0')}`;

export type Status = 'Completed' | 'Failed' | 'Over Quota' | 'Quality Termination' | 'Pre Survey Termination';
type VerifyToken = 'Pending' | 'Valid' | 'Invalid';

export interface Hit {
  readonly at: number;
  readonly channel: 'postback' | 'redirect';
  readonly outcome: Outcome;
}

/** A change the marketplace makes to a row after the fact: the buyer's review, or a status adjusted. */
interface Change {
  readonly at: number;
  readonly status?: Status;
  readonly verifyToken?: VerifyToken;
}

/** One respondent's attempt as it really happened. */
export interface Truth {
  readonly surveyId: string;
  readonly pid: string;
  readonly token: string;
  readonly clickAt: number;
  readonly endAt: number;
  readonly status: Status;
  /** The price the marketplace files the complete at. */
  cpi: string;
  /** Whether the marketplace ever lists it, from when, and until when (withdrawn). */
  listed: boolean;
  listedFrom: number;
  listedUntil?: number;
  /** The same row listed twice. */
  twiceListed?: boolean;
  readonly changes: Change[];
  readonly hits: Hit[];
  /** What happened to it, for the failure messages. */
  readonly tags: string[];
}

export interface Survey {
  readonly surveyId: string;
  /** Its prices, oldest first; `since` 0 for the first. */
  readonly prices: readonly { readonly cpi: string; readonly since: number }[];
}

export interface Scenario {
  readonly days: readonly string[];
  readonly surveys: readonly Survey[];
  readonly truths: readonly Truth[];
  /** The first day's start, and the last hit, listing or review. */
  readonly start: number;
  readonly end: number;
}

const REDIRECT_OF: Record<Status, Outcome> = {
  Completed: 'success',
  Failed: 'fail',
  'Over Quota': 'overquota',
  'Quality Termination': 'quality',
  'Pre Survey Termination': 'termination',
};

export function priceAt(survey: Survey, at: number): string {
  let cpi = survey.prices[0]?.cpi as string;
  for (const price of survey.prices) if (price.since <= at) cpi = price.cpi;
  return cpi;
}

/**
 * `attempts` respondents over a week of three surveys (one changing its price mid-week), starting on `first`, with
 * the daylight-saving change on `dstDay` and the field notes' shapes at their rough rates.
 */
export function generateScenario(
  seed: number,
  { first, dstDay, attempts }: { first: string; dstDay: string; attempts: number },
): Scenario {
  const random = seeded(seed);
  const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)] as T;
  const chance = (p: number) => random() < p;
  const between = (a: number, b: number) => a + random() * (b - a);
  const days = pacificDays(first, nextDay(first, 6));
  const start = pacificDayRange(first).start.getTime();
  const endOfTraffic = pacificDayRange(days.at(-1) as string).end.getTime();
  const surveys: Survey[] = [
    { surveyId: '5101', prices: [{ cpi: '1.25', since: 0 }] },
    { surveyId: '5102', prices: [{ cpi: '0.99', since: 0 }] },
    {
      surveyId: '5103',
      prices: [
        { cpi: '2.10', since: 0 },
        { cpi: '1.95', since: pacificDayRange(days[3] as string).start.getTime() + 13 * HOUR + 17 * MINUTE },
      ],
    },
  ];
  const truths: Truth[] = [];
  for (let i = 0; i < attempts; i++) {
    const survey = pick(surveys);
    const range = pacificDayRange(pick(days));
    const [dayStart, dayEnd] = [range.start.getTime(), range.end.getTime()];
    const shape = random();
    const clickAt =
      Math.floor(
        (shape < 0.2
          ? dayEnd - between(1, 20) * MINUTE // finishing after midnight
          : shape < 0.3
            ? pacificDayRange(dstDay).start.getTime() + between(0.5, 3.5) * HOUR // around the clock change
            : shape < 0.35
              ? dayStart + between(0, 10) * MINUTE // just after midnight
              : between(dayStart, dayEnd - 1)) / 1000,
      ) * 1000;
    const endAt = Math.floor((clickAt + between(3, 40) * MINUTE) / 1000) * 1000;
    const roll = random();
    const status: Status =
      roll < 0.55
        ? 'Completed'
        : roll < 0.75
          ? 'Failed'
          : roll < 0.85
            ? 'Over Quota'
            : roll < 0.95
              ? 'Quality Termination'
              : 'Pre Survey Termination';
    const earlier = truths.filter((t) => t.surveyId === survey.surveyId && !t.tags.includes('forged'));
    // A panel that sends the same respondent again (the same pid on another attempt), or pids that need escaping.
    const reused = earlier.length > 0 && chance(0.12);
    const pid = reused
      ? pick(earlier).pid
      : chance(0.15)
        ? `u${Math.floor(random() * 1e6)}+x/y=`
        : `p${i}-${Math.floor(random() * 1e6)}`;
    const t: Truth = {
      surveyId: survey.surveyId,
      pid,
      token: `t${seed}x${i.toString(16)}${Math.floor(random() * 1e9).toString(16)}`,
      clickAt,
      endAt,
      status,
      cpi: priceAt(survey, clickAt),
      listed: true,
      listedFrom: endAt + Math.floor(between(0, 20)) * MINUTE,
      changes: [],
      hits: [],
      tags: reused ? ['pid-reuse'] : [],
    };
    if (status === 'Completed' && chance(0.02)) {
      t.cpi = formatCents(cents(t.cpi) + 10n);
      t.tags.push('cpi-drift');
    }
    const postbackDelivered = chance(0.88);
    const redirectDelivered = chance(0.85);
    if (redirectDelivered) {
      t.hits.push({ at: endAt + 1000, channel: 'redirect', outcome: REDIRECT_OF[status] });
      if (chance(0.15))
        t.hits.push({
          at: endAt + between(1, 30) * MINUTE,
          channel: 'redirect',
          outcome: REDIRECT_OF[status],
        });
    }
    if (postbackDelivered) {
      let at = endAt + Math.floor(between(1, 20)) * 1000;
      if (chance(0.08)) {
        at = endAt + Math.floor(between(2, 72)) * HOUR;
        t.tags.push('late-postback');
      }
      const outcome = status === 'Completed' ? 'success' : 'fail';
      t.hits.push({ at, channel: 'postback', outcome });
      if (chance(0.12)) {
        t.hits.push({ at: at + Math.floor(between(1, 600)) * 1000, channel: 'postback', outcome });
        t.tags.push('postback-twice');
      }
    } else t.tags.push(redirectDelivered ? 'postback-lost' : 'nothing-arrived');
    // A terminated respondent who types the success URL.
    if (status !== 'Completed' && chance(0.05)) {
      t.hits.push({ at: endAt + 2 * MINUTE, channel: 'redirect', outcome: 'success' });
      t.tags.push('typed-success');
    }
    const firstHeard = Math.min(clickAt + DAY, ...t.hits.map((h) => h.at));
    if (chance(0.04)) {
      t.listed = false;
      t.tags.push('never-listed');
    } else if (chance(0.08)) {
      t.listedFrom = endAt + Math.floor(between(1, 36)) * HOUR;
      t.tags.push('listed-late');
    } else if (chance(0.015)) {
      t.listedFrom = endAt + Math.floor(between(8 * 24, 10 * 24)) * HOUR;
      t.tags.push('listed-after-window');
    } else if (chance(0.02) && pacificDay(new Date(clickAt)) === pacificDay(new Date(firstHeard))) {
      // Withdrawn (listed, then no more). Only where its click and first sighting share a day: a withdrawn row's
      // attempt stays on the click day a run once saw, which this ground truth does not follow run by run.
      t.listedUntil = endAt + Math.floor(between(2, 48)) * HOUR;
      t.tags.push('withdrawn');
    }
    if (chance(0.03)) {
      t.twiceListed = true;
      t.tags.push('listed-twice');
    }
    const postback = t.hits.find((h) => h.channel === 'postback');
    if (postback && chance(0.03)) {
      // Re-sent 6 to 12 days after the click (an outage on either side).
      t.hits.splice(t.hits.indexOf(postback), 1, {
        ...postback,
        at: endAt + Math.floor(between(6 * 24, 12 * 24)) * HOUR,
      });
      t.tags.push('postback-days-late');
    }
    if (status === 'Completed') {
      const reviewAt = endAt + Math.floor(between(36, 120)) * HOUR;
      const review = random();
      if (review < 0.1) {
        t.changes.push({ at: reviewAt, verifyToken: 'Invalid' });
        t.tags.push('invalid');
      } else if (review < 0.15) {
        // Adjusted to terminate: with the buyer's Invalid, or the review left as it was (statuses change after
        // the fact whatever the review says).
        if (review < 0.125)
          t.changes.push({ at: reviewAt, status: 'Quality Termination', verifyToken: 'Invalid' });
        else t.changes.push({ at: reviewAt, status: 'Quality Termination' });
        t.tags.push(review < 0.125 ? 'adjusted-to-terminate' : 'adjusted-to-terminate-unreviewed');
        if (chance(0.5)) t.hits.push({ at: reviewAt + 5 * MINUTE, channel: 'postback', outcome: 'fail' });
      } else {
        t.changes.push({ at: reviewAt, verifyToken: 'Valid' });
        if (chance(0.06)) {
          t.changes.push({ at: reviewAt + Math.floor(between(5, 10) * 24) * HOUR, verifyToken: 'Invalid' });
          t.tags.push('valid-then-invalid');
        }
      }
    } else if (status === 'Failed' && chance(0.06)) {
      const at = endAt + Math.floor(between(12, 72)) * HOUR;
      t.changes.push({ at, status: 'Completed', verifyToken: 'Pending' });
      t.changes.push({ at: at + Math.floor(between(24, 96)) * HOUR, verifyToken: 'Valid' });
      t.tags.push('adjusted-to-complete');
      if (chance(0.5)) {
        t.hits.push({ at: at + 3 * MINUTE, channel: 'postback', outcome: 'success' });
        t.tags.push('correcting-postback');
      }
    }
    if (t.hits.length === 0 && !t.listed) continue;
    t.hits.sort((a, b) => a.at - b.at);
    t.changes.sort((a, b) => a.at - b.at);
    truths.push(t);
  }
  // Forged success redirects: made-up ids, never listed.
  for (let i = 0; i < Math.max(3, Math.floor(attempts / 30)); i++) {
    const survey = pick(surveys);
    const at = Math.floor(between(start, endOfTraffic) / 1000) * 1000;
    truths.push({
      surveyId: survey.surveyId,
      pid: `forged-${i}`,
      token: `forged${seed}-${i}`,
      clickAt: at,
      endAt: at,
      status: 'Completed',
      cpi: priceAt(survey, at),
      listed: false,
      listedFrom: Number.POSITIVE_INFINITY,
      changes: [],
      hits: [{ at, channel: 'redirect', outcome: 'success' }],
      tags: ['forged'],
    });
  }
  const end = Math.max(
    ...truths
      .flatMap((t) => [...t.hits.map((h) => h.at), ...t.changes.map((c) => c.at), t.listedFrom])
      .filter(Number.isFinite),
  );
  return { days, surveys, truths, start, end };
}

/** A row as the marketplace shows it at a time. */
export interface View {
  readonly status: Status;
  readonly verifyToken: VerifyToken;
  readonly verifiedAt?: number;
}

/** What the marketplace lists for the attempt at `now`, if anything. */
export function viewAt(t: Truth, now: number): View | undefined {
  if (!t.listed || t.listedFrom > now) return undefined;
  if (t.listedUntil !== undefined && t.listedUntil <= now) return undefined;
  let view: View = { status: t.status, verifyToken: 'Pending' };
  for (const change of t.changes) {
    if (change.at > now) break;
    view = {
      status: change.status ?? view.status,
      verifyToken: change.verifyToken ?? view.verifyToken,
      verifiedAt: change.verifyToken ? change.at : view.verifiedAt,
    };
  }
  return view;
}

/** The transaction row as `getSurveyTransactions` returns it (the field notes' shape: Pacific times, CPI 0 unpaid). */
export function transactionRow(t: Truth, view: View) {
  const earns = view.status === 'Completed' && view.verifyToken !== 'Invalid';
  return {
    ip: '203.0.113.9',
    verifyToken: view.verifyToken,
    termReason: view.status === 'Pre Survey Termination' ? 'GEOIP' : '',
    CPI: earns ? t.cpi : 0,
    PID: t.pid,
    token: t.token,
    st_date_time: formatPacificTime(new Date(t.clickAt + 20_000)),
    clkDateTime: formatPacificTime(new Date(t.clickAt)),
    completeDateTime: view.status === 'Completed' ? formatPacificTime(new Date(t.endAt)) : '',
    status: view.status,
    trackId: `00000000-0000-4000-8000-${t.token.slice(-12).padStart(12, '0')}`,
    surveyUrl: `https://marketplace.example/entry/${t.surveyId}?pid=${encodeURIComponent(t.pid)}`,
    ...(view.verifiedAt !== undefined ? { verifiedTknDt: formatPacificTime(new Date(view.verifiedAt)) } : {}),
  };
}

export interface ExpectedVerdict {
  /** 'none' for an attempt of which nothing arrived and nothing is listed any more. */
  readonly kind: string;
  readonly day: string;
  /** The amount the discrepancy is about (reversed, not paid, not received). */
  readonly price?: string;
  /** A complete not received listed off the survey's price at its click: that price. */
  readonly earned?: string;
}

/**
 * The verdict the attempt should carry at `now`, by the README's rules: the Pacific click day when the marketplace
 * lists it (else the day it was first heard of here), a complete reversed when the buyer rejects it (or when a
 * postback here said complete and the marketplace says otherwise), not paid when only this side has it, an
 * unverified claim when only a browser said so, and a price checked against the one in force at the click (either
 * price within an hour of a change).
 */
export function expectedVerdict(
  t: Truth,
  now: number,
  survey: Survey,
  everListedComplete: boolean,
): ExpectedVerdict {
  const view = viewAt(t, now);
  const postbacks = t.hits.filter((h) => h.channel === 'postback' && h.at <= now);
  const redirects = t.hits.filter((h) => h.channel === 'redirect' && h.at <= now);
  const postback = postbacks[0]?.outcome;
  const redirect = redirects[0]?.outcome;
  const postbackSaid = (outcome: Outcome) => postbacks.some((h) => h.outcome === outcome);
  const evidence =
    postback === 'success' ? 'postback' : !postback && redirect === 'success' ? 'redirect' : undefined;
  const contradicted = redirect === 'success' && postback === 'fail';
  if (!view) {
    const heard = [...postbacks, ...redirects].map((h) => h.at);
    // A complete listed and then withdrawn, nothing here for it: what owed or pending counted is reversed, on the
    // click day a run saw, at its listed price.
    if (heard.length === 0)
      return everListedComplete
        ? { kind: 'invalidated', day: pacificDay(new Date(t.clickAt)), price: t.cpi }
        : { kind: 'none', day: '' };
    const day = pacificDay(new Date(Math.min(...heard)));
    if (evidence === 'postback') return { kind: 'complete_not_paid', day, price: priceAt(survey, t.clickAt) };
    // No signed complete here, and owed or pending counted the row: what they counted is reversed.
    if (everListedComplete)
      return { kind: 'invalidated', day: pacificDay(new Date(t.clickAt)), price: t.cpi };
    if (evidence === 'redirect') return { kind: 'unverified_claim', day };
    if (contradicted) return { kind: 'contradicted_claim', day };
    return { kind: 'not_in_marketplace', day };
  }
  const day = pacificDay(new Date(t.clickAt));
  const invalid = view.verifyToken === 'Invalid';
  if (view.status === 'Completed') {
    if (invalid) return { kind: 'invalidated', day, price: t.cpi };
    const nearChange = survey.prices.some((p) => p.since > 0 && Math.abs(p.since - t.clickAt) <= HOUR);
    const either = [priceAt(survey, t.clickAt - HOUR), priceAt(survey, t.clickAt + HOUR)];
    const offPrice = t.cpi !== priceAt(survey, t.clickAt) && (!nearChange || !either.includes(t.cpi));
    if (postback !== 'success' && !postbackSaid('success'))
      return {
        kind: 'complete_not_received',
        day,
        price: t.cpi,
        ...(offPrice ? { earned: priceAt(survey, t.clickAt) } : {}),
      };
    if (offPrice) return { kind: 'cpi_mismatch', day, price: priceAt(survey, t.clickAt) };
    return { kind: 'matched', day };
  }
  if ((evidence || everListedComplete) && invalid) return { kind: 'invalidated', day, price: t.cpi };
  if (postback === 'success' && postbackSaid('fail')) return { kind: 'invalidated', day, price: t.cpi };
  // Listed as a complete, now another status with the review as it was: reversed all the same.
  if (everListedComplete) return { kind: 'invalidated', day, price: t.cpi };
  if (postback === 'success') return { kind: 'complete_not_paid', day, price: priceAt(survey, t.clickAt) };
  if (evidence === 'redirect' || contradicted) return { kind: 'contradicted_claim', day };
  if (!postback && !redirect) return { kind: 'not_received', day };
  if (redirect && redirect !== REDIRECT_OF[view.status]) return { kind: 'status_mismatch', day };
  return { kind: 'matched', day };
}

/** One survey-day's figures as the ground truth has them. */
export interface ExpectedDay {
  marketplaceCompletes: number;
  valid: number;
  pending: number;
  invalid: number;
  owed: bigint;
  pendingAmount: bigint;
  verdicts: Record<string, number>;
  completesPostback: number;
  completesRedirectOnly: number;
}

export const dayKey = (surveyId: string, day: string) => `${surveyId}|${day}`;

/** Every survey-day's figures, every attempt's verdict and the period's amounts at `now`. */
export function expectedFigures(scenario: Scenario, now: number, everListedComplete: ReadonlySet<string>) {
  const days = new Map<string, ExpectedDay>();
  const dayOf = (surveyId: string, day: string) => {
    const key = dayKey(surveyId, day);
    let figures = days.get(key);
    if (!figures) {
      figures = {
        marketplaceCompletes: 0,
        valid: 0,
        pending: 0,
        invalid: 0,
        owed: 0n,
        pendingAmount: 0n,
        verdicts: {},
        completesPostback: 0,
        completesRedirectOnly: 0,
      };
      days.set(key, figures);
    }
    return figures;
  };
  const verdicts = new Map<string, ExpectedVerdict & { truth: Truth }>();
  const amounts = { reversed: 0n, notPaid: 0n, notReceived: 0n, underpaid: 0n };
  const surveys = new Map(scenario.surveys.map((s) => [s.surveyId, s]));
  for (const t of scenario.truths) {
    const view = viewAt(t, now);
    if (view?.status === 'Completed') {
      const figures = dayOf(t.surveyId, pacificDay(new Date(t.clickAt)));
      figures.marketplaceCompletes++;
      if (view.verifyToken === 'Valid') {
        figures.valid++;
        figures.owed += cents(t.cpi);
      } else if (view.verifyToken === 'Invalid') figures.invalid++;
      else {
        figures.pending++;
        figures.pendingAmount += cents(t.cpi);
      }
    }
    const verdict = expectedVerdict(
      t,
      now,
      surveys.get(t.surveyId) as Survey,
      everListedComplete.has(t.token),
    );
    verdicts.set(dayKey(t.surveyId, t.token), { ...verdict, truth: t });
    if (verdict.kind === 'none') continue;
    const figures = dayOf(t.surveyId, verdict.day);
    figures.verdicts[verdict.kind] = (figures.verdicts[verdict.kind] ?? 0) + 1;
    const price = cents(verdict.price ?? '0');
    if (verdict.kind === 'invalidated') amounts.reversed += price;
    if (verdict.kind === 'complete_not_paid') amounts.notPaid += price;
    if (verdict.kind === 'complete_not_received') amounts.notReceived += price;
    // Listed below the price at the click: the difference, whether its postback came or not.
    if (verdict.kind === 'cpi_mismatch' && price > cents(t.cpi)) amounts.underpaid += price - cents(t.cpi);
    if (verdict.earned !== undefined && cents(verdict.earned) > cents(t.cpi))
      amounts.underpaid += cents(verdict.earned) - cents(t.cpi);
    const firstPostback = t.hits.find((h) => h.channel === 'postback');
    const claimOnly = ['unverified_claim', 'contradicted_claim'].includes(verdict.kind);
    if (!firstPostback && t.hits.find((h) => h.channel === 'redirect')?.outcome === 'success' && !claimOnly)
      figures.completesRedirectOnly++;
    const postbackSaidSuccess = t.hits.some((h) => h.channel === 'postback' && h.outcome === 'success');
    if (firstPostback?.outcome === 'success' || (postbackSaidSuccess && view?.status === 'Completed'))
      figures.completesPostback++;
  }
  return { days, verdicts, amounts };
}

/** A short account of an attempt's story, for a failure message. */
export function story(t: Truth): string {
  const iso = (at: number) => new Date(at).toISOString();
  return [
    `${t.surveyId}/${t.token} pid=${t.pid} ${t.status} [${t.tags.join(',')}]`,
    `clicked ${iso(t.clickAt)}`,
    t.listed
      ? `listed ${iso(t.listedFrom)}${t.listedUntil ? ` until ${iso(t.listedUntil)}` : ''}`
      : 'never listed',
    `hits ${t.hits.map((h) => `${h.channel}:${h.outcome}@${iso(h.at)}`).join(' ')}`,
  ].join('; ');
}
