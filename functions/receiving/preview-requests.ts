/**
 * Requests for a redirect URL that no respondent made: a browser fetching it ahead of a click it guesses
 * (prefetch, prerender) and link-preview bots unfurling a URL someone pasted into a chat. Recorded, each would be a
 * hit of an outcome no respondent reached (a success claim, a doubled count); they are answered without recording.
 */

/** Request headers as API Gateway passes them (names in lower case). */
type Headers = Readonly<Record<string, string | undefined>> | undefined;

/**
 * The user agents of link-preview and crawler bots (their own names, never a browser's): Slack, Facebook, X,
 * LinkedIn, WhatsApp, Telegram, Discord, Skype and Teams, Pinterest, Reddit, Apple, Google, Bing and the like.
 */
const PREVIEW_BOTS =
  /slackbot|facebookexternalhit|facebot|twitterbot|linkedinbot|whatsapp\/|telegrambot|discordbot|skypeuripreview|pinterestbot|redditbot|applebot|googlebot|bingbot|bingpreview|duckduckbot|yandexbot|baiduspider|embedly|iframely|vkshare|mastodon|bitlybot|google-inspectiontool/i;

/** What kind of request no respondent made this is, or undefined for a respondent's own (as far as can be told). */
export function previewRequest(headers: Headers): 'prefetch' | 'bot' | undefined {
  const header = (name: string) => headers?.[name]?.toLowerCase() ?? '';
  // Chrome: Sec-Purpose `prefetch` (`prefetch;prerender`); older ones and Safari: Purpose / X-Purpose; Firefox: X-Moz.
  if (
    header('sec-purpose').includes('prefetch') ||
    header('purpose').includes('prefetch') ||
    header('x-purpose').includes('preview') ||
    header('x-moz').includes('prefetch')
  )
    return 'prefetch';
  if (PREVIEW_BOTS.test(header('user-agent'))) return 'bot';
  return undefined;
}
