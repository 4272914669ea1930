/**
 * Whether a survey's money is leaking, from the traffic the receivers already recorded: the rules that make a
 * survey `ok`, `warning` or `failing`. Pure: the caller reads the ledger (health-window.ts) and hands in what a
 * window of it says, the settings and the time; every rule is testable at its boundaries without a store.
 *
 * Every reason names its evidence (counts, times, up to three sample pids) and what to do. A survey with no
 * traffic is `ok`: no rule fires on silence, only on traffic that arrives without what should follow it.
 *
 * | code                       | state                 | fires when (defaults)                                                    |
 * |----------------------------|-----------------------|--------------------------------------------------------------------------|
 * | `postbacks_stopped`        | failing               | at least `stoppedMinRedirects` (5) redirects first seen in the last      |
 * |                            |                       | `stoppedMinutes` (30) but not in the last `graceMinutes` (10), and no    |
 * |                            |                       | postback at all in the last `stoppedMinutes`; once fired, it holds while |
 * |                            |                       | any redirect arrives (in a lull, in the two hours before), until a       |
 * |                            |                       | postback does                                                            |
 * | `success_without_postback` | warning               | success redirects first seen in [now - window - grace, now - grace):     |
 * |                            |                       | at least `uncoveredMin` (3) of them have no success postback and the     |
 * |                            |                       | coverage is below `coverageWarnPercent` (90)                             |
 * |                            | failing               | at least `coverageMinSuccess` (10) of them, coverage below               |
 * |                            |                       | `coverageFailPercent` (50)                                               |
 * | `refused_postbacks`        | warning               | at least `refusedWarnAt` (1) postbacks for the survey refused in the     |
 * |                            |                       | window (any code: signature, source address, input)                      |
 * |                            | failing               | at least `refusedKeyFailAt` (5) of them refused for a retired key with   |
 * |                            |                       | a signature that holds under it: the marketplace holds URLs this         |
 * |                            |                       | receiver no longer accepts (an unknown key id, which anyone can send,    |
 * |                            |                       | is a warning: a key is dropped 30 days after its retirement, by when its |
 * |                            |                       | refusals were failing for a month)                                      |
 * | `configuration_drift`      | warning               | the registry says the last apply was not verified (`verified` false with |
 * |                            |                       | a `lastError`): one failure, which the sync retries                      |
 * |                            | failing               | the marketplace read back something else than was applied (`read-back    |
 * |                            |                       | differs`), or `driftFailures` (2) refusals in a row, or 4 more failures  |
 * |                            |                       | of any kind (the marketplace not answering: an outage, not this survey)  |
 *
 * Redirects no postback backs count at most `CLAIMS_PER_SENDER` (3) per sender (the attempt's `redirectFrom`): a
 * claim anyone holding the static URL can send, one address's burst is a few claims, not a leaking survey.
 *
 * Coverage is success redirects with a success postback on the same attempt / success redirects. The grace
 * period is how long a postback may lag its redirect: redirects younger than that are never held against a
 * survey. `postbacks_stopped` counts redirects of every outcome, assuming the marketplace calls the fail postback
 * for every end that is not a success (the local marketplace does); set `stoppedMinRedirects` higher for a
 * marketplace that does not. The window itself is `windowMinutes` (15).
 */

import { shellWord, withoutSignatures } from '../shared/printable';

export const HEALTH_STATES = ['ok', 'warning', 'failing'] as const;
export type HealthState = (typeof HEALTH_STATES)[number];

export const REASON_CODES = [
  'postbacks_stopped',
  'success_without_postback',
  'refused_postbacks',
  'configuration_drift',
] as const;
export type ReasonCode = (typeof REASON_CODES)[number];

export interface HealthReason {
  readonly code: ReasonCode;
  readonly severity: Exclude<HealthState, 'ok'>;
  /** The evidence and what to do, in words. */
  readonly detail: string;
}

export interface HealthEvaluation {
  readonly state: HealthState;
  readonly reasons: readonly HealthReason[];
}

/** Every threshold of the rules; the defaults are what a deployment runs unless `HEALTH_*` says otherwise. */
export interface HealthSettings {
  readonly windowMinutes: number;
  readonly graceMinutes: number;
  readonly stoppedMinutes: number;
  readonly stoppedMinRedirects: number;
  readonly coverageWarnPercent: number;
  readonly coverageFailPercent: number;
  readonly coverageMinSuccess: number;
  readonly uncoveredMin: number;
  readonly refusedWarnAt: number;
  readonly refusedKeyFailAt: number;
  readonly driftFailures: number;
}

