/**
 * Pointing surveys' redirects and postbacks at this receiver, and keeping them there: apply (always all nine
 * fields, then read back and compare), remove, show, sync new surveys from a checkpoint, and rotate the signing
 * key. Orchestration only: the marketplace, the registry and the key ring are handed in.
 *
 * Over 300 lines on purpose: apply, verify, remove, show, sync and rotate are one engine over the same registry
 * and settings comparison; the CLI and the scheduled sync each use most of it.
 */

import { randomUUID } from 'node:crypto';
import {
  pricedAt,
  SERVING_GAPS_KEPT_MS,
  type SurveyRegistration,
  type SurveyRegistry,
} from '../ledger/ledger-store';
import { identifierProblem } from '../receiving/identifiers';
import { type KeyRing, parseKeyRing, rotateKeyRing, serializeKeyRing } from '../receiving/signing';
import { buildSurveyUrls } from '../receiving/survey-urls';
import { runBounded, valuesOrThrow } from '../shared/bounded-work';
import { sameAmount } from '../shared/money';
import { withoutSignatures } from '../shared/printable';
import {
  ABOUT_THE_CALLER,
  MARKETPLACE_DOWN_SURVEYS,
  type MalformedRow,
  type MarketplaceClient,
  MarketplaceError,
  marketplaceDown,
  type Rows,
  SAYS_NO_REDIRECTS,
  SAYS_NOT_LIVE,
} from './marketplace-client';
import type { RedirectSettings, Survey } from './marketplace-records';
import {
  desiredRedirectSettings,
  type FieldDifference,
  type PostbackMethods,
  settingsDifferences,
  settingsFingerprint,
} from './redirect-settings';

export const SYNC_CHECKPOINT = 'redirect-sync';
/**
 * The checkpoint is set this far before the run began. Beyond clock skew: a marketplace that reads the listing's
 * UTC time as its own Pacific wall time (its public controller converts it as such) lists only surveys changed
 * up to eight hours later than asked, so nine hours of overlap keep a survey changed meanwhile from being lost.
 */
export const SYNC_OVERLAP_MS = 9 * 3_600_000;
/**
 * When the sync last compared every live survey with the registry. Whatever the listing by date leaves out (its
 * time filter, a survey allocated to us after its last change), a survey live for an hour is configured.
 */
export const FULL_LISTING_CHECKPOINT = 'redirect-sync-full';
export const FULL_LISTING_EVERY_MS = 3_600_000;
/**
 * Registered surveys missing from the list of live surveys looked up per run at most, to record them closed, when
 * not set (`closureLookupsPerRun`): this many, or one in `CLOSURE_LOOKUP_SHARE` of the open active surveys if more
 * (a supplier with 20,000 live surveys closes hundreds a day: 200 an hourly run, where 50 took a day to record a
 * burst of 1,000 closures).
 */
export const CLOSURE_LOOKUPS_PER_RUN = 50;
export const CLOSURE_LOOKUP_SHARE = 100;
/** How often a survey recorded closed is looked up in case it was resumed, and for how long after its closure. */
export const RESUME_LOOKUP_EVERY_MS = 24 * 3_600_000;
export const RESUME_LOOKUP_FOR_MS = 30 * 24 * 3_600_000;
/** Ended registrations an hourly run moves out of the live part of the index (a table an earlier release wrote). */
export const RELOCATIONS_PER_RUN = 500;
/** Set once a run finds no ended registration left in the live part: later runs do not look again. */
export const RELOCATED_CHECKPOINT = 'registry-ended-relocated';
/** Why an apply that set and read back its settings is not recorded verified: another writer set them meanwhile. */
const APPLIED_TWICE =
  'applied at the same time by another run (a rotation, the sync, an operator): which settings the marketplace kept is not known; the next sync run applies them again';
/** What a failure to look a survey up is recorded as (`lastError`), apart from a failure to apply it. */
const LOOKUP_FAILED = 'lookup: ';

/**
 * A survey whose apply or verification keeps failing is retried at the next run, then after 15 minutes, doubling
 * up to a day: a read-back the marketplace will never give as sent costs a few calls a day, not three every run.
 */
export function retryDelayMs(failures: number): number {
  return failures <= 1 ? 0 : Math.min(24 * 3_600_000, 15 * 60_000 * 2 ** (failures - 2));
}

/** A refusal that says the survey has no redirects of its own (`No survey specific redirects found`), not a closed one's. */
function noSurveyRedirects(error: MarketplaceError): boolean {
  const said = error.marketplaceMessage ?? '';
  return (
    refusedAsMissing(error) &&
    SAYS_NO_REDIRECTS.test(said) &&
    !/closed|paused|not live|unknown|does not exist/i.test(said)
  );
}

/**
 * A refusal with the status the marketplace answers a missing thing with: 404, or 400, which it answers errors with
 * as well (field notes: `{"apiStatus":"Failure","msg":...}` with 400 or 404), so a 400 only with words of it.
 */
function refusedAsMissing(error: MarketplaceError): boolean {
  const said = error.marketplaceMessage ?? '';
  // A refusal of the caller, not of the survey (an access token refused, a rate limit), whichever status it came
  // with: read as "no such survey", it recorded every survey of a rotation closed, and a removal done. Not one that
  // says a survey is not found, whatever it adds ("check the survey id and your token"); "token not found" is the
  // caller's.
  if (ABOUT_THE_CALLER.test(said) && !SAYS_SURVEY_NOT_FOUND.test(said)) return false;
  if (error.httpStatus === 404) return true;
  return (
    error.httpStatus === 400 &&
    /\bno (?:such|survey|data|record|redirect)|not found|does not exist|doesn't exist/i.test(said)
  );
}

/** Words of a refusal that says a survey is not found. */
const SAYS_SURVEY_NOT_FOUND =
  /\bsurvey\b.*(?:not found|does not exist|doesn't exist)|(?:not found|does not exist|doesn't exist|no such).*\bsurvey\b/i;

/** Results that mean the marketplace answered. */
const ANSWERED: ReadonlySet<SurveyResult['status']> = new Set(['applied', 'unchanged', 'removed', 'closed']);

/** A lookup's 404 that says in words the survey does not exist (not that it is closed or paused). */
const SAYS_UNKNOWN = /not found|does not exist|doesn't exist|no such|unknown survey|invalid survey/i;

/**
 * When the survey has been this stack's (`servingSince`): the first apply the marketplace took (`taken`), kept from
 * then on, through rotations and a removal and a later apply (rows of the first time that no run has judged yet stay
 * this stack's: read as before the second apply, a complete lost then was hidden). Until one is taken, a registration
 * this release made says so (`neverTaken`); one without either is older than the field (an older release's, whatever
 * it recorded: verified or not, removed or not) and keeps none: no bound, rather than a guess. A survey removed here
 * without ever having been applied (`neverApplied`) has not been this stack's either.
 */
function servingSince(
  registration: SurveyRegistration | undefined,
  at: string,
  taken: boolean,
): {
  servingSince?: string;
  neverTaken?: true;
  notServing?: readonly { readonly from: string; readonly to: string }[];
  notServingSince?: string;
} {
  // Applied after a removal (or a refused apply after one): the time since was another system's, until an apply the
  // marketplace takes closes it (its rows are not this stack's to account for, before this apply or after it: a run
  // judging those days again must leave them out as well). Kept while a review may still read them.
  const openFrom =
    registration?.notServingSince ??
    (registration?.state === 'removed' && !registration.neverApplied ? registration.removedAt : undefined);
  const kept = (registration?.notServing ?? []).filter(
    ({ to }) => Date.parse(to) >= Date.parse(at) - SERVING_GAPS_KEPT_MS,
  );
  const gaps = openFrom !== undefined && taken ? [...kept, { from: openFrom, to: at }] : kept;
  const between = {
    ...(gaps.length > 0 ? { notServing: gaps } : {}),
    ...(openFrom !== undefined && !taken ? { notServingSince: openFrom } : {}),
  };
  if (registration?.servingSince) return { servingSince: registration.servingSince, ...between };
  const notYet = !registration || registration.neverTaken === true || registration.neverApplied === true;
  // An older release's registration keeps no start, but the time it was removed is known all the same.
  if (!notYet) return between;
  return taken ? { servingSince: at } : { neverTaken: true };
}

