/**
 * The local defaults' key ring file: made with the development ring where none is configured, and where a file is
 * named that does not exist yet only in a directory that does (a mistyped path is said, not signed with in silence).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyLocalDefaults, DEV_KEY_RING } from '../../functions/runtime/local-stack-defaults';
import { scratchDirectory } from '../support/scratch';

describe('the local key ring file', () => {
  it('is made where it is named, in a directory that exists; a directory that does not is refused by name', () => {
    const directory = scratchDirectory('local-defaults-');
    const named = join(directory, 'ring.json');
    applyLocalDefaults({ SIGNING_KEYS_FILE: named });
    expect(readFileSync(named, 'utf8').trim()).toBe(DEV_KEY_RING);
    const mistyped = join(directory, 'no-such-directory', 'ring.json');
    expect(() => applyLocalDefaults({ SIGNING_KEYS_FILE: mistyped })).toThrow(
      /SIGNING_KEYS_FILE .*no-such-directory.*its directory does not exist/,
    );
    expect(existsSync(join(directory, 'no-such-directory'))).toBe(false);
  });
});

describe("the local marketplace's token", () => {
  it('is filled in only where no other source of it is given (a parameter or a secret named by hand)', () => {
    const ring = { SIGNING_KEYS: DEV_KEY_RING };
    expect(applyLocalDefaults({ ...ring }).MARKETPLACE_ACCESS_TOKEN).toBe('local-marketplace-token');
    for (const source of [
      { MARKETPLACE_TOKEN_PARAMETER: '/marketplace/token' },
      { MARKETPLACE_TOKEN_SECRET_ID: 'marketplace-token' },
    ])
      expect(applyLocalDefaults({ ...ring, ...source }).MARKETPLACE_ACCESS_TOKEN).toBeUndefined();
  });
});
