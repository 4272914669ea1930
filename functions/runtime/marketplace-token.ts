/**
 * What the marketplace token secret the stack creates holds until the supplier puts the real token in it. A
 * function that reads it calls nothing: the marketplace would answer 401 to every scheduled run, and a supplier's
 * key sent a wrong token every few minutes may be flagged there.
 */
export const MARKETPLACE_TOKEN_PLACEHOLDER = 'not-set:put-the-marketplace-access-token-here';

/** The token as read from its secret or parameter; throws, naming the problem, when there is none yet. */
export function usableToken(token: unknown): string {
  if (typeof token !== 'string' || token.trim() === '')
    throw new Error('the marketplace access token secret is empty');
  if (token.trim() === MARKETPLACE_TOKEN_PLACEHOLDER)
    throw new Error(
      'the marketplace access token is not set yet: put it in the secret named by the stack output MarketplaceTokenSecretArn',
    );
  return token;
}
