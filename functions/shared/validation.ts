/**
 * Run-time validation shared by every module that reads outside data: zod in its tree-shakeable form
 * (`zod/mini`, a fraction of the full library's size and load time, which every cold start pays), with the
 * English messages the full library would bring, and one way to turn a failure into a sentence.
 */
import { en } from 'zod/locales';
import * as z from 'zod/mini';

z.config(en());

/** A non-empty string (an environment variable set to "" is as good as unset). */
export const filled = (message?: string) => z.string().check(z.minLength(1, message));

/** An environment variable set to blank is as good as unset. */
const blankAsUnset = z.transform((value: unknown) =>
  typeof value === 'string' && value.trim() === '' ? undefined : value,
);
const boundedWhole = (min: number, max: number) =>
  z.pipe(z.coerce.number(), z.int().check(z.minimum(min), z.maximum(max)));

/** A whole number within bounds, read from its string form, with a default when absent or empty. */
export const wholeNumber = (min: number, max: number, fallback: number) =>
  z.pipe(blankAsUnset, z._default(boundedWhole(min, max), fallback));

/** A whole number within bounds, read from its string form; undefined when absent or empty. */
export const optionalWholeNumber = (min: number, max: number) =>
  z.pipe(blankAsUnset, z.optional(boundedWhole(min, max)));

/**
 * The first `limit` issues as "path message", joined: names the field and the problem, never the value. An issue
 * with the whole input is named `whole` (e.g. "(row)").
 */
export function describeIssues(
  error: z.core.$ZodError,
  { limit = Number.POSITIVE_INFINITY, whole = '(root)' }: { limit?: number; whole?: string } = {},
): string {
  return error.issues
    .slice(0, limit)
    .map((issue) => `${issue.path.join('.') || whole} ${issue.message}`)
    .join('; ');
}
