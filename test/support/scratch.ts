/**
 * Temporary directories that go away with the test run: each is made under the run's own directory, which the
 * global setup creates and its teardown removes, so files a test writes (key rings, reports, CDK's cloud
 * assemblies) do not pile up in the system's temporary directory run after run.
 */
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';

/** A new empty directory named `<prefix>XXXXXX` inside the test run's scratch directory. */
export const scratchDirectory = (prefix: string): string =>
  mkdtempSync(join(inject('scratchDirectory'), prefix));
