/**
 * The one synth that bundles: every function's asset is a single minified ESM file, runnable on its own, with no
 * source map shipped beside it. The template tests skip bundling; this one runs esbuild for eight functions, so it
 * has a timeout that fits a loaded two-core machine.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { describe, expect, it } from 'vitest';
import { ReceiverStack } from '../../infra/receiver-stack';
import { scratchDirectory } from '../support/scratch';

const outdir = scratchDirectory('receiver-bundle-');

describe('bundled functions', () => {
  it('each function ships one ESM index.mjs and nothing else', { timeout: 180_000 }, () => {
    const app = new App({ outdir });
    // With the attempt feed, so its consumer is bundled too.
    const stack = new ReceiverStack(app, 'Bundled', { attemptFeed: true });
    const assembly = app.synth();
    const template = assembly.getStackByName(stack.stackName).template as {
      Resources: Record<string, { Type: string; Properties: { Code?: { S3Key?: string } } }>;
    };
    // A function's code is the zip of the staged directory asset.<hash>.
    const functions = Object.entries(template.Resources).filter(
      ([, r]) => r.Type === 'AWS::Lambda::Function',
    );
    const assetOf = (r: (typeof functions)[number][1]) =>
      `asset.${r.Properties.Code?.S3Key?.replace(/\.zip$/, '')}`;
    const assets = functions.map(([, r]) => assetOf(r));
    expect(assets).toHaveLength(8);
    // The receivers carry no reconciliation: the marketplace's records (their schemas, built at import) and the
    // verdict rules stay out of the two bundles every hit's cold start loads.
    const receivers = functions.filter(([id]) => /^(redirect|postback)function/.test(id));
    expect(receivers).toHaveLength(2);
    for (const [id, r] of receivers) {
      const code = readFileSync(join(outdir, assetOf(r), 'index.mjs'), 'utf8');
      expect(code, id).not.toContain('verifiedTknDt');
      expect(code, id).not.toContain('Pre Survey Termination');
      // Nor the attempt feed's encoding (the stream consumer's).
      expect(code, id).not.toContain('brotliCompressSync');
      // Nor zod's catch, which pulls 8 kB of its internals into every cold start (runtime-config.ts reads the one
      // setting that must not fail the start by hand).
      expect(code.includes('$ZodCatch'), `${id} holds zod's catch`).toBe(false);
    }
    for (const asset of assets) {
      const files = readdirSync(join(outdir, asset));
      expect(files).toEqual(['index.mjs']);
      const code = readFileSync(join(outdir, asset, 'index.mjs'), 'utf8');
      expect(code).toMatch(/export\s*\{[^}]*\bhandler\b/);
      expect(code).not.toContain('sourceMappingURL');
      // The default credential chain is replaced by the environment provider (functions/runtime/lambda-credentials).
      expect(code).not.toContain('sso_start_url'); // the SSO provider
      expect(code).not.toContain('AWS_CONTAINER_CREDENTIALS'); // the container provider
      expect(code).toContain('AWS_SESSION_TOKEN'); // the environment provider
    }
  });
});
