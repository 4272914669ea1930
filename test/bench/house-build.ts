/**
 * esbuild with the house bundling options (infra/constructs/receiver-function.ts), so a benchmark measures code
 * built as `cdk synth` builds the functions: minified ESM, the SDK inside, the Lambda credential alias.
 */
import { type BuildOptions, build } from 'esbuild';
import { BUNDLING } from '../../infra/constructs/receiver-function';

/** The house bundling's `--alias:` arguments as esbuild's API takes them. */
const BUNDLING_ALIAS = Object.fromEntries(
  Object.entries(BUNDLING.esbuildArgs)
    .filter(([flag]) => flag.startsWith('--alias:'))
    .map(([flag, target]) => [flag.slice('--alias:'.length), String(target)]),
);

/** Builds `entry` with the house bundling options, plus `extra`. */
export const houseBuild = (entry: string, extra: BuildOptions) =>
  build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: BUNDLING.target,
    minify: BUNDLING.minify,
    mainFields: [...BUNDLING.mainFields],
    banner: { js: BUNDLING.banner },
    alias: BUNDLING_ALIAS,
    logLevel: 'silent',
    ...extra,
  });