/** What applying found drifted again did: applied or not, the drift is reported (its alarm is how anyone hears). */
function withDrift(result: SurveyResult, drifted: readonly string[]): SurveyResult {
  return result.status === 'applied' || result.status === 'failed' ? { ...result, drifted } : result;
}

/** A marketplace call this product makes (or, in a dry run, would make). */
export interface PlannedCall {
  readonly method: 'PUT' | 'DELETE';
  readonly path: string;
  readonly body?: RedirectSettings;
}

export type SurveyResult =
  | {
      readonly surveyId: string;
      readonly status: 'applied';
      readonly kid: string;
      /** Applied again because the daily read-back found these fields changed at the marketplace. */
      readonly drifted?: readonly string[];
    }
  | { readonly surveyId: string; readonly status: 'unchanged' }
  | { readonly surveyId: string; readonly status: 'removed' }
  /** Dropped out of the list of live surveys, and the marketplace says it is Paused/Closed: recorded. */
  | { readonly surveyId: string; readonly status: 'closed'; readonly reason: string }
  | { readonly surveyId: string; readonly status: 'would-apply' | 'would-remove'; readonly call: PlannedCall }
  | { readonly surveyId: string; readonly status: 'skipped'; readonly reason: string }
  | { readonly surveyId: string; readonly status: 'deferred'; readonly reason: string }
  | {
      readonly surveyId: string;
      readonly status: 'failed';
      readonly error: string;
      /** Found changed at the marketplace by the daily read-back; the apply that followed failed (or its check). */
      readonly drifted?: readonly string[];
    };

export interface SyncReport {
  readonly since: string;
  /** The new checkpoint, or undefined when it did not move (dry run, or nothing could be processed). */
  readonly checkpoint?: string;
  readonly discovered: number;
  readonly retried: number;
  /** Verified surveys whose redirects were read back (daily, `REVERIFY_AFTER_MS`). */
  readonly reverified: number;
  readonly malformed: readonly MalformedRow[];
  readonly results: readonly SurveyResult[];
  /**
   * The marketplace refused a listing (by date, or of every live survey): the checkpoint stayed, the retries and
   * read-backs ran all the same, and the next run lists again.
   */
  readonly listingError?: string;
  /** The hourly list of every live survey was refused (reported; tried again an hour later, not counted). */
  readonly fullListingError?: string;
  /** Live surveys the full listing found that the registry did not know (configured this run). */
  readonly unlisted?: number;
}

/**
 * How long a verified survey's redirects are trusted before the sync reads them back: someone may change them at
 * the marketplace (its console, another integration), and then postbacks no longer come here.
 */
export const REVERIFY_AFTER_MS = 24 * 3_600_000;
/** A read-back the marketplace did not answer is due again this much later, not a day later. */
export const UNANSWERED_READ_BACK_RETRY_MS = 3_600_000;
/** Daily read-backs of a verified survey that fail in a row before it is taken as unverified and applied again. */
export const READ_BACK_TRIES = 3;
/** How long after a counted read-back failure another counts (the daily read-back comes every 24 hours). */
const READ_BACK_FAILURE_SPACING_MS = 20 * 3_600_000;
/**
 * Read-backs per sync run at most, the longest unverified first, when not set (REDIRECT_READBACKS_PER_RUN): this
 * many, or enough for every verified live survey in `READ_BACK_RUNS_PER_DAY` runs if more. The 15-minute schedule
 * runs 96 times a day, so a quarter of the runs may defer or fail and each survey is still read back daily (at a
 * fixed 50 a run, a supplier with 20,000 live surveys had surveys unread for three days).
 */
export const REVERIFY_PER_RUN = 50;
export const READ_BACK_RUNS_PER_DAY = 72;

/** Read-backs per run for `verified` live surveys when the setting leaves it to the sync. */
export const readBacksPerRunFor = (verified: number) =>
  Math.max(REVERIFY_PER_RUN, Math.ceil(verified / READ_BACK_RUNS_PER_DAY));
/** Closure lookups per run for `open` active surveys (not recorded closed) when the setting leaves it to the sync. */
export const closureLookupsPerRunFor = (open: number) =>
  Math.max(CLOSURE_LOOKUPS_PER_RUN, Math.ceil(open / CLOSURE_LOOKUP_SHARE));

export interface SurveyComparison {
  readonly surveyId: string;
  readonly live: boolean | 'unknown';
  readonly expected: Required<RedirectSettings>;
  readonly actual: RedirectSettings;
  readonly differences: readonly FieldDifference[];
  readonly registration?: SurveyRegistration;
}

export interface RotationReport {
  readonly kid: string;
  readonly previousKid: string;
  readonly retireAt: string;
  readonly results: readonly SurveyResult[];
}

export interface RedirectConfigurationDeps {
  readonly marketplace: MarketplaceClient;
  readonly registry: SurveyRegistry;
  readonly keyRing: () => Promise<KeyRing>;
  /** Saves a rotated ring where the receivers read it (needed by rotate only). */
  readonly saveKeyRing?: (ring: KeyRing) => Promise<void>;
  readonly publicBaseUrl: string;
  /** The postbacks' own host (default `publicBaseUrl`). */
  readonly postbackBaseUrl?: string;
  readonly methods: PostbackMethods;
  readonly now?: () => Date;
  /** Surveys worked on at once (the marketplace client limits its own calls too). */
  readonly concurrency?: number;
  /** Where sync starts before its first checkpoint. */
  readonly initialSince?: Date;
  /** Verified surveys read back per sync run at most (default `readBacksPerRunFor` the verified live ones; 0: none). */
  readonly readBacksPerRun?: number;
  /** Surveys the hourly list of live surveys left out, looked up per run at most (default `closureLookupsPerRunFor`). */
  readonly closureLookupsPerRun?: number;
  readonly onResult?: (result: SurveyResult, done: number, total: number) => void;
  /** Waits (a rotation lets its new ring settle before it hands out a URL signed with the new key). */
  readonly sleep?: (ms: number) => Promise<void>;
}

/**
 * How long a rotation keeps its new key accepted but not current before making it current and applying the first
 * survey with it: a receiver looks a key id it does not know up afresh at most once in `UNKNOWN_KEY_REFRESH_MS`
 * (key-ring-source.ts), so one that looked up an unknown id (a forgery, a postback re-sent with a key long dropped)
 * just before the save would refuse the new key's first postbacks until that pause ended; and a secret's new value
 * may take seconds to be read everywhere. Three of those pauses, and no URL with the new key exists (none signed by
 * the rotation, none by a sync running meanwhile) before every receiver can learn it.
 */
export const ROTATION_SETTLE_MS = 15_000;
/** How long after the wait the old keys stay accepted at the least: the applies that move the surveys off them. */
export const RETIREMENT_AFTER_SETTLE_MS = 60_000;
/** How long a rotation holds the ring at most (its reading, two saves and the wait between): one killed frees it then. */
const ROTATION_LEASE_MS = 2 * 60_000;

/** A survey's price as the marketplace listed it, and when the survey last changed there (epoch ms). */
interface ListedPrice {
  readonly cpi: string;
  readonly changedAt?: number | undefined;
}

export interface RedirectRunOptions {
  readonly dryRun?: boolean;
  /** Apply even when the registry says the survey is already configured and verified. */
  readonly force?: boolean;
  /** Stop taking up new surveys after this instant (a Lambda's deadline). */
  readonly deadline?: Date;
}

class VerificationFailed extends Error {
  constructor(readonly differences: readonly FieldDifference[]) {
    // Field names only: the values are signed URLs, and a postback URL is a credential.
    super(`read-back differs in ${differences.map((d) => d.field).join(', ')}`);
  }
}

