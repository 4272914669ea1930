/**
 * The `attemptFeed` setting in the synthesized template: off, the stack is what it was (no stream, no consumer);
 * on, the table's stream feeds the consumer with changes of attempts only, a failed batch is retried from its
 * earliest change, split, and at last set aside on a queue with an alarm, and the consumer may write feed items
 * and nothing else.
 */

import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_FEED_LAG_SECONDS } from '../../functions/ledger/feed-keys';
import {
  FEED_BATCHING_WINDOW,
  FEED_LAG_MARGIN,
  FEED_RETRY_ATTEMPTS,
} from '../../infra/constructs/attempt-feed';
import { ReceiverStack } from '../../infra/receiver-stack';
import { acceptedByFeed, FEED_STREAM_FILTER } from '../../infra/routes';
import { readEnvironmentSettings, stackProps } from '../../infra/settings';

let stack: ReceiverStack;
let template: Template;
let without: Template;
const templateApp = () => new App({ context: { 'aws:cdk:bundling-stacks': [] } });

beforeAll(() => {
  stack = new ReceiverStack(templateApp(), 'Test', {
    attemptFeed: true,
    matchedVerdicts: 'implied',
    marketplace: { baseUrl: 'https://supplier.marketplace.example' },
  });
  template = Template.fromStack(stack);
  without = Template.fromStack(new ReceiverStack(templateApp(), 'Test', {}));
}, 60_000);

const logicalId = (construct: { node: { defaultChild?: unknown } }) =>
  stack.getLogicalId(construct.node.defaultChild as import('aws-cdk-lib').CfnElement);

