/**
 * Where the survey health notices go: the alarm topic in AWS (the SDK mocked at its boundary), the log and a
 * webhook locally (a real HTTP server on loopback), and that a webhook that is down never stops a run.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type HealthNotice, noticeBody, noticeSubject } from '../../functions/health/notifier';
import { localNotifier, snsNotifier } from '../../functions/runtime/health-notifiers';

const notice: HealthNotice = {
  surveyId: '1001',
  kind: 'failing',
  from: 'ok',
  to: 'failing',
  at: '2026-03-10T12:00:00.000Z',
  reasons: [
    {
      code: 'postbacks_stopped',
      severity: 'failing',
      detail: '6 redirects (pids "a\u001b[2Jb") and no postback. npm run cli -- redirects show --survey 1001',
    },
  ],
  previousSince: '2026-03-01T00:00:00.000Z',
};

describe('the notice', () => {
  it('names the survey and the failing reasons in an ASCII subject under 100 characters', () => {
    expect(noticeSubject(notice)).toBe('Survey 1001 is failing: postbacks_stopped');
    expect(noticeSubject({ ...notice, kind: 'recovered', from: 'failing', to: 'ok', reasons: [] })).toBe(
      'Survey 1001 recovered: now ok',
    );
  });

  it('carries the change, every reason with its evidence and what to do, and no control character', () => {
    const body = noticeBody(notice);
    expect(body).toContain(
      'Survey 1001 turned failing at 2026-03-10T12:00:00.000Z (it was ok since 2026-03-01',
    );
    expect(body).toContain('postbacks_stopped (failing): 6 redirects');
    expect(body).toContain('redirects show --survey 1001');
    expect(body).toContain('npm run cli -- health --survey 1001');
    expect(body).not.toContain('\u001b');
  });

  it('says what a failing survey newly fails for', () => {
    const worse = {
      ...notice,
      kind: 'worse' as const,
      from: 'failing' as const,
      added: ['refused_postbacks'],
    };
    expect(noticeSubject(worse)).toBe('Survey 1001 is failing, now also: refused_postbacks');
    expect(noticeBody(worse)).toContain(
      'Survey 1001, failing since 2026-03-01T00:00:00.000Z, also fails for refused_postbacks since 2026-03-10T12:00:00.000Z.',
    );
  });

  it('never carries a postback signature an error it quotes had quoted back', () => {
    const sig = 'O2dqVf_Ab3dE9xYz0AbCdEfGhIjKlMnOpQrStUvWxYz';
    const drift = {
      ...notice,
      reasons: [
        {
          code: 'configuration_drift' as const,
          severity: 'failing' as const,
          detail: `applying failed: HTTP 400: Invalid pstbck URL: https://h.example/postback/1001/success?pid=[%%pid%%]&kid=k2&sig=${sig}`,
        },
      ],
    };
    const body = noticeBody(drift);
    expect(body).toContain('&kid=k2&sig=[concealed]');
    expect(body).not.toContain(sig);
  });
});

describe('in AWS', () => {
  const sns = mockClient(SNSClient);
  beforeEach(() => sns.reset());

  it('publishes one message to the alarm topic per notice', async () => {
    sns.on(PublishCommand).resolves({ MessageId: 'm-1' });
    await snsNotifier('arn:aws:sns:us-east-1:123456789012:alarms', new SNSClient({})).notify(notice);
    expect(sns.commandCalls(PublishCommand).map((c) => c.args[0].input)).toEqual([
      {
        TopicArn: 'arn:aws:sns:us-east-1:123456789012:alarms',
        Subject: noticeSubject(notice),
        Message: noticeBody(notice),
      },
    ]);
  });

  it('throws when the topic refuses, so the transition is sent again next run', async () => {
    sns.on(PublishCommand).rejects(new Error('AuthorizationError'));
    await expect(
      snsNotifier('arn:aws:sns:us-east-1:123456789012:alarms', new SNSClient({})).notify(notice),
    ).rejects.toThrow('AuthorizationError');
  });
});

describe('locally', () => {
  const received: { contentType: string | undefined; body: Record<string, unknown> }[] = [];
  let url: string;
  let status = 204;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        contentType: req.headers['content-type'],
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
      });
      res.writeHead(status).end();
    });
  });
  beforeAll(async () => {
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));
  beforeEach(() => {
    received.length = 0;
    status = 204;
  });

  it('POSTs each notice to the webhook once, as JSON', async () => {
    await localNotifier({ webhookUrl: url, timeoutMs: 2000 }).notify(notice);
    expect(received).toEqual([
      {
        contentType: 'application/json',
        body: expect.objectContaining({
          subject: noticeSubject(notice),
          body: noticeBody(notice),
          surveyId: '1001',
          kind: 'failing',
          to: 'failing',
        }),
      },
    ]);
  });

  it('a webhook that refuses, is down or hangs is logged, never thrown', async () => {
    status = 500;
    await expect(localNotifier({ webhookUrl: url, timeoutMs: 2000 }).notify(notice)).resolves.toBeUndefined();
    await expect(
      localNotifier({ webhookUrl: 'http://127.0.0.1:9/down', timeoutMs: 2000 }).notify(notice),
    ).resolves.toBeUndefined();
    const hanging = createServer(() => undefined).listen(0, '127.0.0.1');
    await new Promise((resolve) => hanging.once('listening', resolve));
    const started = Date.now();
    await expect(
      localNotifier({
        webhookUrl: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/`,
        timeoutMs: 200,
      }).notify(notice),
    ).resolves.toBeUndefined();
    expect(Date.now() - started).toBeLessThan(2000);
    hanging.closeAllConnections();
    hanging.close();
  });

  it('without a webhook only logs', async () => {
    await expect(localNotifier({ timeoutMs: 2000 }).notify(notice)).resolves.toBeUndefined();
    expect(received).toEqual([]);
  });
});