export function redirectConfiguration(deps: RedirectConfigurationDeps) {
  const now = deps.now ?? (() => new Date());
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  /**
   * Runs a rotation's reading and saving of the ring under a lease in the registry: two rotations reading the same
   * ring would both make the next key id, with two secrets, and the receivers that cached the first would refuse the
   * second's signatures until their cache expired. A dry run saves nothing and takes none.
   */
  const oneRotationAtATime = async <T>(
    options: RedirectRunOptions,
    work: (stillHeld: () => Promise<void>) => Promise<T>,
  ): Promise<T> => {
    const holder = randomUUID();
    const take = () =>
      deps.registry.takeLease('rotation', holder, new Date(now().getTime() + ROTATION_LEASE_MS), now());
    if (options.dryRun) return work(async () => undefined);
    const lease = await take();
    if (!lease.taken)
      throw new Error(
        `another rotation is saving the key ring (until ${lease.heldUntil ?? 'a moment from now'} at most): run this one after it`,
      );
    try {
      // Before each save: held still (and for as long again), or nothing more is saved. One stalled past its lease
      // (a laptop asleep in the wait) must not save over a rotation that took the ring meanwhile.
      return await work(async () => {
        if (!(await take()).taken)
          throw new Error(
            'this rotation lost its hold on the key ring (it stalled, and another rotation took it): nothing more saved; run redirects rotate again',
          );
      });
    } finally {
      await deps.registry.releaseLease('rotation', holder, now()).catch(() => undefined);
    }
  };
  const concurrency = deps.concurrency ?? 4;
  /**
   * Surveys in a row (of the run at hand) whose marketplace calls failed because it did not answer or refused every
   * call (`marketplaceDown`): at MARKETPLACE_DOWN_SURVEYS the run takes up no more, as reconciliation does.
   */
  let downInRow = 0;
  const noteFailure = (error: unknown) => {
    downInRow = marketplaceDown(error) ? downInRow + 1 : 0;
  };

  const desiredFor = (surveyId: string, ring: KeyRing) =>
    desiredRedirectSettings(
      buildSurveyUrls(deps.publicBaseUrl, surveyId, ring, deps.postbackBaseUrl),
      deps.methods,
    );

  /** Applies one survey's settings; `cpi` is the survey's price as just listed, kept for reconciliation. */
  async function applyOne(
    surveyId: string,
    ring: KeyRing,
    options: RedirectRunOptions,
    listedPrice?: ListedPrice,
    ringAt?: string,
    { named = false }: { readonly named?: boolean } = {},
  ): Promise<SurveyResult> {
    const desired = desiredFor(surveyId, ring);
    const fingerprint = settingsFingerprint(desired);
    const registration = await deps.registry.get(surveyId);
    // Named by hand with no price here yet (registered by hand): its price looked up first.
    const price =
      listedPrice ??
      (named &&
      !options.dryRun &&
      registration?.expectedCpi === undefined &&
      identifierProblem('surveyId', surveyId) === undefined
        ? await livePrice(surveyId)
        : undefined);
    // Applied since this run read its ring, with a key the ring does not hold: a rotation saved meanwhile, whose
    // URLs this run's would put back on the key being retired. (The ring is read afresh at a run's start, so a key
    // it does not hold that was applied before is older: forgotten, or of a ring started over. Applied.)
    if (
      registration?.kid &&
      !ring.keys.has(registration.kid) &&
      (registration.appliedAt ?? '') >= (ringAt ?? '~')
    )
      return {
        surveyId,
        status: 'skipped',
        reason: `applied with key ${registration.kid} since this run read its key ring; the next run applies it`,
      };
    const cpi = price?.cpi;
    const prices = pricedAt(registration, cpi, priceTime(price), now().toISOString());
    if (
      !options.force &&
      registration?.state === 'active' &&
      registration.verified &&
      registration.fingerprint === fingerprint
    ) {
      // Not over a registration written since it was read (a rotation's): the price is taken again within the hour.
      if (!options.dryRun && cpi !== undefined && cpi !== registration.expectedCpi) {
        await deps.registry.replace(
          { ...registration, ...prices, updatedAt: now().toISOString() },
          registration,
        );
      }
      return { surveyId, status: 'unchanged' };
    }
    if (options.dryRun) {
      return {
        surveyId,
        status: 'would-apply',
        call: { method: 'PUT', path: `/supply/setRedirectionForSurvey/${surveyId}`, body: desired },
      };
    }
    const at = now().toISOString();
    /** Whether the marketplace took the settings (a failure after it, a read-back, leaves them pointing here). */
    let taken = false;
    try {
      await deps.marketplace.setRedirectionForSurvey(surveyId, desired);
      taken = true;
      const differences = settingsDifferences(desired, await deps.marketplace.getSurveyRedirects(surveyId));
      if (differences.length > 0) throw new VerificationFailed(differences);
      // Only over the registration this apply read: another writer that recorded the survey meanwhile (a rotation
      // beside the scheduled sync, an operator's apply) set it too, and which settings the marketplace kept, its or
      // these, is not known. Verified either way, the last write would claim a key the marketplace may not hold.
      let written = await deps.registry.replace(
        {
          surveyId,
          state: 'active',
          fingerprint,
          kid: ring.current.kid,
          appliedAt: at,
          ...servingSince(registration, at, true),
          verified: true,
          verifiedAt: at,
          failures: 0,
          ...prices,
          ...changeLooked(price),
          ...stillClosed(registration),
          updatedAt: at,
        },
        registration,
      );
      if (!written) {
        // The other writer recorded these very settings verified (the same key and fingerprint: a schedule's tick
        // delivered twice, two syncs at once): whichever the marketplace kept, it holds these. Not one it recorded
        // unverified: its finding (a read-back that differed) may be the newer.
        const now = await deps.registry.get(surveyId);
        written =
          now?.state === 'active' &&
          now.verified &&
          now.fingerprint === fingerprint &&
          now.kid === ring.current.kid;
      }
      if (!written) {
        // Left unverified, the next sync run applies the current key's settings and reads them back.
        await amendActive(surveyId, (when) => ({
          verified: false,
          lastError: APPLIED_TWICE,
          lastErrorAt: when,
        }));
        return { surveyId, status: 'failed', error: APPLIED_TWICE };
      }
      return { surveyId, status: 'applied', kid: ring.current.kid };
    } catch (error) {
      if (!(error instanceof MarketplaceError || error instanceof VerificationFailed)) throw error;
      noteFailure(error);
      // An id an operator named that the marketplace does not know (mistyped: its 404 to the settings themselves,
      // and to reading them), never registered here: not registered now either, or it would be reconciled and
      // reported, a row of zeros, from then on. Settings it took are recorded whatever failed after.
      if (named && !taken && !registration && (await unknownAtMarketplace(surveyId, error)))
        return {
          surveyId,
          status: 'failed',
          error: `${error.message}: the marketplace does not know survey ${surveyId} (check the id); not registered`,
        };
      // Nor one the marketplace did not answer about at all (an outage): whether it knows the id cannot be told, and
      // a mistyped one registered would be re-signed, judged for health and reported as a row of zeros from then on.
      // A live survey is found by the sync's listing all the same; an operator applies it again.
      if (named && !taken && !registration && marketplaceDown(error))
        return {
          surveyId,
          status: 'failed',
          error: `${error.message}: the marketplace did not answer, so whether it knows survey ${surveyId} cannot be told; not registered (apply it again, or the sync takes it up once it is listed live)`,
        };
      // A registered survey the marketplace no longer knows (a rotation's, or an operator's apply, of one deleted
      // there): recorded closed, which is no failure to re-sign it, rather than failed for good.
      // Recorded under the key tried and unverified, as any failure: applied when a listing shows it live again.
      if (!taken && registration?.state === 'active' && (await unknownAtMarketplace(surveyId, error))) {
        await deps.registry.put({
          ...registration,
          fingerprint,
          kid: ring.current.kid,
          appliedAt: at,
          verified: false,
          closedAt: registration.closedAt ?? at,
          liveCheckedAt: at,
          // As a failed lookup: listed live again, it is applied at once, not on the backoff of its failures.
          lastError: `${LOOKUP_FAILED}${withoutSignatures(error.message)}`,
          lastErrorAt: at,
          ...prices,
          updatedAt: at,
        });
        return { surveyId, status: 'closed', reason: `the marketplace no longer knows survey ${surveyId}` };
      }
      // Recorded under the key tried: a sync that read the ring before a rotation then leaves the survey to the
      // rotation's key (the skip above) rather than re-sign it with the retiring one. What the marketplace still
      // holds is what `redirects show` reads.
      await deps.registry.put({
        surveyId,
        state: 'active',
        fingerprint,
        kid: ring.current.kid,
        appliedAt: at,
        // Only once the marketplace took the settings: a refused apply sent nothing here.
        ...servingSince(registration, at, taken),
        verified: false,
        lastError: withoutSignatures(error.message),
        lastErrorAt: at,
        ...failedOnceMore(registration, error),
        ...prices,
        ...stillClosed(registration),
        updatedAt: at,
      });
      return { surveyId, status: 'failed', error: error.message };
    }
  }

  /**
   * Reads back a verified survey's redirects: as applied, the verification is renewed; changed at the
   * marketplace, they are applied again (and the fields that had drifted reported). A read that fails (a survey
   * the marketplace closed may refuse it) is recorded, and tried again the next day.
   */
  async function readBack(
    listed: SurveyRegistration,
    ring: KeyRing,
    options: RedirectRunOptions,
    price?: ListedPrice,
    ringAt?: string,
  ): Promise<SurveyResult> {
    const { surveyId } = listed;
    // As it stands now, not as listed when the run began: an operator may have removed or rotated it since.
    const registration = await deps.registry.get(surveyId);
    if (
      registration?.state !== 'active' ||
      !registration.verified ||
      registration.verifiedAt !== listed.verifiedAt ||
      registration.kid !== listed.kid
    )
      return { surveyId, status: 'skipped', reason: 'registration changed since the run began' };
    // Signed with another key than the current one: with an older key this ring still holds (a survey a rotation
    // could not re-sign, closed then), or one long forgotten, it is applied with the current key; with a key this
    // run's ring does not know yet (a rotation saved since the run read it), left to the next run.
    if (registration.kid !== ring.current.kid) return applyOne(surveyId, ring, options, price, ringAt);
    // Our own settings changed (the base URL, the methods): an apply, not a drift.
    const desired = desiredFor(surveyId, ring);
    if (registration.fingerprint !== settingsFingerprint(desired))
      return applyOne(surveyId, ring, options, price, ringAt);
    const at = now().toISOString();
    let actual: RedirectSettings;
    try {
      actual = await deps.marketplace.getSurveyRedirects(surveyId);
    } catch (error) {
      if (!(error instanceof MarketplaceError)) throw error;
      noteFailure(error);
      // A 404 that says the survey has no redirects of its own (deleted at the marketplace: the supplier's global
      // ones apply, which need not be this receiver's): applied again, as any drift (a `redirectURL` of null or none
      // reads as no settings, the postbacks missing). Any other refusal (a paused or closed survey's 404, a page that
      // is not JSON) is tried again the next day.
      if (noSurveyRedirects(error)) {
        return withDrift(await applyOne(surveyId, ring, { ...options, force: true }, price, ringAt), [
          'redirectURL',
        ]);
      }
      // Tried today: the next try is tomorrow's, and the others get their turn meanwhile. Failed on
      // `READ_BACK_TRIES` days in a row (a live survey: a closed one leaves the read-backs within the hour), where
      // its postbacks go is not known any more: unverified, so it is applied again on the backoff, and failed
      // (counted, and told by its health) while that fails too.
      // (The marketplace not answering, or refusing every call for a while, is no news of this survey: not counted.)
      // One a day: the read-backs a survey listed as changed brings between its daily ones do not count again.
      const countsToday =
        !marketplaceDown(error) &&
        !(Date.parse(registration.readBackFailedAt ?? '') > Date.parse(at) - READ_BACK_FAILURE_SPACING_MS);
      const failedReads = (registration.readBackFailures ?? 0) + (countsToday ? 1 : 0);
      if (failedReads >= READ_BACK_TRIES && countsToday) {
        if (!options.dryRun)
          await deps.registry.replace(
            {
              ...registration,
              verified: false,
              readBackAt: at,
              readBackFailures: undefined,
              readBackFailedAt: undefined,
              lastError: `read-back: ${withoutSignatures(error.message)}`,
              lastErrorAt: at,
              ...failedOnceMore(registration, error),
              ...changeLooked(price),
              updatedAt: at,
            },
            registration,
          );
        return {
          surveyId,
          status: 'failed',
          error: `its redirects could not be read back on ${failedReads} daily tries in a row (applied again next): ${error.message}`,
        };
      }
      // Not answered (down, a pause it asked for, a 5xx): looked at again in an hour, not the next day (a day's drift
      // would go unseen for each run the marketplace did not answer), behind the surveys unread longer (one whose
      // read-back never answers takes no run's share from the others). Over the registration read only, as the
      // renewal below.
      if (!options.dryRun)
        await deps.registry.replace(
          {
            ...registration,
            readBackAt: marketplaceDown(error)
              ? new Date(Date.parse(at) - REVERIFY_AFTER_MS + UNANSWERED_READ_BACK_RETRY_MS).toISOString()
              : at,
            readBackFailures: failedReads || undefined,
            ...(countsToday ? { readBackFailedAt: at } : {}),
            ...changeLooked(price),
            updatedAt: at,
          },
          registration,
        );
      return { surveyId, status: 'skipped', reason: `read-back failed: ${error.message}` };
    }
    const differences = settingsDifferences(desired, actual);
    if (differences.length === 0) {
      // Only over the registration read: a rotation that re-signed the survey meanwhile stands (renewed over it, the
      // registration would say the old key, verified, while the marketplace holds the new one).
      if (!options.dryRun)
        await deps.registry.replace(
          {
            ...registration,
            ...pricedAt(registration, price?.cpi, priceTime(price), now().toISOString()),
            verifiedAt: at,
            readBackAt: at,
            readBackFailures: undefined,
            readBackFailedAt: undefined,
            ...changeLooked(price),
            updatedAt: at,
          },
          registration,
        );
      return { surveyId, status: 'unchanged' };
    }
    return withDrift(
      await applyOne(surveyId, ring, { ...options, force: true }, price, ringAt),
      differences.map((d) => d.field),
    );
  }

  /**
   * Changes an active registration as it stands now, not as listed when the run began (an operator may have removed
   * it meanwhile): the registration written, or undefined when it is not active (or `when` says no).
   */
  async function amendActive(
    surveyId: string,
    change: (at: string, current: SurveyRegistration) => Partial<SurveyRegistration>,
    when: (current: SurveyRegistration) => boolean = () => true,
  ): Promise<SurveyRegistration | undefined> {
    const current = await deps.registry.get(surveyId);
    if (current?.state !== 'active' || !when(current)) return undefined;
    const at = now().toISOString();
    const amended = { ...current, ...change(at, current), updatedAt: at };
    await deps.registry.put(amended);
    return amended;
  }

  /**
   * Whether a failure says the marketplace does not know the survey at all. A 404 (its own JSON answer, saying
   * nothing of a paused or closed survey) to anything but the lookup is asked again of the lookup, which answers a
   * paused or closed survey by saying so. The lookup's own 404 says it when it names the survey as not found, or
   * when reading the survey's redirects answers 404 too (not the 404 of a survey that merely has none of its own):
   * a marketplace may read back the supplier's global redirects for any id.
   */
  async function unknownAtMarketplace(
    surveyId: string,
    error: unknown,
    { lookup = false }: { readonly lookup?: boolean } = {},
  ): Promise<boolean> {
    const notFound = (e: unknown): e is MarketplaceError =>
      e instanceof MarketplaceError &&
      refusedAsMissing(e) &&
      e.kind !== 'malformed' &&
      // A refusal that speaks of a survey paused or closed is one the marketplace knows.
      !SAYS_NOT_LIVE.test(e.marketplaceMessage ?? '');
    if (!notFound(error)) return false;
    if (!lookup) {
      try {
        await deps.marketplace.getAllocatedSurveyById(surveyId);
        return false;
      } catch (lookupError) {
        return unknownAtMarketplace(surveyId, lookupError, { lookup: true });
      }
    }
    const said = error.marketplaceMessage ?? '';
    if (SAYS_UNKNOWN.test(said) && said.includes(surveyId)) return true;
    try {
      await deps.marketplace.getSurveyRedirects(surveyId);
      return false;
    } catch (readError) {
      return notFound(readError) && !noSurveyRedirects(readError);
    }
  }

  /**
   * Records an active survey the marketplace no longer knows (deleted there) as closed: looked at once a day for a
   * month like any closed survey, and opened again by a listing that shows it live, instead of failing every run.
   */
  async function recordUnknown(surveyId: string, error: MarketplaceError): Promise<SurveyResult> {
    const closed = await amendActive(surveyId, (at, current) => ({
      closedAt: current.closedAt ?? at,
      liveCheckedAt: at,
      lastError: `${LOOKUP_FAILED}${withoutSignatures(error.message)}`,
      lastErrorAt: at,
    }));
    return closed
      ? { surveyId, status: 'closed', reason: `the marketplace no longer knows survey ${surveyId}` }
      : { surveyId, status: 'skipped', reason: 'registration changed' };
  }

  /** Records a survey closed. */
  async function recordClosure(surveyId: string, message: string): Promise<SurveyResult> {
    const closed = await amendActive(surveyId, (at) => ({ closedAt: at }));
    return closed
      ? { surveyId, status: 'closed', reason: message }
      : { surveyId, status: 'skipped', reason: 'registration changed' };
  }

  /**
   * A named survey's price as its lookup shows it (live), dated by its last change there: a survey registered by
   * hand would otherwise have no price until the hourly listing, and its completes' prices would go unchecked (an
   * underpayment missed). None when the lookup fails or the survey is not live (the apply says why, as before).
   */
  async function livePrice(surveyId: string): Promise<ListedPrice | undefined> {
    try {
      const lookup = await deps.marketplace.getAllocatedSurveyById(surveyId);
      if (!lookup.live) return undefined;
      return { cpi: lookup.survey.cpi, changedAt: changedAt(lookup.survey) };
    } catch (error) {
      if (error instanceof MarketplaceError) return undefined;
      throw error;
    }
  }

  /** When a listed price took effect: the survey's change time when the marketplace gives it, else now. */
  function priceTime(price: ListedPrice | undefined): string {
    const at = now().getTime();
    return new Date(price?.changedAt !== undefined ? Math.min(at, price.changedAt) : at).toISOString();
  }

  /** Runs `work` over the ids with bounded concurrency, in order, stopping at the deadline. */
  async function each(
    ids: readonly string[],
    options: RedirectRunOptions,
    work: (id: string) => Promise<SurveyResult>,
  ): Promise<SurveyResult[]> {
    const down = () => downInRow >= MARKETPLACE_DOWN_SURVEYS;
    const deferred = (index: number): SurveyResult => ({
      surveyId: ids[index] as string,
      status: 'deferred',
      reason: down() ? 'the marketplace is not answering; next run' : 'time budget used up; next run',
    });
    downInRow = 0;
    let done = 0;
    const report = await runBounded(
      ids.map((id) => () => work(id)),
      {
        concurrency,
        now,
        deadline: options.deadline,
        // A marketplace down, or refusing every call, fails every survey after its client's retries: the run stops
        // taking them up (each would cost its calls and a registry write) and leaves them to the next.
        stopWhen: down,
        onSettled: (result, index) => {
          if (result.status === 'done' && ANSWERED.has(result.value.status)) downInRow = 0;
          if (result.status === 'failed') return;
          deps.onResult?.(result.status === 'done' ? result.value : deferred(index), ++done, ids.length);
        },
      },
    );
    return valuesOrThrow(report, deferred);
  }

  return {
    /** Applies and verifies the redirects of each survey; unchanged, verified surveys make no call. */
    async apply(surveyIds: readonly string[], options: RedirectRunOptions = {}): Promise<SurveyResult[]> {
      const ringAt = now().toISOString();
      const ring = await deps.keyRing();
      return each(surveyIds, options, (surveyId) =>
        applyOne(surveyId, ring, options, undefined, ringAt, { named: true }),
      );
    },

    /** Deletes the survey-level redirects (the supplier's global ones apply again) and records it. */
    async remove(surveyIds: readonly string[], options: RedirectRunOptions = {}): Promise<SurveyResult[]> {
      return each(surveyIds, options, async (surveyId) => {
        if (options.dryRun) {
          return {
            surveyId,
            status: 'would-remove',
            call: { method: 'DELETE', path: `/supply/surveySpecificRedirects/${surveyId}` },
          };
        }
        const registration = await deps.registry.get(surveyId);
        const at = now().toISOString();
        try {
          try {
            await deps.marketplace.deleteSurveyRedirects(surveyId);
          } catch (error) {
            // An id never registered here that the marketplace does not know either: mistyped. Said, and nothing
            // recorded (registered, it would be reconciled and reported as a row of zeros from then on).
            if (!registration && (await unknownAtMarketplace(surveyId, error)))
              return {
                surveyId,
                status: 'failed',
                error: `${error instanceof Error ? error.message : String(error)}: the marketplace does not know survey ${surveyId} (check the id); not registered`,
              };
            // The marketplace does not know the survey (an id mistyped in `apply`, a survey deleted there): none of
            // its redirects point here any more, so it is removed here too instead of failing for good. Only when
            // it says so itself (a JSON answer, not a 404 page of a wrong URL) and reading its redirects says the
            // same: a 404 for a survey whose redirects still read back fails as before. Nor does one that has no
            // redirects of its own to delete (`No survey specific redirects found`): what removing asks is so.
            if (
              !(error instanceof MarketplaceError && noSurveyRedirects(error)) &&
              !(await unknownAtMarketplace(surveyId, error))
            )
              throw error;
          }
          // What it was configured with goes; its prices stay (reconciliation still checks its recent completes).
          // One never registered here is recorded too, or the sync would apply this stack's URLs to it again at
          // its next change; as never applied here, so that no run reconciles another stack's transactions.
          await deps.registry.put({
            surveyId,
            state: 'removed',
            // Removed again: still since the first removal (its rows since then are another system's; moved on, they
            // counted here as completes not received).
            // (Or since an apply after it the marketplace refused: the time has been another system's since then.)
            removedAt:
              registration?.state === 'removed'
                ? (registration.removedAt ?? at)
                : (registration?.notServingSince ?? at),
            ...(!registration || registration.neverApplied ? { neverApplied: true } : {}),
            // Its transactions are reconciled for the time it was this stack's: from then to this removal.
            ...(registration?.servingSince ? { servingSince: registration.servingSince } : {}),
            ...(registration?.neverTaken ? { neverTaken: true } : {}),
            ...(registration?.notServing ? { notServing: registration.notServing } : {}),
            verified: false,
            failures: 0,
            ...(registration?.expectedCpi ? { expectedCpi: registration.expectedCpi } : {}),
            ...(registration?.cpiHistory ? { cpiHistory: registration.cpiHistory } : {}),
            ...(registration?.priceSeenAt ? { priceSeenAt: registration.priceSeenAt } : {}),
            updatedAt: at,
          });
          return { surveyId, status: 'removed' };
        } catch (error) {
          if (!(error instanceof MarketplaceError)) throw error;
          noteFailure(error);
          // Never registered here: a removal that failed must not register it (as active, the sync and a rotation
          // would apply this stack's URLs to a survey another stack, or no one, has).
          if (!registration) return { surveyId, status: 'failed', error: error.message };
          await deps.registry.put({
            ...registration,
            lastError: `remove: ${withoutSignatures(error.message)}`,
            lastErrorAt: at,
            ...failedOnceMore(registration, error),
            updatedAt: at,
          });
          return { surveyId, status: 'failed', error: error.message };
        }
      });
    },

    /** What the marketplace has for a survey against what this product expects. */
    async show(surveyId: string): Promise<SurveyComparison> {
      const ring = await deps.keyRing();
      const expected = desiredFor(surveyId, ring);
      const [actual, lookup, registration] = await Promise.all([
        deps.marketplace.getSurveyRedirects(surveyId),
        deps.marketplace.getAllocatedSurveyById(surveyId).catch(() => undefined),
        deps.registry.get(surveyId),
      ]);
      return {
        surveyId,
        live: lookup ? lookup.live : 'unknown',
        expected,
        actual,
        differences: settingsDifferences(expected, actual),
        ...(registration ? { registration } : {}),
      };
    },

    /**
     * Configures surveys created or updated since the checkpoint, and retries registered surveys that are not
     * verified yet (unless the marketplace now reports them Paused/Closed). Surveys an operator removed are left
     * alone. The checkpoint moves only once every survey up to it was applied or had its failure recorded.
     */
    async sync(options: RedirectRunOptions = {}): Promise<SyncReport> {
      const startedAt = now();
      const since =
        (await deps.registry.checkpoint(SYNC_CHECKPOINT)) ?? (deps.initialSince ?? new Date(0)).toISOString();
      /** A listing the marketplace refuses is reported, and the rest of the run goes on without it. */
      const listing = async (
        list: () => Promise<Rows<Survey>>,
      ): Promise<{ rows?: Rows<Survey>; error?: string }> => {
        try {
          return { rows: await list() };
        } catch (error) {
          if (!(error instanceof MarketplaceError)) throw error;
          return { error: error.message };
        }
      };
      const { rows: byDate, error: listingError } = await listing(() =>
        deps.marketplace.getAllocatedSurveysByDate(new Date(since)),
      );
      const listed = byDate ?? { rows: [], malformed: [] };
      // A row that does not read but names its survey: the run works on that survey all the same (below).
      const malformedIds = listed.malformed.flatMap((row) =>
        row.reference && /^\d+$/.test(row.reference) ? [row.reference] : [],
      );
      // Live surveys and those ended in the last month (their daily look for a resumption); one that ended before
      // is read by key when a listing shows it live again (below).
      const endedSince = new Date(startedAt.getTime() - RESUME_LOOKUP_FOR_MS - 86_400_000).toISOString();
      const registrations = new Map((await deps.registry.list({ endedSince })).map((r) => [r.surveyId, r]));
      const ringAt = now().toISOString();
      const ring = await deps.keyRing();
      // Every live survey, once an hour: those the listing by date missed and the registry does not know.
      const fullAt = await deps.registry.checkpoint(FULL_LISTING_CHECKPOINT);
      const fullDue =
        !options.dryRun && !(Date.parse(fullAt ?? '') > startedAt.getTime() - FULL_LISTING_EVERY_MS);
      // The backstop's failure is reported, not counted as the run's: it is tried again in an hour.
      const { rows: everyLive, error: fullListingError } = fullDue
        ? await listing(() => deps.marketplace.getAllocatedSurveys())
        : {};
      // A survey listed live that the listing of registrations lacks may have ended here long ago: read by key, so a
      // removed one is still left alone and a closed one opens again (below), instead of being taken for a new one.
      const unknown = [
        ...new Set([...[...listed.rows, ...(everyLive?.rows ?? [])].map((s) => s.surveyId), ...malformedIds]),
      ].filter(
        (surveyId) => !registrations.has(surveyId) && identifierProblem('surveyId', surveyId) === undefined,
      );
      if (unknown.length > 0)
        for (const r of await deps.registry.many(unknown)) registrations.set(r.surveyId, r);
      // Registrations a release before the ended part of the index kept among the live ones: moved, a few an hour,
      // until a run finds none left.
      if (fullDue && !(await deps.registry.checkpoint(RELOCATED_CHECKPOINT))) {
        const moved = await deps.registry.relocateEnded(RELOCATIONS_PER_RUN).catch(() => undefined);
        if (moved === 0) await deps.registry.advanceCheckpoint(RELOCATED_CHECKPOINT, startedAt.toISOString());
      }
      const unlisted = (everyLive?.rows ?? []).filter(
        (survey) =>
          !registrations.has(survey.surveyId) && !listed.rows.some((r) => r.surveyId === survey.surveyId),
      );
      // Live again: a survey recorded closed that a listing shows (listings show live surveys only).
      const live = new Set([...listed.rows, ...(everyLive?.rows ?? [])].map((s) => s.surveyId));
      if (!options.dryRun)
        for (const r of registrations.values())
          if (r.closedAt !== undefined && live.has(r.surveyId)) {
            const reopened = await amendActive(
              r.surveyId,
              () => ({ closedAt: undefined }),
              (current) => current.closedAt !== undefined,
            );
            if (reopened) registrations.set(r.surveyId, reopened);
          }
      const closureLookups =
        deps.closureLookupsPerRun ??
        closureLookupsPerRunFor(
          [...registrations.values()].filter((r) => r.state === 'active' && r.closedAt === undefined).length,
        );
      // Active surveys the list of every live survey leaves out: looked up, and recorded closed if the marketplace
      // says so (a list that left one out by mistake changes nothing).
      const closing = new Set(
        everyLive && !options.dryRun
          ? [...registrations.values()]
              .filter((r) => r.state === 'active' && r.closedAt === undefined && !live.has(r.surveyId))
              // Those looked up longest ago first: a list that keeps leaving live ones out starves no one.
              .sort((a, b) => (a.liveCheckedAt ?? '').localeCompare(b.liveCheckedAt ?? ''))
              .slice(0, closureLookups)
              .map((r) => r.surveyId)
          : [],
      );
      // Surveys recorded closed that no listing shows live again: looked up once a day for 30 days after their
      // closure (a listing that leaves a resumed survey out would leave it closed, unwatched and on whatever key
      // it was signed with, for good), after the active ones, within the same number of lookups.
      const dayAgo = new Date(startedAt.getTime() - RESUME_LOOKUP_EVERY_MS).toISOString();
      const closedSince = new Date(startedAt.getTime() - RESUME_LOOKUP_FOR_MS).toISOString();
      const resuming = new Set(
        options.dryRun
          ? []
          : [...registrations.values()]
              .filter(
                (r) =>
                  r.state === 'active' &&
                  r.closedAt !== undefined &&
                  r.closedAt >= closedSince &&
                  !live.has(r.surveyId) &&
                  (r.liveCheckedAt ?? r.closedAt) < dayAgo,
              )
              .sort((a, b) =>
                (a.liveCheckedAt ?? a.closedAt ?? '').localeCompare(b.liveCheckedAt ?? b.closedAt ?? ''),
              )
              .slice(0, Math.max(0, closureLookups - closing.size))
              .map((r) => r.surveyId),
      );

      // New or changed surveys, oldest change first, so a deferred tail can be picked up where this run stopped.
      const discovered = new Map<string, number | undefined>();
      const prices = new Map<string, ListedPrice>();
      for (const survey of [...listed.rows, ...unlisted]) {
        discovered.set(survey.surveyId, changedAt(survey));
        prices.set(survey.surveyId, { cpi: survey.cpi, changedAt: changedAt(survey) });
      }
      for (const surveyId of malformedIds) discovered.set(surveyId, undefined);
      // The hourly listing of every live survey carries prices too: a registered survey whose price moved without
      // the listing by date showing it (its modified time not touched) takes the new price now, or its completes
      // would be judged against the old one. Since this run: when it changed is not known closer than the hour. A
      // first price (none known here: a survey registered without one) since the survey's last change there, as
      // a listing by date dates it.
      if (!options.dryRun)
        for (const survey of everyLive?.rows ?? []) {
          const known = registrations.get(survey.surveyId);
          if (
            discovered.has(survey.surveyId) ||
            survey.cpi === undefined ||
            known?.state !== 'active' ||
            (known.expectedCpi !== undefined && sameAmount(known.expectedCpi, survey.cpi))
          )
            continue;
          const amended = await amendActive(survey.surveyId, (at, current) =>
            current.expectedCpi === undefined
              ? pricedAt(
                  current,
                  survey.cpi,
                  priceTime({ cpi: survey.cpi, changedAt: changedAt(survey) }),
                  at,
                )
              : pricedAt(current, survey.cpi, at),
          );
          if (amended) registrations.set(survey.surveyId, amended);
        }
      const ordered = [...discovered.entries()].sort(([, a], [, b]) => (a ?? 0) - (b ?? 0)).map(([id]) => id);
      const retryDue = (r: SurveyRegistration) =>
        !(Date.parse(r.lastErrorAt ?? '') + retryDelayMs(r.failures) > startedAt.getTime());
      const retry = [...registrations.values()].filter(
        (r) =>
          r.state === 'active' &&
          !r.verified &&
          r.closedAt === undefined &&
          !discovered.has(r.surveyId) &&
          retryDue(r),
      );
      const retrying = new Set(retry.map((r) => r.surveyId));
      const trustedSince = new Date(startedAt.getTime() - REVERIFY_AFTER_MS).toISOString();
      // Those listed as changed too: a survey the marketplace touches every run would otherwise never be read back.
      const lastLook = (r: SurveyRegistration) =>
        [r.verifiedAt ?? '', r.readBackAt ?? ''].sort().at(-1) as string;
      const verifiedActive = [...registrations.values()]
        .filter((r) => r.state === 'active' && r.verified && r.closedAt === undefined)
        .sort((a, b) => lastLook(a).localeCompare(lastLook(b)));
      const readBacks = deps.readBacksPerRun ?? readBacksPerRunFor(verifiedActive.length);
      // Verified, then listed as created or changed at the marketplace since (a survey deleted and created again
      // under its id, its own redirects reset to the supplier's global ones): read back now, not the next day.
      // As many again as the daily read-backs, the longest unread first, so a marketplace that touches every
      // survey every run reads each back about once a day, as before.
      // Against the marketplace's own time of the change last looked at when the registration has it (its clock may
      // run hours ahead of this product's: compared with ours, every run for those hours would read it back again).
      const changedSinceLook = verifiedActive
        .filter((r) => (discovered.get(r.surveyId) ?? 0) > Date.parse(r.changeLookedAt ?? lastLook(r)))
        .slice(0, readBacks);
      // Signed with another key than the current one (a rotation stopped before it, or that deferred it; the ring
      // rolled back to an earlier version): re-signed by this run, whatever the read-back share, the key that stops
      // working first taken first (one the ring does not hold at all is refused already).
      const stopsAt = (r: SurveyRegistration) =>
        r.kid === undefined || !ring.keys.has(r.kid)
          ? 0
          : (ring.keys.get(r.kid)?.retireAt?.getTime() ?? Number.MAX_SAFE_INTEGER);
      const onOtherKey = verifiedActive
        .filter((r) => r.kid !== ring.current.kid)
        .sort((a, b) => stopsAt(a) - stopsAt(b));
      const reverify = new Map(
        [
          ...onOtherKey,
          ...verifiedActive.filter((r) => lastLook(r) < trustedSince).slice(0, readBacks),
          ...changedSinceLook,
        ].map((r) => [r.surveyId, r]),
      );

      // The closure lookups (a few a run) before the daily read-backs: they hang on the hourly listing, so one
      // deferred waits for the next; a read-back deferred is the next run's, the longest unread first. Surveys on
      // another key and those listed as changed are read back first all the same.
      const worklist = [
        ...new Set([
          ...ordered,
          ...retrying,
          ...onOtherKey.map((r) => r.surveyId),
          ...changedSinceLook.map((r) => r.surveyId),
          ...closing,
          ...resuming,
          ...reverify.keys(),
        ]),
      ];
      const results = await each(worklist, options, async (surveyId) => {
        // An id the receivers' URLs cannot carry (0, negative, 13 digits): that survey fails, not the run.
        const unusable = identifierProblem('surveyId', surveyId);
        if (unusable)
          return { surveyId, status: 'failed', error: `survey ${surveyId.slice(0, 20)}: ${unusable}` };
        const registration = registrations.get(surveyId);
        if (registration?.state === 'removed') {
          return { surveyId, status: 'skipped', reason: 'redirects were removed by an operator' };
        }
        // Listed as changed, but its last tries failed: it waits its turn like the other retries. Not when they
        // failed only to look it up (the marketplace did not find it then): listed now, it is applied now.
        if (
          registration &&
          !closing.has(surveyId) &&
          !registration.verified &&
          registration.failures > 0 &&
          !(discovered.has(surveyId) && registration.lastError?.startsWith(LOOKUP_FAILED)) &&
          !retryDue(registration)
        ) {
          return { surveyId, status: 'skipped', reason: 'failed before; retried later' };
        }
        const trusted = reverify.get(surveyId);
        // Not listed live (a retry, or one the list of live surveys left out): asked first, and recorded closed
        // when the marketplace says it is Paused/Closed (a dry run only says so).
        if (!discovered.has(surveyId) && (closing.has(surveyId) || !trusted)) {
          let lookup: Awaited<ReturnType<MarketplaceClient['getAllocatedSurveyById']>>;
          try {
            lookup = await deps.marketplace.getAllocatedSurveyById(surveyId);
          } catch (error) {
            if (!(error instanceof MarketplaceError)) throw error;
            noteFailure(error);
            // A closed survey's daily look that fails (an archived survey the marketplace no longer finds) is
            // tried again tomorrow, not every run: it is no failure of the run's.
            if (resuming.has(surveyId)) {
              await amendActive(surveyId, (at) => ({ liveCheckedAt: at }));
              return {
                surveyId,
                status: 'skipped',
                reason: `closed; looking it up failed: ${error.message}`,
              };
            }
            // The marketplace does not know it any more (deleted there): recorded closed, not failed every run.
            if (await unknownAtMarketplace(surveyId, error, { lookup: true }))
              return options.dryRun
                ? { surveyId, status: 'skipped', reason: `the marketplace does not know survey ${surveyId}` }
                : recordUnknown(surveyId, error);
            // Recorded: as a look, so a survey the marketplace no longer finds goes behind the others in the
            // closure lookups instead of taking a slot every run; and, for one whose redirects are not verified,
            // as a failure, retried on the backoff and told by its health like any other.
            if (!options.dryRun)
              await amendActive(surveyId, (at, current) => ({
                ...(closing.has(surveyId) ? { liveCheckedAt: at } : {}),
                ...(current.verified
                  ? {}
                  : {
                      lastError: `${LOOKUP_FAILED}${withoutSignatures(error.message)}`,
                      lastErrorAt: at,
                      ...failedOnceMore(current, error),
                    }),
              }));
            return { surveyId, status: 'failed', error: error.message };
          }
          if (resuming.has(surveyId)) {
            // Still closed: looked at again tomorrow. Live again: watched again, and applied if it needs to be.
            const amended = await amendActive(surveyId, (at) => ({
              liveCheckedAt: at,
              ...(lookup.live ? { closedAt: undefined } : {}),
            }));
            if (!lookup.live)
              return { surveyId, status: 'skipped', reason: `marketplace says: ${lookup.message}` };
            if (!amended) return { surveyId, status: 'skipped', reason: 'registration changed' };
          } else if (!lookup.live)
            return options.dryRun
              ? { surveyId, status: 'skipped', reason: `marketplace says: ${lookup.message}` }
              : recordClosure(surveyId, lookup.message);
          if (closing.has(surveyId)) {
            // Found live though left out: the others are looked up before it next time.
            await amendActive(surveyId, (at) => ({ liveCheckedAt: at }));
            if (!trusted && !retrying.has(surveyId)) return { surveyId, status: 'unchanged' };
          }
        }
        if (trusted) return readBack(trusted, ring, options, prices.get(surveyId), ringAt);
        return applyOne(surveyId, ring, options, prices.get(surveyId), ringAt);
      });

      let checkpoint: string | undefined;
      // The hourly listing counts as done once its closure lookups were all taken up: one deferred (the run's time
      // used up) lists every live survey again with the next run, 15 minutes on, not an hour.
      const lookupsLeft = worklist.some(
        (surveyId, i) => closing.has(surveyId) && results[i]?.status === 'deferred',
      );
      if (fullDue && !lookupsLeft)
        await deps.registry.advanceCheckpoint(FULL_LISTING_CHECKPOINT, startedAt.toISOString());
      if (!options.dryRun && byDate) {
        const firstDeferred = ordered.findIndex((_, i) => results[i]?.status === 'deferred');
        let to = startedAt.getTime() - SYNC_OVERLAP_MS;
        if (firstDeferred >= 0) {
          const changed = discovered.get(ordered[firstDeferred] as string);
          // The same overlap before it as before the run's start: a marketplace that reads the time asked for as its
          // own Pacific wall time lists only what changed hours after it.
          to = changed === undefined ? Number.NEGATIVE_INFINITY : Math.min(to, changed - 1 - SYNC_OVERLAP_MS);
        }
        if (Number.isFinite(to) && to > Date.parse(since)) {
          const iso = new Date(to).toISOString();
          if (await deps.registry.advanceCheckpoint(SYNC_CHECKPOINT, iso)) checkpoint = iso;
        }
      }
      return {
        since,
        ...(checkpoint ? { checkpoint } : {}),
        discovered: ordered.length,
        retried: retry.length,
        reverified: reverify.size,
        // A survey both listings show unreadable is said once.
        malformed: [...listed.malformed, ...(everyLive?.malformed ?? [])].filter(
          (row, i, all) =>
            row.reference === undefined ||
            all.findIndex((other) => other.reference === row.reference && other.problem === row.problem) ===
              i,
        ),
        results,
        ...(listingError ? { listingError } : {}),
        ...(fullListingError ? { fullListingError } : {}),
        ...(unlisted.length > 0 ? { unlisted: unlisted.length } : {}),
      };
    },

    /**
     * Adds a new signing key, makes it current, saves the ring, and re-applies every active survey with it.
     * Keys signing until now stay accepted until `retireAt`, then are refused.
     */
    async rotate(
      rotation: { kid?: string; secret: string; retireAt: Date },
      options: RedirectRunOptions = {},
    ): Promise<RotationReport> {
      if (!deps.saveKeyRing) throw new Error('this key ring cannot be saved from here');
      const saveKeyRing = deps.saveKeyRing;
      // The old keys must still be accepted when the surveys move off them, after the wait below.
      const soonest = now().getTime() + ROTATION_SETTLE_MS + RETIREMENT_AFTER_SETTLE_MS;
      if (rotation.retireAt.getTime() < soonest)
        throw new Error(
          `a retirement at ${rotation.retireAt.toISOString()} would refuse the old keys before the surveys move off them (the new key is applied ${ROTATION_SETTLE_MS / 1000} s after it is saved): give one ${(ROTATION_SETTLE_MS + RETIREMENT_AFTER_SETTLE_MS) / 1000} s from now or later`,
        );
      const { ring, next, active, ringAt } = await oneRotationAtATime(options, async (stillHeld) => {
        const ring = await deps.keyRing();
        const next = rotateKeyRing(ring, { ...rotation, now: now() });
        // Closed (paused) surveys too: one resumed after the old key retires would refuse its postbacks until a sync
        // re-signed it. One the marketplace will not change while closed is recorded failed, and re-signed by the
        // first sync that finds it live again (or its daily look at closed surveys).
        const active = (await deps.registry.list())
          .filter((r) => r.state === 'active')
          .map((r) => r.surveyId);
        // What the receivers will read back holds the new key as current, with its secret: nothing is applied with a
        // key the ring would not keep.
        const stored = parseKeyRing(serializeKeyRing(next));
        if (stored.current.kid !== next.current.kid || stored.current.secret !== next.current.secret)
          throw new Error(`the rotated key ring would not keep key ${next.current.kid} as its current key`);
        // Surveys another rotation applied since this one saved its ring are left on that one's newer key.
        const ringAt = now().toISOString();
        if (!options.dryRun) {
          // First the new key accepted, the old one still current (what a sync running meanwhile signs with); then,
          // once every receiver can have learnt it, the new key current.
          await stillHeld();
          await saveKeyRing(stagedRing(ring, next));
          await sleep(ROTATION_SETTLE_MS);
          await stillHeld();
          await saveKeyRing(next);
        }
        return { ring, next, active, ringAt };
      });
      const results = await each(active, options, (surveyId) =>
        applyOne(surveyId, next, options, undefined, ringAt),
      );
      return {
        kid: next.current.kid,
        previousKid: ring.current.kid,
        retireAt: rotation.retireAt.toISOString(),
        results,
      };
    },
  };
}