export const DEFAULT_HEALTH_SETTINGS: HealthSettings = {
  windowMinutes: 15,
  graceMinutes: 10,
  stoppedMinutes: 30,
  stoppedMinRedirects: 5,
  coverageWarnPercent: 90,
  coverageFailPercent: 50,
  coverageMinSuccess: 10,
  uncoveredMin: 3,
  refusedWarnAt: 1,
  refusedKeyFailAt: 5,
  driftFailures: 2,
};

/** What one attempt tells the rules: when each channel first reported, in UTC ISO-8601. */
export interface AttemptSightings {
  readonly pid: string;
  /** The transaction token (absent on sightings built before it was kept). */
  readonly token?: string | undefined;
  /** Who sent its first redirect (a fingerprint of the address); absent on attempts recorded before it was kept. */
  readonly redirectFrom?: string | undefined;
  /** The first redirect of any outcome. */
  readonly redirectAt?: string | undefined;
  readonly successRedirectAt?: string | undefined;
  /** The first postback of either outcome. */
  readonly postbackAt?: string | undefined;
  readonly successPostbackAt?: string | undefined;
}

/** Refused postbacks claiming the survey, as counted: per code and minute, with the first one's pid. */
export interface RefusedPostbacks {
  readonly at: string;
  readonly code: string;
  readonly hits: number;
  readonly pid?: string | undefined;
}

/** What the survey registry says of the last configuration this receiver applied at the marketplace. */
export interface RegistrationFacts {
  readonly verified: boolean;
  readonly lastError?: string | undefined;
  readonly lastErrorAt?: string | undefined;
  /** Of the failures in a row, those that were the marketplace not answering. */
  readonly unavailableFailures?: number | undefined;
  readonly failures: number;
}

/** A survey's recent traffic as the ledger holds it. */
export interface SurveyWindow {
  readonly surveyId: string;
  /** Attempts first seen since `readFrom(settings, now)`. */
  readonly attempts: readonly AttemptSightings[];
  /** Refused postbacks claiming the survey (any time; the rule keeps the window's). */
  readonly refused: readonly RefusedPostbacks[];
  readonly registration?: RegistrationFacts | undefined;
  /** The latest postback known from before (the stored health state), as evidence only. */
  readonly lastPostbackAt?: string | undefined;
  /**
   * Whether `postbacks_stopped` fired at the survey's last stored evaluation: it then holds while any redirect keeps
   * arriving without a postback, not only while `stoppedMinRedirects` do (a quiet half hour of a survey whose
   * postbacks stopped is no recovery).
   */
  readonly postbacksStopped?: boolean | undefined;
  /**
   * For a survey `postbacks_stopped` would fire for, or one failing for it in a lull (no redirect in the span the
   * rule counts), its attempts first seen in the HOLD_LOOKBACK_MINUTES before the window: a postback of the last
   * half hour there clears it (late postbacks of earlier redirects); in a lull, redirects there and no postback
   * since hold it failing.
   */
  readonly earlier?: readonly AttemptSightings[] | undefined;
}

/** How far back a survey failing for `postbacks_stopped` is looked at in a lull before it counts as quiet. */
export const HOLD_LOOKBACK_MINUTES = 120;

const MINUTE = 60_000;

/**
 * Redirects a postback does not back, counted per sender: at most this many from one address. One person holding
 * a success URL (every respondent who completed once) can send any number of claims, but from one address they
 * count as a few (a warning at most), while a genuine outage shows in many respondents' redirects (respondents
 * behind one carrier's shared address count this many, enough for the rules to fire with others).
 */
export const CLAIMS_PER_SENDER = 3;

/**
 * Senders `postbacks_stopped` needs among its redirects to start: one person's home answers from an IPv4 address and
 * an IPv6 /64 (two senders, six claims), while a real outage shows in more respondents' redirects than that.
 */
export const STOPPED_MIN_SENDERS = 3;

/** How many senders the attempts came from (one whose sender is not known counts as one of its own). */
const sendersOf = (attempts: readonly AttemptSightings[]) =>
  new Set(attempts.map((a, i) => a.redirectFrom ?? `unknown#${i}`)).size;