describe('the attempt feed', () => {
  it('is off by default: no stream on the table and no consumer', () => {
    const table = Object.values(without.findResources('AWS::DynamoDB::GlobalTable'))[0] as {
      Properties: Record<string, unknown>;
    };
    expect(table.Properties.StreamSpecification).toBeUndefined();
    expect(JSON.stringify(without.findResources('AWS::Lambda::EventSourceMapping'))).not.toContain(
      'StreamArn',
    );
    expect(readEnvironmentSettings({ example: {} }, 'example').attemptFeed).toBe(false);
    expect(
      stackProps(readEnvironmentSettings({ example: { attemptFeed: true } }, 'example')).attemptFeed,
    ).toBe(true);
  });

  it('matched verdicts are kept by default; implied, the reconciliation function is told so', () => {
    // The same construct path in both stacks: the same logical id.
    const variables = (t: Template, construct: { node: { defaultChild?: unknown } }) =>
      (
        t.toJSON().Resources[logicalId(construct)] as {
          Properties: { Environment: { Variables: Record<string, unknown> } };
        }
      ).Properties.Environment.Variables;
    expect(variables(template, stack.reconcile.function)).toMatchObject({
      RECONCILE_MATCHED_VERDICTS: 'implied',
    });
    expect(variables(without, stack.reconcile.function)).not.toHaveProperty('RECONCILE_MATCHED_VERDICTS');
    expect(readEnvironmentSettings({ example: {} }, 'example').matchedVerdicts).toBe('kept');
    expect(
      stackProps(readEnvironmentSettings({ example: { matchedVerdicts: 'implied' } }, 'example'))
        .matchedVerdicts,
    ).toBe('implied');
    expect(() => readEnvironmentSettings({ example: { matchedVerdicts: 'none' } }, 'example')).toThrow(
      /matchedVerdicts/,
    );
  });

  it('has the health check read the feed, judging as of its batching window and a margin ago', () => {
    const health = template.toJSON().Resources[logicalId(stack.health.function)] as {
      Properties: { Environment: { Variables: Record<string, unknown> } };
    };
    expect(health.Properties.Environment.Variables).toMatchObject({
      ATTEMPT_FEED: 'on',
      ATTEMPT_FEED_LAG_SECONDS: String(FEED_BATCHING_WINDOW.toSeconds() + FEED_LAG_MARGIN.toSeconds()),
    });
    // The functions' and the CLI's default when the variable is not set: the same lag.
    expect(FEED_BATCHING_WINDOW.toSeconds() + FEED_LAG_MARGIN.toSeconds()).toBe(DEFAULT_FEED_LAG_SECONDS);
  });

  it('has scheduled reconciliation read the feed, with a Query on feed items alone', () => {
    const reconcile = template.toJSON().Resources[logicalId(stack.reconcile.function)] as {
      Properties: { Environment: { Variables: Record<string, unknown> } };
    };
    expect(reconcile.Properties.Environment.Variables).toMatchObject({
      ATTEMPT_FEED: 'on',
      ATTEMPT_FEED_LAG_SECONDS: String(FEED_BATCHING_WINDOW.toSeconds() + FEED_LAG_MARGIN.toSeconds()),
    });
    const policies = template.findResources('AWS::IAM::Policy', {
      Properties: { Roles: [{ Ref: logicalId(stack.reconcile.role as never) }] },
    });
    type Statement = { Action: string | string[]; Resource: unknown; Condition?: unknown };
    const queries = Object.values(policies)
      .flatMap(
        (p) =>
          (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument
            .Statement,
      )
      .filter((s) => [s.Action].flat().includes('dynamodb:Query'));
    // The day index (its own resource), and on the table the feed's items and the summaries' partitions (a day's
    // outsiders), by their key's prefix.
    const onTable = queries.filter((s) => JSON.stringify(s.Resource).endsWith('"Arn"]}'));
    expect(onTable).toEqual([
      expect.objectContaining({
        Action: 'dynamodb:Query',
        Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['SUMMARY#*', 'FEED#*'] } },
      }),
    ]);
  });

  it("has the receivers leave attempts the feed covers out of the day index, reading the feed's start and probe note alone", () => {
    type Statement = { Action: string | string[]; Resource: unknown; Condition?: unknown };
    for (const receiver of [stack.redirect, stack.postback, stack.drainer]) {
      const fn = template.toJSON().Resources[logicalId(receiver.function)] as {
        Properties: { Environment: { Variables: Record<string, unknown> } };
      };
      expect(fn.Properties.Environment.Variables).toMatchObject({ ATTEMPT_FEED: 'on' });
      // The table's stream, so that a feed an earlier stream left (turned off and on again) does not cover.
      expect(JSON.stringify(fn.Properties.Environment.Variables.ATTEMPT_FEED_STREAM)).toContain('StreamArn');
      const policies = template.findResources('AWS::IAM::Policy', {
        Properties: { Roles: [{ Ref: logicalId(receiver.role as never) }] },
      });
      const reads = Object.values(policies)
        .flatMap(
          (p) =>
            (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument
              .Statement,
        )
        .filter((s) => [s.Action].flat().includes('dynamodb:GetItem'))
        .map((s) => s.Condition);
      expect(reads).toEqual(
        expect.arrayContaining([
          { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['FEED#START*', 'FEED#PROBE*'] } },
        ]),
      );
    }
    // Without the feed, the receivers index every attempt.
    const redirect = Object.values(without.findResources('AWS::Lambda::Function')).filter((f) =>
      JSON.stringify(f).includes('"ATTEMPT_FEED"'),
    );
    expect(redirect).toEqual([]);
  });

  it("streams the table's new and old images to the consumer: attempts' inserts and changes only", () => {
    template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
    });
    const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping')).map(
      (m) => (m as { Properties: Record<string, unknown> }).Properties,
    );
    const mapping = mappings.find((m) => JSON.stringify(m.EventSourceArn).includes('StreamArn'));
    expect(mapping).toMatchObject({
      FunctionName: { Ref: logicalId(stack.attemptFeed?.consumer.function as never) },
      StartingPosition: 'TRIM_HORIZON',
      BatchSize: 1000,
      MaximumBatchingWindowInSeconds: FEED_BATCHING_WINDOW.toSeconds(),
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: FEED_RETRY_ATTEMPTS,
      ParallelizationFactor: 1,
      FilterCriteria: { Filters: [{ Pattern: JSON.stringify(FEED_STREAM_FILTER) }] },
      DestinationConfig: {
        OnFailure: {
          Destination: { 'Fn::GetAtt': [logicalId(stack.attemptFeed?.failedBatches as never), 'Arn'] },
        },
      },
    });
  });

  it("filters the stream to attempts' changes by the key alone (the same pattern the local stand-in applies)", () => {
    const record = (eventName: 'INSERT' | 'MODIFY' | 'REMOVE', pk: string) => ({
      eventName,
      dynamodb: { Keys: { pk: { S: pk }, sk: { S: 'TOKEN#t' } } },
    });
    expect(acceptedByFeed(record('INSERT', 'ATTEMPT#1#p'))).toBe(true);
    expect(acceptedByFeed(record('MODIFY', 'ATTEMPT#1#p'))).toBe(true);
    // A DynamoDB mapping filters on the `dynamodb` key only: a removal reaches the consumer, which leaves it out.
    expect(acceptedByFeed(record('REMOVE', 'ATTEMPT#1#p'))).toBe(true);
    expect(Object.keys(FEED_STREAM_FILTER)).toEqual(['dynamodb']);
    expect(acceptedByFeed(record('MODIFY', 'SUMMARY#1'))).toBe(false);
    expect(acceptedByFeed(record('INSERT', 'FEED#2026-11-26#3'))).toBe(false);
  });

  it('may write feed items and nothing else of the ledger, and read the stream', () => {
    const consumer = stack.attemptFeed?.consumer;
    const policies = template.findResources('AWS::IAM::Policy', {
      Properties: { Roles: [{ Ref: logicalId(consumer?.role as never) }] },
    });
    type Statement = { Action: string | string[]; Resource: unknown; Condition?: unknown };
    const statements = Object.values(policies).flatMap(
      (p) =>
        (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument
          .Statement,
    );
    const ledger = statements.filter((s) => [s.Action].flat().some((a) => a.startsWith('dynamodb:')));
    const onTable = ledger.filter((s) => JSON.stringify(s.Resource).endsWith('"Arn"]}'));
    expect(onTable).toEqual([
      expect.objectContaining({
        Action: 'dynamodb:PutItem',
        Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['FEED#*'] } },
      }),
    ]);
    for (const s of ledger.filter((s) => !onTable.includes(s)))
      expect(JSON.stringify(s.Resource)).toContain('StreamArn');
  });

  it('alarms when the consumer falls behind or sets a batch aside', () => {
    const names = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map(
      (a) => (a as { Properties: { AlarmName: string } }).Properties.AlarmName,
    );
    expect(names).toEqual(
      expect.arrayContaining([
        'Test-attempt-feed-behind',
        'Test-attempt-feed-failed-batches',
        'Test-attempt-feed-errors',
      ]),
    );
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'Test-attempt-feed-behind',
      MetricName: 'IteratorAge',
      Namespace: 'AWS/Lambda',
      Threshold: 15 * 60_000,
    });
    // Each batch set aside notifies: not the queue's depth, whose messages stay 14 days and would hold it in ALARM.
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'Test-attempt-feed-failed-batches',
      MetricName: 'NumberOfMessagesSent',
      Namespace: 'AWS/SQS',
      Statistic: 'Sum',
      Threshold: 1,
    });
  });

  it('reports no unacknowledged cdk-nag finding', () => {
    expect(new AwsSolutionsChecks().validateScope(stack).violations.map((v) => v.ruleName)).toEqual([]);
  });
});
