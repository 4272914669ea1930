/**
 * The identifiers a hit carries, and what this product accepts for each.
 *
 * pid and token are restricted to URL-unreserved characters so they can never break a key, a URL or a
 * log line, and bounded so an attempt's ledger item stays within one DynamoDB write unit.
 */

export const SURVEY_ID_PATTERN = /^[1-9][0-9]{0,11}$/;
export const PID_PATTERN = /^[A-Za-z0-9._~-]{1,64}$/;
export const TOKEN_PATTERN = /^[A-Za-z0-9._~-]{1,100}$/;

/** What the marketplace leaves in a URL when it did not substitute a placeholder. */
const PLACEHOLDER = /\[%%\w+%%\]/;

export type IdentifierField = 'surveyId' | 'pid' | 'token';

const RULES: Record<IdentifierField, { pattern: RegExp; describe: string }> = {
  surveyId: { pattern: SURVEY_ID_PATTERN, describe: 'a positive integer of at most 12 digits' },
  pid: { pattern: PID_PATTERN, describe: '1 to 64 characters from A-Z a-z 0-9 . _ ~ -' },
  token: { pattern: TOKEN_PATTERN, describe: '1 to 100 characters from A-Z a-z 0-9 . _ ~ -' },
};

/** Why a value is not an acceptable identifier, or undefined when it is. */
export function identifierProblem(field: IdentifierField, value: string | undefined): string | undefined {
  if (value === undefined || value === '') return `${field} is missing`;
  if (PLACEHOLDER.test(value)) return `${field} is an unsubstituted placeholder`;
  const rule = RULES[field];
  if (!rule.pattern.test(value)) return `${field} must be ${rule.describe}`;
  return undefined;
}