/** The attempts, at most `CLAIMS_PER_SENDER` of them per sender (one with no sender known is its own). */
function perSender<T extends AttemptSightings>(attempts: readonly T[]): { kept: T[]; left: number } {
  const bySender = new Map<string, number>();
  const kept: T[] = [];
  for (const attempt of attempts) {
    const sender = attempt.redirectFrom;
    const seen = sender === undefined ? 0 : (bySender.get(sender) ?? 0);
    if (seen >= CLAIMS_PER_SENDER) continue;
    if (sender !== undefined) bySender.set(sender, seen + 1);
    kept.push(attempt);
  }
  return { kept, left: attempts.length - kept.length };
}

/** What the rules say of redirects left out because one sender sent more than its share. */
const leftOut = (left: number) =>
  left > 0 ? ` (${left} more from senders that sent over ${CLAIMS_PER_SENDER} each not counted)` : '';
/** The signature refusals that mean the marketplace holds URLs signed with a key this receiver refuses. */
const KEY_REFUSALS = new Set(['signature_retired_key', 'signature_unknown_key']);
/**
 * Refusals only a holder of a genuine URL can cause: the signature holds, under a key retired since, or under a
 * current one and the postback refused for its source address or what it carries.
 */
const GENUINE_REFUSALS = new Set(['signature_retired_key', 'signed_forbidden', 'signed_input']);

/** How far back a survey's attempts must be read for the rules to see everything they judge. */
export function readFrom(settings: HealthSettings, now: Date): Date {
  const span = Math.max(settings.windowMinutes + settings.graceMinutes, settings.stoppedMinutes);
  return new Date(now.getTime() - span * MINUTE);
}

/** A survey's health: every rule's reason, and the worst severity among them (`ok` when none fires). */
export function evaluateHealth(window: SurveyWindow, settings: HealthSettings, now: Date): HealthEvaluation {
  const reasons = [
    postbacksStopped(window, settings, now),
    successWithoutPostback(window, settings, now),
    refusedPostbacks(window, settings, now),
    configurationDrift(window, settings),
  ].filter((reason): reason is HealthReason => reason !== undefined);
  const state = reasons.some((r) => r.severity === 'failing')
    ? 'failing'
    : reasons.length > 0
      ? 'warning'
      : 'ok';
  return { state, reasons };
}

/** Redirects keep arriving (and had time for their postbacks) while no postback arrives at all. */
export function postbacksStopped(
  window: SurveyWindow,
  settings: HealthSettings,
  now: Date,
): HealthReason | undefined {
  const from = ago(now, settings.stoppedMinutes);
  const until = ago(now, settings.graceMinutes);
  const inOrder = (attempts: readonly AttemptSightings[]) =>
    [...attempts].sort((a, b) => String(a.redirectAt).localeCompare(String(b.redirectAt)));
  let { kept: redirects, left } = perSender(
    inOrder(window.attempts.filter((a) => within(a.redirectAt, from, until))),
  );
  // A postback in the half hour on any attempt, one first seen before the window too (the marketplace working off
  // a queue sends them long after their redirects).
  if ([...window.attempts, ...(window.earlier ?? [])].some((a) => within(a.postbackAt, from, now)))
    return undefined;
  // To start, redirects from a few senders (see STOPPED_MIN_SENDERS).
  if (!window.postbacksStopped && sendersOf(redirects) < STOPPED_MIN_SENDERS) return undefined;
  // Once fired, a postback clears it, or silence (no redirect for the lookback and the window), not a lull below
  // the threshold: a survey of a few respondents an hour has half hours of none.
  if (redirects.length < (window.postbacksStopped ? 1 : settings.stoppedMinRedirects)) {
    if (!window.postbacksStopped || !window.earlier) return undefined;
    const lookback = ago(now, HOLD_LOOKBACK_MINUTES);
    // The redirects no postback came after (one from before the postbacks stopped is no recovery).
    const lastPostback = latest(window.earlier.map((a) => a.postbackAt));
    ({ kept: redirects, left } = perSender(
      inOrder(
        window.earlier.filter(
          (a) =>
            within(a.redirectAt, lookback, from) &&
            (lastPostback === undefined || String(a.redirectAt) > lastPostback),
        ),
      ),
    ));
    if (redirects.length === 0) return undefined;
  }
  const last = latest([
    ...[...window.attempts, ...(window.earlier ?? [])].map((a) => a.postbackAt),
    window.lastPostbackAt,
  ]);
  const id = window.surveyId;
  return {
    code: 'postbacks_stopped',
    severity: 'failing',
    detail:
      `${redirects.length} redirects first seen from ${redirects[0]?.redirectAt} to ${redirects.at(-1)?.redirectAt}` +
      ` (pids ${samples(redirects.map((a) => a.pid))})${leftOut(left)} and no postback since ${from.toISOString()}; ` +
      (last ? `the last postback seen was at ${last}. ` : 'no postback seen for this survey at all. ') +
      `Check the marketplace still holds this receiver's postback URLs: npm run cli -- redirects show --survey ${id}; ` +
      `if they differ, npm run cli -- redirects apply --survey ${id} --force. ` +
      `Refused postbacks (retired key, source address): ${rejectedCommand(from, now)}.`,
  };
}

