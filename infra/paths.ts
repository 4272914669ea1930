import { fileURLToPath } from 'node:url';

/** The repository root, for function entries and the lock file. */
export const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
