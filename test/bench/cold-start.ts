/**
 * Cold start: every function bundle as `cdk synth` builds it, its size and the time a fresh Node process takes
 * to import it (module evaluation and client construction), against a floor bundle built by the same construct
 * that holds only the DynamoDB document client and a constant handler. Each import runs in the environment the
 * synthesized template gives the function, with placeholders for deploy-time values; the bundles are imported
 * in a shuffled order each round so drift on a noisy machine falls on all of them alike.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type { Metafile } from 'esbuild';
import { ensureLedgerTable, startEngine } from '../../infra/local/engine';
import { apiEvent, filledUrl } from '../support/api-events';
import { houseBuild } from './house-build';
import { BENCH_ENV, BENCH_KEY_RING, median } from './measure';

const exec = promisify(execFile);

interface Bundle {
  readonly name: string;
  readonly file: string;
  readonly memoryMb: number;
  readonly env: Record<string, string>;
  /** Node options the function would run with (only the source-mapped variant has any). */
  readonly nodeOptions?: readonly string[];
}

interface FunctionProperties {
  Code: { S3Key: string };
  MemorySize?: number;
  Environment?: { Variables?: Record<string, unknown> };
}
type Template = {
  Resources: Record<
    string,
    { Type: string; Properties: FunctionProperties; Metadata?: Record<string, unknown> }
  >;
};