/**
 * The `rejected` command for each UTC day from `from` to `now`: refusals are kept by the UTC day they came, and a
 * window that began before UTC midnight (16:00 or 17:00 Pacific) has those of the day before.
 */
function rejectedCommand(from: Date, now: Date): string {
  const days = [...new Set([from, now].map((at) => at.toISOString().slice(0, 10)))];
  return days.map((day) => `npm run cli -- rejected --day ${day}`).join(' and ');
}

/** Success redirects that had time for their success postback and did not get it. */
export function successWithoutPostback(
  window: SurveyWindow,
  settings: HealthSettings,
  now: Date,
): HealthReason | undefined {
  const from = ago(now, settings.windowMinutes + settings.graceMinutes);
  const until = ago(now, settings.graceMinutes);
  const inWindow = window.attempts.filter((a) => within(a.successRedirectAt, from, until));
  // A success redirect its postback backs is genuine; the others are claims, counted per sender. The postback may
  // have come under another spelling of the pid (a `+` one channel left raw, the other sent as `%2B`): the token's
  // success postback backs it, as reconciliation judges the token once.
  const postbackTokens = new Set(
    window.attempts.flatMap((a) =>
      a.successPostbackAt !== undefined && a.token !== undefined ? [a.token] : [],
    ),
  );
  const backed = (a: AttemptSightings) =>
    a.successPostbackAt !== undefined || (a.token !== undefined && postbackTokens.has(a.token));
  const covered = inWindow.filter(backed);
  const { kept: uncovered, left } = perSender(
    inWindow
      .filter((a) => !backed(a))
      .sort((a, b) => String(a.successRedirectAt).localeCompare(String(b.successRedirectAt))),
  );
  const successes = [...covered, ...uncovered];
  if (successes.length === 0 || uncovered.length === 0) return undefined;
  const coverage = ((successes.length - uncovered.length) * 100) / successes.length;
  const failing = successes.length >= settings.coverageMinSuccess && coverage < settings.coverageFailPercent;
  const warning = uncovered.length >= settings.uncoveredMin && coverage < settings.coverageWarnPercent;
  if (!failing && !warning) return undefined;
  const id = window.surveyId;
  const firstPid = uncovered[0]?.pid ?? '';
  return {
    code: 'success_without_postback',
    severity: failing ? 'failing' : 'warning',
    detail:
      `${uncovered.length} of ${successes.length} success redirects first seen from ${from.toISOString()} to ${until.toISOString()}` +
      ` have no success postback after ${settings.graceMinutes} minute${settings.graceMinutes === 1 ? '' : 's'}${leftOut(left)} (coverage ${Math.floor(coverage)}%;` +
      ` pids ${samples(uncovered.map((a) => a.pid))}, the first at ${uncovered[0]?.successRedirectAt}). ` +
      `One attempt's story: npm run cli -- attempt --survey ${id} --pid=${shellWord(firstPid)}; ` +
      `the marketplace's settings: npm run cli -- redirects show --survey ${id}. ` +
      'Success redirects nothing backs can also be forged: see the unverified claims of npm run cli -- report.',
  };
}

