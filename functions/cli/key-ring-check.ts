/**
 * What the CLI says of a key ring edited by hand that the receivers accept all the same: a member given twice (the
 * last one wins, without a word) and a value that reads as words rather than key material (a note kept in the ring
 * is a working signing key). Warnings only: refusing such a ring would refuse every hit of a stack already holding
 * one. Never quotes a secret; a long member name only by its length (a secret put where a name belongs).
 */
import { readFile } from 'node:fs/promises';
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import { isKeyMember, isRetirementTime, retirementOf, shownKeyId } from '../receiving/signing';
import type { KeyRingLocation } from '../runtime/key-ring-source';

const RING_FIELDS = new Set(['current', 'retire']);

/** The members given more than once in an object of the document, as `path.name`. */
function repeatedMembers(json: string): string[] {
  const repeated: string[] = [];
  /** Per open object, its path and the names seen; undefined for an array. */
  const open: ({ path: string; names: Set<string> } | undefined)[] = [];
  /** The name of the member whose value comes next, for the path of an object it opens. */
  let lastName = '';
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (c === '"') {
      let end = i + 1;
      while (end < json.length && json[end] !== '"') end += json[end] === '\\' ? 2 : 1;
      let next = end + 1;
      while (/\s/.test(json[next] ?? '')) next++;
      const inObject = open.at(-1);
      if (inObject && json[next] === ':') {
        const name = JSON.parse(json.slice(i, end + 1)) as string;
        if (inObject.names.has(name)) repeated.push(`${inObject.path}${shownKeyId(name)}`);
        inObject.names.add(name);
        lastName = name;
      }
      i = end;
    } else if (c === '{') {
      const parent = open.at(-1);
      open.push({ path: parent ? `${parent.path}${shownKeyId(lastName)}.` : '', names: new Set() });
    } else if (c === '[') open.push(undefined);
    else if (c === '}' || c === ']') open.pop();
  }
  return repeated;
}

/** Warnings on a key ring's stored JSON (one the receivers parse: see `parseKeyRing`). */
export function keyRingWarnings(json: string): string[] {
  const warnings = repeatedMembers(json).map(
    (member) =>
      `the signing key ring gives ${member} more than once: only the last is read (edit the secret so that each appears once)`,
  );
  let document: unknown;
  try {
    document = JSON.parse(json);
  } catch {
    return warnings;
  }
  if (document === null || typeof document !== 'object') return warnings;
  for (const [name, value] of Object.entries(document)) {
    if (RING_FIELDS.has(name)) continue;
    if (!isKeyMember(name, value))
      warnings.push(
        `the signing key ring's member ${shownKeyId(name)} is not a key (a key id of letters, digits, _ and - holding a secret of at least 32 characters): the receivers ignore it`,
      );
    else if (/\s/.test(value))
      warnings.push(
        `the signing key ring's member ${shownKeyId(name)} holds words, not key material: every member but current and retire is a key the receivers accept signatures of (keep notes out of the ring; a key's secret is random, as redirects rotate makes it)`,
      );
  }
  const retire = (document as { retire?: unknown }).retire;
  if (retire !== null && typeof retire === 'object')
    for (const name of Object.keys(retire)) {
      const named = (document as Record<string, unknown>)[name];
      const time = (retire as Record<string, unknown>)[name];
      if (!isKeyMember(name, named))
        warnings.push(
          `the signing key ring's retire entry for ${shownKeyId(name)} names no key of the ring: it retires nothing`,
        );
      else if (!isRetirementTime(time)) {
        const at = retirementOf(retire as Record<string, unknown>, name) as Date;
        warnings.push(
          `the signing key ring's retire entry for ${shownKeyId(name)} is not an ISO 8601 time with its offset: ${at.getTime() === 0 ? 'it cannot be read as a time, and the key is refused now' : `read as ${at.toISOString()}`}`,
        );
      }
    }
  return warnings;
}

/** The ring's stored JSON, read again from where the CLI keeps it (a secret's read comes from the cache). */
export async function storedKeyRing(location: KeyRingLocation): Promise<string | undefined> {
  if ('inline' in location) return location.inline;
  if ('file' in location) return readFile(location.file, 'utf8');
  const raw = await getSecret<string>(location.secretId, { maxAge: 300 });
  return typeof raw === 'string' ? raw : undefined;
}
