/**
 * Where the survey health notices go. In AWS: the alarm topic (SNS), the same one the CloudWatch alarms use; a
 * publish that fails fails the run, so the transition is stored and sent next run. Locally: the log, and, when
 * HEALTH_WEBHOOK_URL is set, a JSON POST to it (a test or a chat hook can see each notice once); a webhook that
 * is down is logged, never a reason to stop judging surveys.
 */
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { type HealthNotice, type Notifier, noticeBody, noticeSubject } from '../health/notifier';
import { withoutSignatures } from '../shared/printable';
import { logger } from './observability';
import type { HealthConfig } from './runtime-config';

/** Publishes each notice to the topic: subject and plain-text body. */
export function snsNotifier(topicArn: string, client: Pick<SNSClient, 'send'>): Notifier {
  return {
    async notify(notice) {
      await client.send(
        new PublishCommand({
          TopicArn: topicArn,
          Subject: noticeSubject(notice),
          Message: noticeBody(notice),
        }),
      );
      logger.info('survey health notice published', noticeFields(notice));
    },
  };
}

/** Logs each notice and POSTs it as JSON to the webhook, if any, within the timeout. */
export function localNotifier(options: {
  readonly webhookUrl?: string | undefined;
  readonly timeoutMs: number;
  readonly fetch?: typeof fetch;
}): Notifier {
  const post = options.fetch ?? fetch;
  return {
    async notify(notice) {
      const subject = noticeSubject(notice);
      logger.warn(subject, { ...noticeFields(notice), body: noticeBody(notice) });
      if (!options.webhookUrl) return;
      try {
        const response = await post(options.webhookUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          // The notice's fields as its body shows them: no postback signature an error quoted (notifier.ts).
          body: withoutSignatures(JSON.stringify({ subject, body: noticeBody(notice), ...notice })),
          signal: AbortSignal.timeout(options.timeoutMs),
        });
        await response.body?.cancel();
        if (!response.ok) logger.warn('health webhook refused the notice', { status: response.status });
      } catch (error) {
        logger.warn('health webhook unreachable', {
          error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        });
      }
    },
  };
}

/** The notifier the configuration asks for; the SNS client is created once, here. */
export function healthNotifier(config: HealthConfig): Notifier {
  if (config.notices.mode === 'sns') {
    return snsNotifier(config.notices.topicArn, new SNSClient({ region: config.region }));
  }
  return localNotifier(config.notices);
}

const noticeFields = (notice: HealthNotice) => ({
  surveyId: notice.surveyId,
  kind: notice.kind,
  from: notice.from,
  to: notice.to,
  reasons: notice.reasons.map((r) => r.code),
});
