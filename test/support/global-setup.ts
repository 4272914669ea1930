/**
 * One embedded DynamoDB-protocol engine for the whole run, on a free loopback port. Test files create their
 * own uniquely named tables in it, so they never see each other's items.
 */
import type { TestProject } from 'vitest/node';
import { startEngine } from '../../infra/local/engine';

declare module 'vitest' {
  export interface ProvidedContext {
    dynamoEndpoint: string;
  }
}

export default async function setup(project: TestProject) {
  const engine = await startEngine('127.0.0.1', 0);
  project.provide('dynamoEndpoint', engine.endpoint);
  return () => engine.stop();
}