export type RedirectConfiguration = ReturnType<typeof redirectConfiguration>;

/**
 * A rotation's ring before its new key is current: the keys of the rotated ring (the new one accepted, the older ones
 * retiring), with the current key as it was, unretired (a current key may not retire), and as the receivers read it
 * back (checked, as the rotated ring is: a ring they would refuse would refuse every hit).
 */
export function stagedRing(before: KeyRing, rotated: KeyRing): KeyRing {
  const keys = new Map(rotated.keys);
  keys.set(before.current.kid, before.current);
  const staged = parseKeyRing(serializeKeyRing({ current: before.current, keys }));
  if (staged.current.kid !== before.current.kid || !staged.keys.has(rotated.current.kid))
    throw new Error(
      `the staged key ring would not keep key ${rotated.current.kid} beside ${before.current.kid}`,
    );
  return staged;
}

/** A registration's failure counts after one more failure: in a row, and of them the marketplace not answering. */
const failedOnceMore = (
  current: Pick<SurveyRegistration, 'failures' | 'unavailableFailures'> | undefined,
  error: unknown,
): Pick<SurveyRegistration, 'failures' | 'unavailableFailures'> => ({
  failures: (current?.failures ?? 0) + 1,
  unavailableFailures: (current?.unavailableFailures ?? 0) + (marketplaceDown(error) ? 1 : 0),
});

/** The marketplace's time of the change an apply or read-back looked at, when the listing gave one. */
const changeLooked = (price: ListedPrice | undefined) =>
  price?.changedAt !== undefined ? { changeLookedAt: new Date(price.changedAt).toISOString() } : {};

/** A registration's closure, kept through an apply (an apply does not say the survey is live). */
const stillClosed = (registration: SurveyRegistration | undefined) =>
  registration?.closedAt ? { closedAt: registration.closedAt } : {};

/** When the marketplace last created or changed a survey, in epoch ms. */
function changedAt(survey: Survey): number | undefined {
  const times = [survey.createdAt?.utc, survey.modifiedAt?.utc]
    .filter((t): t is string => !!t)
    .map(Date.parse);
  return times.length > 0 ? Math.max(...times) : undefined;
}

/** Whether a run left anything failed (or, for sync, deferred counts as fine: the next run takes it up). */
export const failuresOf = (results: readonly SurveyResult[]) => results.filter((r) => r.status === 'failed');
