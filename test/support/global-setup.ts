/**
 * One DynamoDB-protocol engine for the whole run. By default an embedded one on a free loopback port; with
 * TEST_DYNAMODB_ENDPOINT set, that engine instead (DynamoDB Local, or any engine speaking the protocol), so
 * the product is not tested only against dynalite's reading of it. Test files create their own uniquely named
 * tables, so they never see each other's items, nor a previous run's.
 */
import type { TestProject } from 'vitest/node';
import { startEngine } from '../../infra/local/engine';

declare module 'vitest' {
  export interface ProvidedContext {
    dynamoEndpoint: string;
  }
}

export default async function setup(project: TestProject) {
  const external = process.env.TEST_DYNAMODB_ENDPOINT;
  if (external) {
    project.provide('dynamoEndpoint', external);
    return () => undefined;
  }
  const engine = await startEngine('127.0.0.1', 0);
  project.provide('dynamoEndpoint', engine.endpoint);
  return () => engine.stop();
}
