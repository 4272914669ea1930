/**
 * The notice a survey's health transition sends: one when it turns failing, one when it stops failing. A
 * CloudWatch alarm on an aggregate metric cannot name the survey, so the health check sends these itself: to
 * the alarm topic in AWS, to the log and an optional webhook locally (functions/runtime/health-notifiers.ts).
 */
import { printable, withoutSignatures } from '../shared/printable';
import type { HealthReason, HealthState } from './health-rules';

export interface HealthNotice {
  readonly surveyId: string;
  /**
   * `failing`: the survey turned failing; `worse`: failing already, it now fails for a reason new to the spell
   * (`added`); `recovered`: it stopped failing.
   */
  readonly kind: 'failing' | 'worse' | 'recovered';
  readonly added?: readonly string[] | undefined;
  readonly from: HealthState;
  readonly to: HealthState;
  readonly at: string;
  /** The survey's reasons now (none when it recovered to ok). */
  readonly reasons: readonly HealthReason[];
  /** Since when it was in the state it left. */
  readonly previousSince?: string | undefined;
}

export interface Notifier {
  /** Sends the notice; throws when it could not be sent and should be sent again next run. */
  notify(notice: HealthNotice): Promise<void>;
}

/** A one-line subject: ASCII, under 100 characters (what SNS accepts for e-mail subjects). */
export function noticeSubject(notice: HealthNotice): string {
  const subject =
    notice.kind === 'failing'
      ? `Survey ${notice.surveyId} is failing: ${notice.reasons
          .filter((r) => r.severity === 'failing')
          .map((r) => r.code)
          .join(', ')}`
      : notice.kind === 'worse'
        ? `Survey ${notice.surveyId} is failing, now also: ${(notice.added ?? []).join(', ')}`
        : `Survey ${notice.surveyId} recovered: now ${notice.to}`;
  return subject.replace(/[^\x20-\x7e]/g, '?').slice(0, 99);
}

/** The plain-text body: the survey, the change, every reason with its evidence and what to do. */
export function noticeBody(notice: HealthNotice): string {
  const lines =
    notice.kind === 'failing'
      ? [
          `Survey ${notice.surveyId} turned failing at ${notice.at} (it was ${notice.from}${notice.previousSince ? ` since ${notice.previousSince}` : ''}).`,
        ]
      : notice.kind === 'worse'
        ? [
            `Survey ${notice.surveyId}, failing${notice.previousSince ? ` since ${notice.previousSince}` : ''}, also fails for ${(notice.added ?? []).join(', ')} since ${notice.at}.`,
          ]
        : [
            `Survey ${notice.surveyId} is no longer failing: it is ${notice.to} since ${notice.at}${notice.previousSince ? ` (failing since ${notice.previousSince})` : ''}.`,
          ];
  for (const reason of notice.reasons)
    lines.push('', `${reason.code} (${reason.severity}): ${reason.detail}`);
  lines.push(
    '',
    `Its health now: npm run cli -- health --survey ${notice.surveyId}`,
    notice.kind === 'recovered'
      ? ''
      : 'No further notice is sent while it stays failing, unless it fails for a reason new to this spell; one is sent when it recovers.',
  );
  // Pids in the evidence are the supplier's text: no control character reaches a mail client or a terminal. A
  // reason's detail may quote an error that quoted a postback URL: never its signature.
  return printable(withoutSignatures(lines.join('\n').trimEnd()));
}
