/**
 * What the health rules read, from what the receivers already wrote: a survey's attempts first seen in the
 * trailing span (through the day index: a keys-only Query per UTC day, then BatchGet), refused postbacks of the
 * window (one key-range Query per UTC day for every survey at once), the survey registry's entry, and the
 * stored health. Nothing here is on the hit path: a hit still costs one write and no read.
 */
import type { LedgerStore, RejectedHits, SurveyRegistration } from '../ledger/ledger-store';
import type { Attempt } from '../receiving/attempt';
import {
  type AttemptSightings,
  type HealthSettings,
  type RefusedPostbacks,
  type RegistrationFacts,
  readFrom,
  type SurveyWindow,
} from './health-rules';

/** When each channel of an attempt first reported: the only part of an attempt the rules read. */
export function sightingsOf(attempt: Attempt): AttemptSightings {
  const first = (times: readonly string[]) => [...times].sort()[0];
  const redirects = attempt.redirect?.sightings ?? [];
  const postbacks = attempt.postback?.sightings ?? [];
  return {
    pid: attempt.pid,
    redirectAt: first(redirects.map((s) => s.firstAt)),
    successRedirectAt: redirects.find((s) => s.outcome === 'success')?.firstAt,
    postbackAt: first(postbacks.map((s) => s.firstAt)),
    successPostbackAt: postbacks.find((s) => s.outcome === 'success')?.firstAt,
  };
}

/** Refused postbacks by the survey they claimed; refused redirects are left out (they key no survey). */
export function refusedBySurvey(hits: readonly RejectedHits[]): Map<string, RefusedPostbacks[]> {
  const bySurvey = new Map<string, RefusedPostbacks[]>();
  for (const hit of hits) {
    if (hit.channel !== 'postback' || !hit.surveyId || !hit.code) continue;
    const list = bySurvey.get(hit.surveyId) ?? [];
    list.push({ at: hit.at, code: hit.code, hits: hit.hits, pid: hit.pid });
    bySurvey.set(hit.surveyId, list);
  }
  return bySurvey;
}

export const registrationFacts = (registration: SurveyRegistration): RegistrationFacts => ({
  verified: registration.verified,
  lastError: registration.lastError,
  lastErrorAt: registration.lastErrorAt,
  failures: registration.failures,
});

/** The refused postbacks of the window, every survey's, in one read per UTC day. */
export async function readRefused(
  store: Pick<LedgerStore, 'rejectedHitsBetween'>,
  settings: HealthSettings,
  now: Date,
): Promise<Map<string, RefusedPostbacks[]>> {
  const from = new Date(now.getTime() - settings.windowMinutes * 60_000);
  return refusedBySurvey(await store.rejectedHitsBetween(from, now));
}

/** One survey's window: its attempts of the span the rules need, with what was read once for all surveys. */
export async function readSurveyWindow(
  store: Pick<LedgerStore, 'attemptsOfSurvey'>,
  context: {
    readonly surveyId: string;
    readonly settings: HealthSettings;
    readonly now: Date;
    readonly refused: ReadonlyMap<string, readonly RefusedPostbacks[]>;
    readonly registration?: SurveyRegistration | undefined;
    readonly lastPostbackAt?: string | undefined;
  },
): Promise<SurveyWindow> {
  const { surveyId, settings, now } = context;
  const attempts = await store.attemptsOfSurvey(surveyId, readFrom(settings, now), now);
  return {
    surveyId,
    attempts: attempts.map(sightingsOf),
    refused: context.refused.get(surveyId) ?? [],
    registration: context.registration ? registrationFacts(context.registration) : undefined,
    lastPostbackAt: context.lastPostbackAt,
  };
}