/** A deploy-time value as it would look in the deployed function's environment. */
function placeholder(template: Template, value: unknown): string {
  if (typeof value === 'string') return value;
  const ref = (value as { Ref?: string }).Ref;
  if (ref) {
    if (ref === 'AWS::URLSuffix') return 'amazonaws.com';
    if (ref === 'AWS::Region') return 'us-east-1';
    const type = template.Resources[ref]?.Type ?? '';
    if (type === 'AWS::SQS::Queue') return `https://sqs.us-east-1.amazonaws.com/123456789012/${ref}`;
    if (type === 'AWS::SNS::Topic') return `arn:aws:sns:us-east-1:123456789012:${ref}`;
    if (type === 'AWS::SecretsManager::Secret')
      return `arn:aws:secretsmanager:us-east-1:123456789012:secret:${ref}-AbCdEf`;
    return ref.toLowerCase().slice(0, 24);
  }
  const join = (value as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (join) return join[1].map((part) => placeholder(template, part)).join(join[0]);
  const attribute = (value as { 'Fn::GetAtt'?: [string, string] })['Fn::GetAtt'];
  if (attribute) return `${attribute[0]}-${attribute[1]}`.toLowerCase();
  return JSON.stringify(value);
}

/** The functions of a synthesized cloud assembly: bundle file, memory and environment. */
function bundlesOf(assembly: string): Bundle[] {
  const bundles: Bundle[] = [];
  for (const file of readdirSync(assembly).filter((f) => f.endsWith('.template.json'))) {
    const template = JSON.parse(readFileSync(join(assembly, file), 'utf8')) as Template;
    for (const [id, resource] of Object.entries(template.Resources)) {
      if (resource.Type !== 'AWS::Lambda::Function') continue;
      const key = String(resource.Properties.Code.S3Key);
      const path = String(resource.Metadata?.['aws:cdk:path'] ?? id).split('/');
      const variables = resource.Properties.Environment?.Variables ?? {};
      bundles.push({
        name: path[1] ?? id,
        file: join(assembly, `asset.${key.replace(/\.zip$/, '')}`, 'index.mjs'),
        memoryMb: Number(resource.Properties.MemorySize ?? 128),
        env: Object.fromEntries(
          Object.entries(variables).map(([name, value]) => [name, placeholder(template, value)]),
        ),
      });
    }
  }
  return bundles;
}

/** The environment Lambda gives a function besides its own variables. */
const lambdaEnv = (bundle: Bundle) => ({
  PATH: process.env.PATH ?? '',
  AWS_REGION: 'us-east-1',
  AWS_DEFAULT_REGION: 'us-east-1',
  AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
  AWS_LAMBDA_FUNCTION_NAME: bundle.name,
  AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(bundle.memoryMb),
  AWS_ACCESS_KEY_ID: 'ASIABENCHMARK',
  AWS_SECRET_ACCESS_KEY: 'benchmark',
  AWS_SESSION_TOKEN: 'benchmark',
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  ...bundle.env,
});

interface Probe {
  readonly importMs: number;
  /** The first invocation's time, when the bundle was given an event. */
  readonly firstHitMs?: number;
}

/** Imports a bundle in a fresh process and, with an event, invokes it once (import-probe.mjs). */
async function probe(bundle: Bundle, firstHit?: FirstHitStage): Promise<Probe> {
  const event = firstHit?.eventFor(bundle.name);
  const { stdout } = await exec(
    process.execPath,
    [...(bundle.nodeOptions ?? []), 'test/bench/import-probe.mjs', pathToFileURL(bundle.file).href],
    {
      env: {
        ...lambdaEnv(bundle),
        ...(event && firstHit ? { ...firstHit.env, PROBE_EVENT: JSON.stringify(event) } : {}),
      },
    },
  );
  const [importMs, hitMs, status] = stdout.trim().split(' ');
  if (event && status !== '200' && status !== '302')
    throw new Error(`${bundle.name}: the first hit answered ${status}, not a recorded hit`);
  return { importMs: Number(importMs), ...(hitMs ? { firstHitMs: Number(hitMs) } : {}) };
}

/**
 * What a first hit needs besides the bundle: the ledger (the embedded engine, addressed as the SDK addresses
 * DynamoDB, through AWS_ENDPOINT_URL_DYNAMODB, so the deployed code path runs) and Secrets Manager for the key
 * ring (a stand-in answering GetSecretValue). Each probe gets a fresh attempt, so every first hit creates one.
 */
interface FirstHitStage {
  readonly env: Record<string, string>;
  eventFor(bundle: string): object | undefined;
  stop(): Promise<void>;
}

async function firstHitStage(): Promise<FirstHitStage> {
  const engine = await startEngine();
  const tableName = 'bench-cold-start';
  await ensureLedgerTable(engine.endpoint, tableName);
  const secrets = createServer((request, response) => {
    request.resume().on('end', () => {
      response.setHeader('content-type', 'application/x-amz-json-1.1');
      response.end(JSON.stringify({ Name: 'signing-keys', ARN: 'arn', SecretString: BENCH_KEY_RING }));
    });
  });
  await new Promise<void>((done) => secrets.listen(0, '127.0.0.1', done));
  const { port } = secrets.address() as AddressInfo;
  const hit = (channel: 'redirect' | 'postback') => {
    const ids = { pid: `cold-${randomUUID()}`, token: randomUUID() };
    const url = filledUrl(BENCH_KEY_RING, channel, '60001', 'success', ids);
    return apiEvent('GET', url, { sourceIp: '198.51.100.7' });
  };
  return {
    env: {
      TABLE_NAME: tableName,
      AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: `http://127.0.0.1:${port}`,
    },
    eventFor: (bundle) =>
      bundle === 'floor'
        ? { pk: `floor-${randomUUID()}` }
        : bundle === 'redirect' || bundle === 'postback'
          ? hit(bundle)
          : undefined,
    stop: async () => {
      await new Promise((done) => secrets.close(done));
      await engine.stop();
    },
  };
}

/**
 * The postback bundle as it would ship with a linked source map, run with `--enable-source-maps` (without that
 * flag nothing reads the map): what shipping source maps would cost at every cold start.
 */
async function withSourceMap(bundle: Bundle, outdir: string): Promise<Bundle> {
  const file = join(outdir, 'index.mjs');
  await houseBuild('functions/postback.ts', { sourcemap: 'linked', outfile: file });
  return { ...bundle, name: 'postback + source map', file, nodeOptions: ['--enable-source-maps'] };
}

/** Minified bytes by package, from a metafile: where a bundle's size goes. */
function bytesByPackage(metafile: Metafile): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const output of Object.values(metafile.outputs)) {
    for (const [path, input] of Object.entries(output.inputs)) {
      const inModules = path.split('node_modules/').pop() as string;
      const name = path.includes('node_modules/')
        ? inModules
            .split('/')
            .slice(0, inModules.startsWith('@') ? 2 : 1)
            .join('/')
        : 'this product';
      sizes.set(name, (sizes.get(name) ?? 0) + input.bytesInOutput);
    }
  }
  return sizes;
}

