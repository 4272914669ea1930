/** Payload-v2 events for the handlers, built by the same code the local API Gateway uses. */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { Channel, Outcome } from '../../functions/receiving/outcome';
import { parseKeyRing } from '../../functions/receiving/signing';
import { hitUrl } from '../../functions/receiving/survey-urls';
import { buildEvent, lambdaContext, matchRoute } from '../../infra/local/api-gateway';

export interface EventOptions {
  /** Text is sent as UTF-8; bytes as they are (the gateway decides, by content type, how the event carries them). */
  readonly body?: string | Buffer;
  readonly headers?: Record<string, string>;
  readonly sourceIp?: string;
}

export function apiEvent(
  method: 'GET' | 'POST',
  url: string,
  options: EventOptions = {},
): APIGatewayProxyEventV2 {
  const parsed = new URL(url, 'https://hits.test');
  const match = matchRoute(method, parsed.pathname);
  if (!match) throw new Error(`no route for ${method} ${parsed.pathname}`);
  return buildEvent(
    {
      url: parsed,
      headers: { host: parsed.host, 'user-agent': 'test', ...options.headers },
      body:
        typeof options.body === 'string' || options.body === undefined
          ? Buffer.from(options.body ?? '')
          : options.body,
      sourceIp: options.sourceIp ?? '198.51.100.7',
    },
    match,
  );
}

/** A hit URL as the marketplace would call it: signed with the ring's current key, placeholders filled. */
export function filledUrl(
  keyRingJson: string,
  channel: Channel,
  surveyId: string,
  outcome: Outcome,
  ids: { pid: string; token: string },
  kid?: string,
): string {
  const ring = parseKeyRing(keyRingJson);
  const key = kid ? ring.keys.get(kid) : ring.current;
  if (!key) throw new Error(`no key ${kid}`);
  return hitUrl('https://hits.test', channel, surveyId, outcome, key)
    .replace('[%%pid%%]', encodeURIComponent(ids.pid))
    .replace('[%%token%%]', encodeURIComponent(ids.token));
}

export type Handler = (
  event: APIGatewayProxyEventV2,
  context: ReturnType<typeof lambdaContext>,
) => Promise<unknown>;

/** Invokes a handler as Lambda would and returns its structured result. */
export async function invoke(
  handler: Handler,
  event: APIGatewayProxyEventV2,
): Promise<APIGatewayProxyStructuredResultV2> {
  // Lambda's own request id, another than API Gateway's, as in AWS.
  return (await handler(event, lambdaContext('test'))) as APIGatewayProxyStructuredResultV2;
}

export const jsonBody = (result: APIGatewayProxyStructuredResultV2) =>
  JSON.parse(String(result.body)) as Record<string, unknown>;
