/**
 * One scratch directory for the whole run (scratch.ts), removed when it ends, and one DynamoDB-protocol engine. By default an embedded one on a free loopback port; with
 * TEST_DYNAMODB_ENDPOINT set, that engine instead (DynamoDB Local, or any engine speaking the protocol), so
 * the product is not tested only against dynalite's reading of it. Test files create their own uniquely named
 * tables, so they never see each other's items, nor a previous run's.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEngine } from '../../infra/local/engine';

declare module 'vitest' {
  export interface ProvidedContext {
    dynamoEndpoint: string;
    scratchDirectory: string;
  }
}

export default async function setup(project: TestProject) {
  const scratch = mkdtempSync(join(tmpdir(), 'receiver-tests-'));
  project.provide('scratchDirectory', scratch);
  const removeScratch = () => rmSync(scratch, { recursive: true, force: true });
  const external = process.env.TEST_DYNAMODB_ENDPOINT;
  if (external) {
    project.provide('dynamoEndpoint', external);
    return removeScratch;
  }
  const engine = await startEngine('127.0.0.1', 0);
  project.provide('dynamoEndpoint', engine.endpoint);
  return async () => {
    await engine.stop();
    removeScratch();
  };
}