/** What a receiver bundle holds beyond the floor, by package, built with the house bundling options. */
async function composition(entry: string): Promise<{ name: string; kB: string }[]> {
  const bundle = (file: string) => houseBuild(file, { outfile: 'index.mjs', write: false, metafile: true });
  const [floor, receiver] = await Promise.all([bundle('test/bench/floor/handler.ts'), bundle(entry)]);
  const base = bytesByPackage(floor.metafile as Metafile);
  return [...bytesByPackage(receiver.metafile as Metafile)]
    .map(([name, bytes]) => ({ name, extra: bytes - (base.get(name) ?? 0) }))
    .filter((row) => row.extra >= 1000)
    .sort((a, b) => b.extra - a.extra)
    .map((row) => ({ name: row.name, kB: (row.extra / 1000).toFixed(1) }));
}

export async function coldStart(options: { runs: number; sizeTarget: number; importTarget: number }) {
  const workdir = mkdtempSync(join(tmpdir(), 'bench-cold-start-'));
  let stage: FirstHitStage | undefined;
  try {
    const synth = (outdir: string, app?: string) =>
      exec('npx', ['cdk', 'synth', '--quiet', ...(app ? ['--app', app] : []), '--output', outdir], {
        env: BENCH_ENV,
        maxBuffer: 16 << 20,
      });
    await Promise.all([
      synth(join(workdir, 'product')),
      synth(join(workdir, 'floor'), 'npx tsx test/bench/floor/app.ts'),
    ]);
    const [floor] = bundlesOf(join(workdir, 'floor'));
    if (!floor) throw new Error('the floor app synthesized no function');
    const product = bundlesOf(join(workdir, 'product'));
    const postback = product.find((b) => b.name === 'postback');
    if (!postback) throw new Error('the product synthesized no postback function');
    const bundles = [floor, ...product, await withSourceMap(postback, join(workdir, 'mapped'))];
    const samples = new Map<string, number[]>(bundles.map((b) => [b.name, []]));
    const hitSamples = new Map<string, number[]>(bundles.map((b) => [b.name, []]));
    stage = await firstHitStage();
    for (const bundle of bundles) await probe(bundle, stage); // the first import warms the file cache
    for (let round = 0; round < options.runs; round++) {
      for (const bundle of [...bundles].sort(() => Math.random() - 0.5)) {
        const sample = await probe(bundle, stage);
        samples.get(bundle.name)?.push(sample.importMs);
        if (sample.firstHitMs !== undefined) hitSamples.get(bundle.name)?.push(sample.firstHitMs);
      }
    }
    const floorHitMs = median(hitSamples.get(floor.name) ?? []);
    const floorBytes = statSync(floor.file).size;
    const floorMs = median(samples.get(floor.name) ?? []);
    const receivers = new Set(['redirect', 'postback']);
    const rows = bundles.map((bundle) => {
      const bytes = statSync(bundle.file).size;
      const ms = median(samples.get(bundle.name) ?? []);
      const isFloor = bundle === floor;
      return {
        function: isFloor ? 'floor (document client only)' : bundle.name,
        memoryMb: bundle.memoryMb,
        kB:
          (bytes / 1000).toFixed(0) +
          (bundle.nodeOptions ? ` + ${(statSync(`${bundle.file}.map`).size / 1000).toFixed(0)} map` : ''),
        sizeRatio: (bytes / floorBytes).toFixed(2),
        importMs: ms.toFixed(1),
        importRatio: (ms / floorMs).toFixed(2),
        ...firstHitColumns(hitSamples.get(bundle.name) ?? [], floorHitMs),
        target: isFloor
          ? ''
          : receivers.has(bundle.name)
            ? bytes / floorBytes <= options.sizeTarget && ms / floorMs <= options.importTarget
              ? 'met'
              : 'missed'
            : 'n/a',
      };
    });
    return {
      runs: options.runs,
      rows,
      redirectExtra: await composition(resolve('functions/redirect.ts')),
      importMs: Object.fromEntries(bundles.map((b) => [b.name, median(samples.get(b.name) ?? [])])),
    };
  } finally {
    await stage?.stop();
    rmSync(workdir, { recursive: true, force: true });
  }
}

/** A first hit's median and its ratio to the floor's, for the bundles that were given one. */
const firstHitColumns = (samples: number[], floorMs: number) =>
  samples.length > 0
    ? { firstHitMs: median(samples).toFixed(1), firstHitRatio: (median(samples) / floorMs).toFixed(2) }
    : { firstHitMs: '', firstHitRatio: '' };