/** Postbacks claiming the survey that this receiver refused: by code, with a retired or unknown key the worst. */
export function refusedPostbacks(
  window: SurveyWindow,
  settings: HealthSettings,
  now: Date,
): HealthReason | undefined {
  // Refusals are counted per UTC minute: every minute the window touches is in it.
  const from = ago(now, settings.windowMinutes);
  const firstMinute = from.toISOString().slice(0, 16);
  const refused = window.refused.filter(
    (r) => r.at.slice(0, 16) >= firstMinute && Date.parse(r.at) < now.getTime(),
  );
  const total = refused.reduce((sum, r) => sum + r.hits, 0);
  if (total === 0 || total < settings.refusedWarnAt) return undefined;
  const byCode = new Map<string, number>();
  for (const r of refused) byCode.set(r.code, (byCode.get(r.code) ?? 0) + r.hits);
  const genuine = [...byCode].reduce((sum, [code, n]) => sum + (GENUINE_REFUSALS.has(code) ? n : 0), 0);
  const id = window.surveyId;
  const listing = rejectedCommand(new Date(refused.map((r) => r.at).sort()[0] as string), now);
  const advice = [
    byCode.has('signature_retired_key')
      ? `The marketplace calls URLs signed with a retired key: npm run cli -- redirects apply --survey ${id} --force re-signs them with the current key; retire a key only after every survey was re-applied (redirects rotate keeps old keys until --retire-in-hours).`
      : '',
    byCode.has('signature_unknown_key')
      ? `Postbacks with a key id this receiver does not know: forged (anyone can send one), unless it is a key of yours dropped 30 days after its retirement, which redirects apply --survey ${id} --force replaces.`
      : '',
    byCode.has('signed_forbidden')
      ? 'Postbacks whose signature holds came from an address outside POSTBACK_SOURCE_CIDRS: the marketplace sends from servers it did not use before; add them to the allow-list (until then they are refused, and lost).'
      : '',
    byCode.has('forbidden')
      ? 'Postbacks from an address outside POSTBACK_SOURCE_CIDRS whose signature does not hold either: forged, most likely.'
      : '',
    byCode.has('signed_input')
      ? `Postbacks whose signature holds were refused for what they carry (a placeholder left unsubstituted, a body that does not read), and are lost: ${listing} says why.`
      : '',
    [...byCode.keys()].some(
      (code) => !KEY_REFUSALS.has(code) && !GENUINE_REFUSALS.has(code) && code !== 'forbidden',
    )
      ? `Forged, damaged or malformed postbacks: ${listing}.`
      : '',
  ].filter(Boolean);
  return {
    code: 'refused_postbacks',
    severity: genuine >= settings.refusedKeyFailAt ? 'failing' : 'warning',
    detail:
      `${total} postbacks for this survey refused since ${from.toISOString().slice(0, 16)}Z: ` +
      [...byCode]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([code, n]) => `${n} ${code}`)
        .join(', ') +
      ` (pids ${samples(refused.map((r) => r.pid ?? '-'))}, first at ${refused[0]?.at}). ${advice.join(' ')}`,
  };
}

/** Failures in a row beyond `driftFailures` before a survey the marketplace did not answer for is failing. */
export const OUTAGE_EXTRA_FAILURES = 4;

/** The marketplace does not hold, or did not read back, what this receiver applied. */
export function configurationDrift(window: SurveyWindow, settings: HealthSettings): HealthReason | undefined {
  const registration = window.registration;
  if (!registration || registration.verified || !registration.lastError) return undefined;
  const readBack = registration.lastError.startsWith('read-back differs');
  // Failures that were the marketplace not answering (an outage reaches every survey at once) count toward failing
  // only once they have lasted through several retries (about four hours on the sync's backoff), so an outage is
  // not a notice per survey; refusals count as ever.
  const refusals = registration.failures - (registration.unavailableFailures ?? 0);
  const failing =
    readBack ||
    refusals >= settings.driftFailures ||
    registration.failures >= settings.driftFailures + OUTAGE_EXTRA_FAILURES;
  const id = window.surveyId;
  return {
    code: 'configuration_drift',
    severity: failing ? 'failing' : 'warning',
    detail:
      `The last configuration of this survey at the marketplace was not verified: ${clip(withoutSignatures(registration.lastError), 200)}` +
      ` (at ${registration.lastErrorAt ?? 'an unknown time'}, ${registration.failures} failures in a row). ` +
      `What the marketplace holds, field by field: npm run cli -- redirects show --survey ${id}; ` +
      `apply again: npm run cli -- redirects apply --survey ${id}` +
      (failing ? '.' : ' (the scheduled sync also retries it).'),
  };
}

const ago = (now: Date, minutes: number) => new Date(now.getTime() - minutes * MINUTE);

/** Whether an ISO instant lies in [from, to). */
const within = (at: string | undefined, from: Date, to: Date): boolean => {
  if (at === undefined) return false;
  const t = Date.parse(at);
  return t >= from.getTime() && t < to.getTime();
};

const latest = (times: readonly (string | undefined)[]): string | undefined =>
  times
    .filter((t): t is string => t !== undefined)
    .sort()
    .at(-1);

/** Up to three distinct pids, quoted (they are the supplier's and can hold any text), clipped. */
function samples(pids: readonly string[]): string {
  return [...new Set(pids)]
    .slice(0, 3)
    .map((pid) => JSON.stringify(clip(pid, 64)))
    .join(', ');
}

const clip = (text: string, characters: number) => Array.from(text).slice(0, characters).join('');
