/**
 * What the deployed stack must guarantee, one concern per test, read from the synthesized template. These stacks
 * skip bundling (the template does not depend on the bundle's contents); bundling.test.ts bundles once.
 */
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { HttpApi, HttpMethod } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpUrlIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  dimensionSets,
  inCatalogue,
  METRIC_CATALOGUE,
  METRIC_NAMESPACE,
  type MetricName,
} from '../../functions/runtime/metric-catalogue';
import type { ReceiverFunction } from '../../infra/constructs/receiver-function';
import { DEPLOYED_REDIRECTS_PER_SENDER_MINUTE, ReceiverStack } from '../../infra/receiver-stack';
import { ROUTES, routeKey, SCHEDULED_FUNCTIONS } from '../../infra/routes';

let stack: ReceiverStack;
let template: Template;

/** An app that synthesizes templates without running esbuild for the functions. */
const templateApp = () => new App({ context: { 'aws:cdk:bundling-stacks': [] } });

beforeAll(() => {
  const app = templateApp();
  stack = new ReceiverStack(app, 'Test', {
    alarmEmail: 'oncall@panel.example.com',
    landingUrls: { LANDING_URL_SUCCESS: 'https://panel.example.com/done?pid={pid}' },
    marketplace: { baseUrl: 'https://supplier.marketplace.example', apiVersion: 'v2' },
    redirectSyncRate: Duration.minutes(30),
    postbackMethods: { fail: 'POST' },
    healthSettings: { windowMinutes: 20, stoppedMinutes: 45 },
  });
  template = Template.fromStack(stack);
}, 60_000);

const logicalId = (construct: { node: { defaultChild?: unknown } }) =>
  stack.getLogicalId(construct.node.defaultChild as import('aws-cdk-lib').CfnElement);

/** The synthesized AWS::Lambda::Function of a house function. */
function functionResource(fn: ReceiverFunction, from: Template = template) {
  const resource = from.toJSON().Resources[logicalId(fn.function)];
  return resource as {
    Properties: {
      Environment: { Variables: Record<string, unknown> };
      Timeout?: number;
      ReservedConcurrentExecutions?: number;
    };
  };
}

type Statement = { Action: string | string[]; Resource: unknown; Effect: string; Condition?: unknown };

/** Every IAM statement attached to a function's role. */
function statementsOf(fn: ReceiverFunction): Statement[] {
  const policies = template.findResources('AWS::IAM::Policy', {
    Properties: { Roles: [{ Ref: logicalId(fn.role) }] },
  });
  return Object.values(policies).flatMap(
    (p) =>
      (p as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument
        .Statement,
  );
}

const actionsOf = (statements: Statement[]) =>
  statements.flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action])).sort();

describe('ledger table', () => {
  it('is on-demand, keyed pk/sk, with the keys-only day and discrepancy indexes and a TTL attribute', () => {
    template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      GlobalSecondaryIndexes: [
        Match.objectLike({
          IndexName: 'gsi1',
          KeySchema: [
            { AttributeName: 'gsi1pk', KeyType: 'HASH' },
            { AttributeName: 'gsi1sk', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'KEYS_ONLY' },
        }),
        Match.objectLike({
          IndexName: 'gsi2',
          KeySchema: [
            { AttributeName: 'gsi2pk', KeyType: 'HASH' },
            { AttributeName: 'gsi2sk', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'KEYS_ONLY' },
        }),
      ],
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
    });
  });

  it('has point-in-time recovery and deletion protection, and is retained on stack delete', () => {
    template.hasResource('AWS::DynamoDB::GlobalTable', {
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
      Properties: {
        Replicas: [
          Match.objectLike({
            PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
            DeletionProtectionEnabled: true,
          }),
        ],
      },
    });
  });
});

describe('hit buffer', () => {
  it('both queues, which hold acknowledged hits not yet in the ledger, survive a stack delete or a replacement', () => {
    const queues = Object.values(template.findResources('AWS::SQS::Queue'));
    expect(queues).toHaveLength(2);
    // Kept even when the operation that created them rolls back: one created by an update may already hold hits.
    for (const queue of queues)
      expect(queue).toMatchObject({ DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
  });
});

describe('functions', () => {
  it('run nodejs22.x on arm64 with the bundled ESM handler', () => {
    const functions = template.findResources('AWS::Lambda::Function');
    expect(Object.keys(functions)).toHaveLength(7);
    for (const fn of Object.values(functions) as { Properties: Record<string, unknown> }[]) {
      expect(fn.Properties).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        Handler: 'index.handler',
      });
      expect(fn.Properties.LoggingConfig).toMatchObject({ LogFormat: 'JSON', SystemLogLevel: 'WARN' });
    }
  });

  it('get the table name and the key ring secret id, never the keys themselves', () => {
    const tableRef = { Ref: logicalId(stack.ledger.table) };
    const secretRef = { Ref: logicalId(stack.signingKeys) };
    for (const fn of [stack.redirect, stack.postback, stack.redirectSync]) {
      const variables = functionResource(fn).Properties.Environment.Variables;
      expect(variables.TABLE_NAME).toEqual(tableRef);
      expect(variables.SIGNING_KEYS_SECRET_ID).toEqual(secretRef);
      expect(variables).not.toHaveProperty('SIGNING_KEYS');
    }
  });

  it('pass the landing templates to the redirect function only', () => {
    const withLanding = template.findResources('AWS::Lambda::Function', {
      Properties: {
        Environment: { Variables: { LANDING_URL_SUCCESS: 'https://panel.example.com/done?pid={pid}' } },
      },
    });
    expect(Object.keys(withLanding)).toHaveLength(1);
  });

  it('pass the per-sender bound on redirects to the redirect function: 600 unless set, 0 for none', () => {
    expect(
      functionResource(stack.redirect).Properties.Environment.Variables.REDIRECTS_PER_SENDER_MINUTE,
    ).toBe(String(DEPLOYED_REDIRECTS_PER_SENDER_MINUTE));
    expect(DEPLOYED_REDIRECTS_PER_SENDER_MINUTE).toBe(600);
    for (const bound of [120, 0]) {
      const bounded = new ReceiverStack(templateApp(), `Bounded${bound}`, {
        redirectsPerSenderMinute: bound,
      });
      const variables = functionResource(bounded.redirect, Template.fromStack(bounded)).Properties.Environment
        .Variables;
      expect(variables.REDIRECTS_PER_SENDER_MINUTE).toBe(String(bound));
    }
  });

  it('refuse a bad landing template at synth time', () => {
    expect(
      () =>
        new ReceiverStack(templateApp(), 'Bad', { landingUrls: { LANDING_URL_FAIL: 'javascript:alert(1)' } }),
    ).toThrow(/LANDING_URL_FAIL must be an http\(s\) URL/);
  });
});

describe('least privilege', () => {
  it('the redirect function may only update ledger items, read attempts back, buffer hits, read the key ring and write its logs', () => {
    expect(actionsOf(statementsOf(stack.redirect))).toEqual([
      'dynamodb:GetItem',
      // Attempts and refusals; a late hit's flag on a summary (its own statement: those attributes alone).
      'dynamodb:UpdateItem',
      'dynamodb:UpdateItem',
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'secretsmanager:GetSecretValue',
      'sqs:SendMessage',
    ]);
  });

  it('the postback function may only update ledger items, read attempts back, buffer hits, read the key ring and write its logs', () => {
    expect(actionsOf(statementsOf(stack.postback))).toEqual([
      'dynamodb:GetItem',
      // Attempts and refusals; a late hit's flag on a summary (its own statement: those attributes alone).
      'dynamodb:UpdateItem',
      'dynamodb:UpdateItem',
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'secretsmanager:GetSecretValue',
      'sqs:SendMessage',
    ]);
  });

  it('ledger actions apply to the table alone, not its indexes or other tables', () => {
    const tableArn = { 'Fn::GetAtt': [logicalId(stack.ledger.table), 'Arn'] };
    for (const fn of [stack.redirect, stack.postback]) {
      const ledger = statementsOf(fn).filter((s) => actionsOf([s]).some((a) => a.startsWith('dynamodb:')));
      expect(ledger.map((s) => s.Resource)).toEqual([tableArn, tableArn, tableArn]);
      // The read back of a retried write: attempts only.
      const read = ledger.find((s) => actionsOf([s]).includes('dynamodb:GetItem'));
      expect(read?.Condition).toEqual({
        'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['ATTEMPT#*'] },
      });
      // Of the summaries, a late hit's flag alone (the key attributes, as IAM wants them named).
      const flag = ledger.find((s) =>
        JSON.stringify(s.Condition).includes('"dynamodb:LeadingKeys":["SUMMARY#*"]'),
      );
      expect(flag?.Condition).toEqual({
        'ForAllValues:StringLike': {
          'dynamodb:LeadingKeys': ['SUMMARY#*'],
          'dynamodb:Attributes': [
            'pk',
            'sk',
            'gsi1pk',
            'gsi1sk',
            'gsi2pk',
            'gsi2sk',
            'ledgerChangedAt',
            'kind',
            'flag#*',
          ],
        },
        StringEqualsIfExists: { 'dynamodb:ReturnValues': ['NONE', 'UPDATED_OLD', 'UPDATED_NEW'] },
      });
      expect(JSON.stringify(ledger)).not.toMatch(/"ATTEMPT#\*","REJECTED#\*","SUMMARY#\*"/);
    }
  });

  it('no role carries a managed policy', () => {
    for (const role of Object.values(template.findResources('AWS::IAM::Role')) as {
      Properties: Record<string, unknown>;
    }[]) {
      expect(role.Properties.ManagedPolicyArns).toBeUndefined();
    }
  });
});

describe('a marketplace token secret named in the settings', () => {
  it('is read by its name, under a policy that matches the ARN Secrets Manager gave it', () => {
    const named = new ReceiverStack(templateApp(), 'Named', {
      marketplace: { baseUrl: 'https://m.example.com', tokenSecretName: 'survey/marketplace-token' },
    });
    const variables = Template.fromStack(named).findResources('AWS::Lambda::Function');
    const tokens = Object.values(variables)
      .map((f) => (f as { Properties: { Environment?: { Variables?: Record<string, unknown> } } }).Properties)
      .map((p) => p.Environment?.Variables?.MARKETPLACE_TOKEN_SECRET_ID)
      .filter(Boolean);
    expect(tokens.length).toBeGreaterThan(0);
    for (const token of tokens) expect(token).toBe('survey/marketplace-token');
    const policies = JSON.stringify(Template.fromStack(named).findResources('AWS::IAM::Policy'));
    expect(policies).toContain(':secret:survey/marketplace-token-??????');
    expect(policies).not.toMatch(/:secret:survey\/marketplace-token"/);
    // The output the CLI takes its MARKETPLACE_TOKEN_SECRET_ID from: the name (a partial ARN is read as complete
    // when the name ends in a hyphen and six characters).
    expect(
      Template.fromStack(named).findOutputs('MarketplaceTokenSecretArn').MarketplaceTokenSecretArn?.Value,
    ).toBe('survey/marketplace-token');
  });
});

describe('redirect sync', () => {
  it('runs on the configured schedule, enabled, invoking the sync function without retries', () => {
    template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'rate(30 minutes)',
      State: 'ENABLED',
      Target: Match.objectLike({
        Arn: { 'Fn::GetAtt': [logicalId(stack.redirectSync.function), 'Arn'] },
        RetryPolicy: Match.objectLike({ MaximumRetryAttempts: 0 }),
      }),
    });
  });

  it('the scheduled functions are not run again by Lambda after a failure (their schedules invoke them asynchronously)', () => {
    for (const scheduled of [stack.redirectSync, stack.reconcile, stack.health])
      template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
        FunctionName: { Ref: logicalId(scheduled.function) },
        MaximumRetryAttempts: 0,
        MaximumEventAgeInSeconds: Match.anyValue(),
      });
  });

  it('is deployed with its schedule disabled when no marketplace URL was given', () => {
    const bare = Template.fromStack(new ReceiverStack(templateApp(), 'Bare'));
    bare.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'rate(15 minutes)',
      State: 'DISABLED',
    });
  });

  it('a second stack on the same marketplace account turns it off: no schedule, no alarms of its runs; reconciliation runs', () => {
    const second = Template.fromStack(
      new ReceiverStack(templateApp(), 'Staging', {
        marketplace: { baseUrl: 'https://supplier.marketplace.example' },
        redirectSyncEnabled: false,
      }),
    );
    const states = Object.values(second.findResources('AWS::Scheduler::Schedule')).map((schedule) => {
      const { Description, State } = (schedule as { Properties: { Description: string; State: string } })
        .Properties;
      return [Description, State];
    });
    expect(states).toContainEqual(['Runs the redirect sync', 'DISABLED']);
    expect(states.filter(([, state]) => state === 'ENABLED')).toHaveLength(2);
    const described = JSON.stringify(second.findResources('AWS::CloudWatch::Alarm'));
    expect(described).not.toContain('The redirect sync has stopped running');
    expect(described).not.toContain('survey listing was refused');
    expect(described).toContain('Reconciliation has stopped running');
  });

  it("builds the surveys' URLs on the supplier's own host name when one is set, and says where DNS must point it", () => {
    const own = new ReceiverStack(templateApp(), 'OwnDomain', {
      marketplace: { baseUrl: 'https://supplier.marketplace.example' },
      customDomain: {
        name: 'surveys.acme-research.net',
        certificateArn: 'arn:aws:acm:us-east-1:210987654321:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789',
      },
    });
    const domainTemplate = Template.fromStack(own);
    domainTemplate.hasResourceProperties('AWS::ApiGatewayV2::DomainName', {
      DomainName: 'surveys.acme-research.net',
      DomainNameConfigurations: [
        Match.objectLike({
          CertificateArn:
            'arn:aws:acm:us-east-1:210987654321:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789',
        }),
      ],
    });
    domainTemplate.resourceCountIs('AWS::ApiGatewayV2::ApiMapping', 1);
    expect(functionResource(own.redirectSync, domainTemplate).Properties.Environment.Variables).toMatchObject(
      {
        PUBLIC_BASE_URL: 'https://surveys.acme-research.net/',
      },
    );
    const outputs = domainTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs.ApiUrl?.Value).toBe('https://surveys.acme-research.net/');
    expect(outputs.CustomDomainTarget?.Value).toEqual({
      'Fn::GetAtt': [expect.stringMatching(/domain/), 'RegionalDomainName'],
    });
    // The postbacks keep their execute-api host unless they are given a name of their own, which synth says.
    expect(outputs.PostbackDomainTarget).toBeUndefined();
    Annotations.fromStack(own).hasWarning('*', Match.stringLikeRegexp('customDomain without postbackName'));
  });

  it('puts the postbacks on a host name of their own when one is set, under the same certificate', () => {
    const certificateArn =
      'arn:aws:acm:us-east-1:210987654321:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789';
    const own = new ReceiverStack(templateApp(), 'OwnPostbackDomain', {
      marketplace: { baseUrl: 'https://supplier.marketplace.example' },
      customDomain: {
        name: 'surveys.acme-research.net',
        postbackName: 'pb.acme-research.net',
        certificateArn,
      },
    });
    const domainTemplate = Template.fromStack(own);
    Annotations.fromStack(own).hasNoWarning('*', Match.stringLikeRegexp('customDomain without postbackName'));
    domainTemplate.resourceCountIs('AWS::ApiGatewayV2::ApiMapping', 2);
    domainTemplate.hasResourceProperties('AWS::ApiGatewayV2::DomainName', {
      DomainName: 'pb.acme-research.net',
      DomainNameConfigurations: [Match.objectLike({ CertificateArn: certificateArn })],
    });
    expect(functionResource(own.redirectSync, domainTemplate).Properties.Environment.Variables).toMatchObject(
      {
        PUBLIC_BASE_URL: 'https://surveys.acme-research.net/',
        POSTBACK_BASE_URL: 'https://pb.acme-research.net/',
      },
    );
    const outputs = domainTemplate.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs.PostbackApiUrl?.Value).toBe('https://pb.acme-research.net/');
    expect(outputs.PostbackDomainTarget?.Value).toEqual({
      'Fn::GetAtt': [expect.stringMatching(/postbackapidomain/), 'RegionalDomainName'],
    });
  });

  it('gets the marketplace settings, the API URL and the token secret, never the token', () => {
    const variables = functionResource(stack.redirectSync).Properties.Environment.Variables;
    expect(variables).toMatchObject({
      MARKETPLACE_BASE_URL: 'https://supplier.marketplace.example',
      MARKETPLACE_API_VERSION: 'v2',
      MARKETPLACE_TOKEN_SECRET_ID: {
        Ref: logicalId(stack.marketplaceToken as import('aws-cdk-lib/aws-secretsmanager').Secret),
      },
      POSTBACK_METHOD_SUCCESS: 'GET',
      POSTBACK_METHOD_FAIL: 'POST',
    });
    expect(JSON.stringify(variables.PUBLIC_BASE_URL)).toContain(logicalId(stack.api.api));
    expect(variables).not.toHaveProperty('MARKETPLACE_ACCESS_TOKEN');
  });

  it("may read and write registry items and checkpoints, move an attempt's day-index keys, query only the day index, and read its two secrets", () => {
    const statements = statementsOf(stack.redirectSync);
    expect(actionsOf(statements)).toEqual([
      'dynamodb:BatchGetItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
      'dynamodb:UpdateItem',
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'secretsmanager:GetSecretValue',
      'secretsmanager:GetSecretValue',
    ]);
    // Every item action is held to its partitions (role-permissions.test.ts runs a sync within them).
    for (const statement of statements.filter((s) =>
      actionsOf([s]).some((a) => ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:GetItem'].includes(a)),
    ))
      expect(JSON.stringify(statement)).toContain('dynamodb:LeadingKeys');
    const query = statements.find((s) => actionsOf([s]).includes('dynamodb:Query'));
    expect(JSON.stringify(query?.Resource)).toContain('/index/gsi1');
    expect(JSON.stringify(query?.Resource)).not.toContain('/index/gsi2');
    // Reconciliation reads the discrepancy index too (a reversal and its late postback find each other there).
    const reconcileQuery = statementsOf(stack.reconcile).find((s) =>
      JSON.stringify(s.Resource).includes('/index/'),
    );
    expect(JSON.stringify(reconcileQuery?.Resource)).toContain('/index/gsi2');
    expect(functionResource(stack.redirectSync).Properties).toMatchObject({ Timeout: 300 });
  });
});

describe('reconciliation', () => {
  it('runs hourly by default, enabled, without retries', () => {
    template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'rate(1 hour)',
      State: 'ENABLED',
      Target: Match.objectLike({ Arn: { 'Fn::GetAtt': [logicalId(stack.reconcile.function), 'Arn'] } }),
    });
  });

  it('has 15 minutes, the window setting and the marketplace settings, and no signing keys', () => {
    const fn = template.toJSON().Resources[logicalId(stack.reconcile.function)].Properties;
    expect(fn).toMatchObject({ Timeout: 900, MemorySize: 512, FunctionName: 'Test-reconcile' });
    expect(fn.Environment.Variables).toMatchObject({
      RECONCILE_WINDOW_DAYS: '7',
      MARKETPLACE_API_VERSION: 'v2',
    });
    expect(fn.Environment.Variables).not.toHaveProperty('SIGNING_KEYS_SECRET_ID');
  });

  it("may read and write ledger items, query the day index and a summary's partition, read the token, and invoke only itself", () => {
    const statements = statementsOf(stack.reconcile);
    expect(actionsOf(statements)).toEqual([
      'dynamodb:BatchGetItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
      'lambda:InvokeFunction',
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'secretsmanager:GetSecretValue',
    ]);
    const invoke = statements.find((s) => actionsOf([s]).includes('lambda:InvokeFunction'));
    expect(JSON.stringify(invoke?.Resource)).toContain(':function:Test-reconcile');
    // On the table, a Query of the summaries' partitions alone (a day's outsiders, one item each).
    const onTable = statements.filter(
      (s) => actionsOf([s]).includes('dynamodb:Query') && JSON.stringify(s.Resource).endsWith('"Arn"]}'),
    );
    expect(onTable.map((s) => s.Condition)).toEqual([
      { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['SUMMARY#*'] } },
    ]);
  });
});

describe('survey health', () => {
  it('runs every 5 minutes by default, enabled whether or not the marketplace is configured', () => {
    template.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'rate(5 minutes)',
      State: 'ENABLED',
      Target: Match.objectLike({ Arn: { 'Fn::GetAtt': [logicalId(stack.health.function), 'Arn'] } }),
    });
    const fn = template.toJSON().Resources[logicalId(stack.health.function)].Properties;
    // The settings given, each as its variable; the rest left to the function's defaults.
    expect(fn.Environment.Variables).toMatchObject({
      HEALTH_WINDOW_MINUTES: '20',
      HEALTH_STOPPED_MINUTES: '45',
      ALARM_TOPIC_ARN: { Ref: logicalId(stack.operations.topic) },
    });
    expect(fn.Environment.Variables).not.toHaveProperty('HEALTH_GRACE_MINUTES');
    expect(fn.Environment.Variables).not.toHaveProperty('SIGNING_KEYS_SECRET_ID');
    expect(fn.Environment.Variables).not.toHaveProperty('MARKETPLACE_TOKEN_SECRET_ID');
  });

  it('times out before its next run starts, whatever its schedule: 30 s under a gap of a minute, 4.5 minutes at most', () => {
    expect(functionResource(stack.health).Properties.Timeout).toBe(270);
    const timeoutAt = (minutes: number) => {
      const other = new ReceiverStack(templateApp(), `Health${minutes}`, {
        healthCheckRate: Duration.minutes(minutes),
      });
      const resources = Template.fromStack(other).toJSON().Resources;
      const id = other.getLogicalId(
        other.health.function.node.defaultChild as import('aws-cdk-lib').CfnElement,
      );
      return resources[id].Properties.Timeout as number;
    };
    expect([1, 2, 5, 60].map(timeoutAt)).toEqual([30, 90, 270, 270]);
  });

  it('reads the ledger, writes only HEALTH# items, and publishes only to the alarm topic with its key', () => {
    const statements = statementsOf(stack.health);
    expect(actionsOf(statements)).toEqual([
      'dynamodb:BatchGetItem',
      'dynamodb:GetItem', // the day index's backfill checkpoint
      'dynamodb:PutItem',
      'dynamodb:Query', // the refused-hit partitions of the table
      'dynamodb:Query', // the day index
      'kms:Decrypt',
      'kms:GenerateDataKey',
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'sns:Publish',
    ]);
    const put = statements.find((s) => actionsOf([s]).includes('dynamodb:PutItem'));
    expect(put?.Condition).toEqual({ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['HEALTH#*'] } });
    const publish = statements.find((s) => actionsOf([s]).includes('sns:Publish'));
    expect(publish?.Resource).toEqual({ Ref: logicalId(stack.operations.topic) });
    const kms = statements.find((s) => actionsOf([s]).includes('kms:Decrypt'));
    expect(kms?.Resource).toEqual({ 'Fn::GetAtt': [logicalId(stack.operations.key), 'Arn'] });
  });
});

describe('finance API', () => {
  const routes = () =>
    Object.values(template.findResources('AWS::ApiGatewayV2::Route')).map(
      (r) => (r as { Properties: { RouteKey: string; AuthorizationType?: string } }).Properties,
    );

  it('puts every /finance/ route behind IAM (SigV4), and no hit route', () => {
    for (const route of routes()) {
      if (route.RouteKey.includes(' /finance/'))
        expect(route.AuthorizationType, route.RouteKey).toBe('AWS_IAM');
      else expect(route.AuthorizationType ?? 'NONE', route.RouteKey).toBe('NONE');
    }
    expect(routes().filter((r) => r.RouteKey.includes(' /finance/'))).toHaveLength(3);
  });

  it('the finance function may only read: query the table and both indexes, batch-read items, write its logs', () => {
    const statements = statementsOf(stack.finance);
    expect(actionsOf(statements)).toEqual([
      'dynamodb:BatchGetItem',
      'dynamodb:GetItem', // the day index's backfill checkpoint (CHECKPOINT#, below)
      'dynamodb:Query',
      'dynamodb:Query',
      'logs:CreateLogStream',
      'logs:PutLogEvents',
    ]);
    const checkpoint = statements.find((s) => actionsOf([s]).includes('dynamodb:GetItem'));
    expect(checkpoint?.Condition).toEqual({
      'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['CHECKPOINT#*'] },
    });
    const indexQuery = statements.find((s) => JSON.stringify(s.Resource).includes('/index/'));
    expect(JSON.stringify(indexQuery?.Resource)).toContain('/index/gsi1');
    expect(JSON.stringify(indexQuery?.Resource)).toContain('/index/gsi2');
    const variables = functionResource(stack.finance).Properties.Environment.Variables;
    expect(variables).not.toHaveProperty('FINANCE_API_TOKEN');
    expect(variables.FINANCE_AUTH ?? 'iam').toBe('iam');
  });
});

describe('hit buffer', () => {
  it('is an encrypted, SSL-only queue with a dead-letter queue after twelve receives', () => {
    // Six times the drainer's timeout (AWS's advice for an SQS event source): a drainer throttled before its code
    // runs spends a receive every 3 minutes.
    const [drainer] = Object.values(template.findResources('AWS::Lambda::Function')).filter((f) =>
      JSON.stringify(f).includes('Writes buffered hits'),
    ) as { Properties: { Timeout: number } }[];
    expect(drainer?.Properties.Timeout).toBe(30);
    template.hasResourceProperties('AWS::SQS::Queue', {
      SqsManagedSseEnabled: true,
      VisibilityTimeout: 180,
      RedrivePolicy: {
        deadLetterTargetArn: { 'Fn::GetAtt': [logicalId(stack.buffer.deadLetters), 'Arn'] },
        maxReceiveCount: 12,
      },
    });
    const policies = Object.values(template.findResources('AWS::SQS::QueuePolicy'));
    expect(JSON.stringify(policies)).toContain('aws:SecureTransport');
  });

  it('receivers get its URL and may only send to it; the drainer is fed from it with per-message failures', () => {
    const queueRef = { Ref: logicalId(stack.buffer.queue) };
    for (const fn of [stack.redirect, stack.postback]) {
      expect(functionResource(fn).Properties.Environment.Variables.HIT_BUFFER_QUEUE_URL).toEqual(queueRef);
      const send = statementsOf(fn).find((s) => actionsOf([s]).includes('sqs:SendMessage'));
      expect(send?.Resource).toEqual({ 'Fn::GetAtt': [logicalId(stack.buffer.queue), 'Arn'] });
    }
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: logicalId(stack.drainer.function) },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: 10,
      // At most two drainers at once: a dead ledger is not hammered, and the receivers keep their executions.
      ScalingConfig: { MaximumConcurrency: 2 },
    });
    expect(actionsOf(statementsOf(stack.drainer)).filter((a) => a.startsWith('dynamodb:'))).toEqual([
      'dynamodb:GetItem',
      'dynamodb:UpdateItem',
      'dynamodb:UpdateItem',
    ]);
    // A larger supplier drains a long backlog with more at once.
    const larger = new ReceiverStack(templateApp(), 'LargerDrain', { scale: { drainConcurrency: 20 } });
    Template.fromStack(larger).hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      ScalingConfig: { MaximumConcurrency: 20 },
    });
  });

  it('the drainer may stretch visibility on the buffer only (its backoff), and knows the queue', () => {
    const change = statementsOf(stack.drainer).find((s) =>
      actionsOf([s]).includes('sqs:ChangeMessageVisibility'),
    );
    expect(change?.Resource).toEqual({ 'Fn::GetAtt': [logicalId(stack.buffer.queue), 'Arn'] });
    expect(functionResource(stack.drainer).Properties.Environment.Variables.HIT_BUFFER_QUEUE_URL).toEqual({
      Ref: logicalId(stack.buffer.queue),
    });
  });

  it('reserves concurrency for the receivers, so the drainer and the schedules cannot starve them', () => {
    for (const fn of [stack.redirect, stack.postback])
      expect(functionResource(fn).Properties.ReservedConcurrentExecutions).toBe(50);
    for (const fn of [stack.drainer, stack.reconcile, stack.redirectSync, stack.finance])
      expect(functionResource(fn).Properties).not.toHaveProperty('ReservedConcurrentExecutions');
  });
});

describe('operations', () => {
  it('alarms on 5xx rate, buffer age, dead letters, reconciliation failures, drifted and unrecorded redirects and function errors', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map(
      (a) => (a as { Properties: { AlarmDescription: string; AlarmActions: unknown[] } }).Properties,
    );
    const described = alarms.map((a) => a.AlarmDescription).join('\n');
    for (const topic of [
      '5xx',
      'buffer',
      'dead-letter queue',
      'Reconciliation',
      'Redirect hits were neither recorded',
      'changed at the marketplace',
      'receiver was throttled',
      'API Gateway answered 429',
      'reconciliation has failed for six hours or more',
      'survey listing was refused or not answered in two runs within about two hours',
    ]) {
      expect(described).toContain(topic);
    }
    expect(alarms).toHaveLength(11 + 3 + 8);
    // A survey failing every run alarms whatever share of the surveys it is; a refused listing, twice within about two hours.
    const byDescription = (text: string) =>
      Object.values(template.findResources('AWS::CloudWatch::Alarm')).find((a) =>
        (a as { Properties: { AlarmDescription: string } }).Properties.AlarmDescription.includes(text),
      ) as { Properties: Record<string, unknown> } | undefined;
    const failingLong = byDescription('six hours or more')?.Properties;
    expect(failingLong).toMatchObject({ Threshold: 1, EvaluationPeriods: 1 });
    expect(JSON.stringify(failingLong)).toContain(
      '"Dimensions":[{"Name":"service","Value":"Test"}],"MetricName":"SurveysFailingLong"',
    );
    const listing = byDescription('two runs within about two hours')?.Properties;
    // Two refused runs of the last five 30-minute periods: the hourly list of every live survey refused twice alarms.
    expect(listing).toMatchObject({ Threshold: 1, EvaluationPeriods: 5, DatapointsToAlarm: 2 });
    // One period per sync interval (30 minutes in this stack).
    expect(JSON.stringify(listing)).toMatch(/"MetricName":"RedirectListingRefused".*"Period":1800/);
    // The hit routes' requests, their 5xx and the 429s API Gateway's throttles answer are counted from the access
    // log (HTTP APIs publish no metric per route, nor of throttled requests). One filter per API's access log (the
    // public one and the postbacks' own) and figure, into one metric each.
    const filters = Object.values(template.findResources('AWS::Logs::MetricFilter')) as {
      Properties: {
        FilterPattern: string;
        LogGroupName: unknown;
        MetricTransformations: { MetricName: string; MetricValue: string }[];
      };
    }[];
    const byMetric = (name: string) =>
      filters.filter((f) => f.Properties.MetricTransformations[0]?.MetricName === name);
    // Finance's routes fail and throttle for reasons of their own (a client paging fast), no hit lost.
    const notFinance =
      '($.route != "GET /finance/summary") && ($.route != "GET /finance/discrepancies") && ($.route != "GET /finance/attempts/{surveyId}")';
    for (const [metric, match] of [
      ['ThrottledRequests', '($.status = "429")'],
      ['HitRequests', '($.status = "*")'],
      ['HitServerErrors', '($.status = %^5[0-9][0-9]$%)'],
    ] as const) {
      const made = byMetric(metric);
      expect(made.map((f) => f.Properties.LogGroupName)).toEqual([
        { Ref: logicalId(stack.api.accessLogs) },
        { Ref: logicalId(stack.postbackApi.accessLogs) },
      ]);
      for (const filter of made) {
        expect(filter.Properties.FilterPattern).toBe(`{ ${match} && ${notFinance} }`);
        expect(filter.Properties.MetricTransformations).toEqual([
          expect.objectContaining({ MetricName: metric, MetricValue: '1' }),
        ]);
      }
    }
    // A small supplier's every 5xx alarms (5% each under 20 requests): the hit routes' 5xx over their requests, so
    // that a finance client paging fast neither alarms nor dilutes the receivers' failures.
    const rate = (
      alarms as unknown as {
        AlarmName: string;
        Metrics: { Id: string; Expression?: string; MetricStat?: { Metric: { MetricName: string } } }[];
      }[]
    ).find((a) => a.AlarmName === 'Test-server-error-rate');
    expect(rate?.Metrics.find((m) => m.Expression)?.Expression).toBe(
      'IF(FILL(requests, 0) >= 20, 100 * FILL(errors, 0) / requests, 5 * FILL(errors, 0))',
    );
    expect(
      Object.fromEntries(
        (rate?.Metrics ?? []).flatMap((m) => (m.MetricStat ? [[m.Id, m.MetricStat.Metric.MetricName]] : [])),
      ),
    ).toEqual({ requests: 'HitRequests', errors: 'HitServerErrors' });
    // The dashboard's request graph adds up both APIs' own figures; the throttles of both receivers are summed,
    // each filled with 0 (one receiver idle leaves no sum otherwise).
    const expressions = JSON.stringify(template.findResources('AWS::CloudWatch::Alarm'));
    const dashboardBody = JSON.stringify(template.findResources('AWS::CloudWatch::Dashboard'));
    expect(dashboardBody).toContain('FILL(requests0, 0) + FILL(requests1, 0)');
    expect(dashboardBody).toContain('FILL(servererrors0, 0) + FILL(servererrors1, 0)');
    expect(expressions).toContain('FILL(t0, 0) + FILL(t1, 0)');
    // Reconciliation failures: each one for a small supplier, one in a hundred surveys for a large one.
    expect(expressions).toContain(
      'IF(reconciled + failed >= 100, 100 * failed / (reconciled + failed), failed)',
    );
    for (const a of alarms) expect(a.AlarmActions).toEqual([{ Ref: logicalId(stack.operations.topic) }]);
    // Named as the README's alarm table calls them, after the stack.
    const names = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map(
      (a) => (a as { Properties: { AlarmName: string } }).Properties.AlarmName,
    );
    expect(names).toEqual(
      expect.arrayContaining([
        'Test-server-error-rate',
        'Test-redirect-listing-refused',
        'Test-reconciliation-stopped',
        'Test-redirect-errors',
        'Test-dead-letters-expiring',
      ]),
    );
    expect(new Set(names).size).toBe(names.length);
    template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    // Unique per account: the region in the name lets the same stack name live in two regions.
    const [dashboard] = Object.values(template.findResources('AWS::CloudWatch::Dashboard')) as {
      Properties: { DashboardName: unknown };
    }[];
    expect(JSON.stringify(dashboard?.Properties.DashboardName)).toContain('AWS::Region');
  });

  it('alarms when the marketplace holds reconciliation off three runs in a row, which fails no survey and publishes no failure', () => {
    const [heldOff] = Object.values(template.findResources('AWS::CloudWatch::Alarm'))
      .map((a) => (a as { Properties: Record<string, unknown> }).Properties)
      .filter((p) => p.AlarmName === 'Test-reconciliation-held-off');
    expect(JSON.stringify(heldOff)).toContain('"MetricName":"ReconcileHeldOff"');
    expect(JSON.stringify(heldOff)).toContain('"Period":3600');
    expect(heldOff).toMatchObject({
      EvaluationPeriods: 3,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      TreatMissingData: 'notBreaching',
    });
  });

  it("alarms on hits held in the buffer for 15 minutes, in flight too: not on the oldest message's age, which SQS stops counting for a hit received three times", () => {
    const [held] = Object.values(template.findResources('AWS::CloudWatch::Alarm'))
      .map((a) => (a as { Properties: Record<string, unknown> }).Properties)
      .filter((p) => p.AlarmName === 'Test-buffer-age');
    type Query = {
      Id: string;
      Expression?: string;
      MetricStat?: { Metric: { MetricName: string }; Stat: string };
    };
    const metrics = (held?.Metrics ?? []) as Query[];
    expect(
      metrics
        .flatMap((m) => (m.MetricStat ? [[m.MetricStat.Metric.MetricName, m.MetricStat.Stat]] : []))
        .sort(),
    ).toEqual([
      ['ApproximateNumberOfMessagesNotVisible', 'Average'],
      ['ApproximateNumberOfMessagesVisible', 'Average'],
    ]);
    expect(held).toMatchObject({ EvaluationPeriods: 3, Threshold: 0.5 });
    expect(held).not.toHaveProperty('DatapointsToAlarm');
  });

  it('alarms a second time when a dead letter is ten days old, four before the queue drops it', () => {
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      AlarmName: 'Test-dead-letters-expiring',
      MetricName: 'ApproximateAgeOfOldestMessage',
      Namespace: 'AWS/SQS',
      Threshold: 10 * 86_400,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
    });
  });

  it('alarms when a scheduled job stops finishing runs, where its schedule is enabled', () => {
    const stoppedAlarms = (from: Template) =>
      Object.values(from.findResources('AWS::CloudWatch::Alarm'))
        .map((a) => (a as { Properties: Record<string, unknown> }).Properties)
        .filter((p) => p.TreatMissingData === 'breaching');
    const found = stoppedAlarms(template);
    type Stat = { MetricStat: { Metric: { MetricName: string }; Period: number; Stat: string } };
    const stat = (p: Record<string, unknown>) => (p.Metrics as Stat[])[0]?.MetricStat;
    expect(
      found
        .map((p) => [
          stat(p)?.Metric.MetricName,
          stat(p)?.Stat,
          stat(p)?.Period,
          p.EvaluationPeriods,
          p.ComparisonOperator,
        ])
        .sort(),
    ).toEqual([
      // Hourly: three hours, each without a run (a run finishing late leaves one empty, which does not alarm).
      ['ReconciledSurveys', 'SampleCount', 3600, 3, 'LessThanThreshold'],
      // The sync runs every 30 minutes in this stack: one period of three of its intervals.
      ['RedirectsApplied', 'SampleCount', 90 * 60, 1, 'LessThanThreshold'],
      // The health check, every 5 minutes: an hour at least.
      ['SurveysOk', 'SampleCount', 3600, 1, 'LessThanThreshold'],
    ]);
    // Without the marketplace its two schedules are off, and so are their alarms; the health check's runs.
    expect(
      stoppedAlarms(Template.fromStack(new ReceiverStack(templateApp(), 'Off', {}))).map(
        (p) => stat(p)?.Metric.MetricName,
      ),
    ).toEqual(['SurveysOk']);
  });

  it('warns at synth when no one would receive the alarms (no alarmEmail)', () => {
    const warnings = (props: ConstructorParameters<typeof ReceiverStack>[2]) =>
      Annotations.fromStack(new ReceiverStack(templateApp(), 'Warned', props)).findWarning(
        '*',
        Match.stringLikeRegexp('no alarmEmail'),
      );
    expect(warnings({})).toHaveLength(1);
    expect(warnings({ alarmEmail: 'oncall@panel.example.com' })).toEqual([]);
  });

  it('CloudWatch can publish to the alarm topic: its key is customer-managed and lets CloudWatch use it', () => {
    const keyId = logicalId(stack.operations.key);
    template.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: { 'Fn::GetAtt': [keyId, 'Arn'] } });
    const key = template.toJSON().Resources[keyId] as {
      Properties: {
        EnableKeyRotation: boolean;
        KeyPolicy: { Statement: Statement[] & { Principal?: unknown }[] };
      };
    };
    expect(key.Properties.EnableKeyRotation).toBe(true);
    const forCloudWatch = key.Properties.KeyPolicy.Statement.filter(
      (s) =>
        JSON.stringify((s as { Principal?: unknown }).Principal) ===
        JSON.stringify({ Service: 'cloudwatch.amazonaws.com' }),
    );
    expect(actionsOf(forCloudWatch)).toEqual(['kms:Decrypt', 'kms:GenerateDataKey*']);
    expect(forCloudWatch.every((s) => s.Effect === 'Allow')).toBe(true);
    const ownAccount = { StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } } };
    for (const s of forCloudWatch) expect(s.Condition).toEqual(ownAccount);
    // The topic's own policy (its SSL-only deny replaces SNS's default one) lets this account's alarms publish.
    const [topicPolicy] = Object.values(template.findResources('AWS::SNS::TopicPolicy')) as {
      Properties: { PolicyDocument: { Statement: (Statement & { Principal?: unknown })[] } };
    }[];
    const publish = topicPolicy?.Properties.PolicyDocument.Statement.filter(
      (s) =>
        s.Effect === 'Allow' &&
        JSON.stringify(s.Principal) === JSON.stringify({ Service: 'cloudwatch.amazonaws.com' }),
    );
    expect(actionsOf(publish ?? [])).toEqual(['sns:Publish']);
    expect(publish?.[0]?.Condition).toEqual(ownAccount);
  });

  it('subscribes the configured address to the alarm topic, and none when none is configured', () => {
    template.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: 'oncall@panel.example.com',
      TopicArn: { Ref: logicalId(stack.operations.topic) },
    });
    const bare = Template.fromStack(new ReceiverStack(templateApp(), 'NoEmail'));
    bare.resourceCountIs('AWS::SNS::Subscription', 0);
  });

  it("every function publishes under the stack's name, and two stacks in one account read only their own metrics", () => {
    for (const fn of Object.values(template.findResources('AWS::Lambda::Function')) as {
      Properties: { Environment?: { Variables?: Record<string, unknown> } };
    }[])
      expect(fn.Properties.Environment?.Variables?.POWERTOOLS_SERVICE_NAME).toBe('Test');
    const staging = Template.fromStack(new ReceiverStack(templateApp(), 'Staging'));
    const services = (from: Template) => new Set(customMetricsRead(from).map((m) => m.dimensions.service));
    expect([...services(template)]).toEqual(['Test']);
    expect([...services(staging)]).toEqual(['Staging']);
    const throttledNamespaces = (from: Template) =>
      Object.values(from.findResources('AWS::Logs::MetricFilter')).map(
        (f) =>
          (f as { Properties: { MetricTransformations: { MetricNamespace: string }[] } }).Properties
            .MetricTransformations[0]?.MetricNamespace,
      );
    // Three filters (hit requests, their 5xx, 429s) on each of the two APIs' access logs.
    expect(throttledNamespaces(template)).toEqual(Array(6).fill(`${METRIC_NAMESPACE}/Api/Test`));
    expect(throttledNamespaces(staging)).toEqual(Array(6).fill(`${METRIC_NAMESPACE}/Api/Staging`));
  });

  it('every custom metric the dashboard and alarms read is one the functions publish, dimensions and all', () => {
    const read = customMetricsRead(template);
    expect(read.length).toBeGreaterThan(10);
    for (const metric of read)
      expect(inCatalogue(metric.name, metric.dimensions, 'Test'), JSON.stringify(metric)).toBe(true);
  });

  it('the dashboard shows every catalogued metric under every dimension value it is published with', () => {
    // The dashboard's own widgets: a metric only an alarm reads is not on the operator's screen.
    const read = new Set(
      customMetricsRead(template, { alarms: false }).map(
        (m) => `${m.name} ${JSON.stringify(sorted(m.dimensions))}`,
      ),
    );
    for (const name of Object.keys(METRIC_CATALOGUE) as MetricName[])
      for (const dimensions of dimensionSets(name, 'Test'))
        expect(read, `${name} ${JSON.stringify(dimensions)}`).toContain(
          `${name} ${JSON.stringify(sorted(dimensions))}`,
        );
  });

  it('the catalogue check is live: a widget with a dimension nothing publishes is found', () => {
    expect(inCatalogue('RejectedPostback', { service: 'survey-receiver' })).toBe(false);
    expect(inCatalogue('BufferedHits', { service: 'survey-receiver', channel: 'carrier-pigeon' })).toBe(
      false,
    );
    expect(inCatalogue('BufferedHits', { service: 'survey-receiver', channel: 'postback' })).toBe(true);
    expect(inCatalogue('BufferedHits', { service: 'Staging', channel: 'postback' }, 'Test')).toBe(false);
  });
});

const sorted = (record: Record<string, string>) =>
  Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));

/**
 * Every metric in the namespace the functions publish to that the template reads: the dashboard's widgets (its
 * body is a JSON string CloudFormation joins) and the alarms (plain or metric-math).
 */
function customMetricsRead(
  from: Template,
  { alarms = true }: { alarms?: boolean } = {},
): { name: string; dimensions: Record<string, string> }[] {
  const found: { name: string; dimensions: Record<string, string> }[] = [];
  const [dashboard] = Object.values(from.findResources('AWS::CloudWatch::Dashboard')) as {
    Properties: { DashboardBody: unknown };
  }[];
  const body = flattenJoin(dashboard?.Properties.DashboardBody);
  const widgets = (JSON.parse(body) as { widgets: { properties: { metrics?: unknown[][] } }[] }).widgets;
  for (const widget of widgets)
    for (const line of widget.properties.metrics ?? []) {
      const [namespace, name, ...rest] = line;
      if (namespace !== METRIC_NAMESPACE) continue;
      const dimensions: Record<string, string> = {};
      for (let i = 0; i + 1 < rest.length && typeof rest[i] === 'string'; i += 2)
        dimensions[rest[i] as string] = rest[i + 1] as string;
      found.push({ name: String(name), dimensions });
    }
  type Dimension = { Name: string; Value: string };
  type MetricStat = { Namespace?: string; MetricName: string; Dimensions?: Dimension[] };
  const add = (metric: MetricStat) => {
    if (metric.Namespace !== METRIC_NAMESPACE) return;
    found.push({
      name: metric.MetricName,
      dimensions: Object.fromEntries((metric.Dimensions ?? []).map((d) => [d.Name, d.Value])),
    });
  };
  if (!alarms) return found;
  for (const alarm of Object.values(from.findResources('AWS::CloudWatch::Alarm')) as {
    Properties: MetricStat & { Metrics?: { MetricStat?: { Metric: MetricStat } }[] };
  }[]) {
    add(alarm.Properties);
    for (const query of alarm.Properties.Metrics ?? []) if (query.MetricStat) add(query.MetricStat.Metric);
  }
  return found;
}

/** The dashboard body with its Fn::Join references replaced by placeholders, as one JSON string. */
function flattenJoin(value: unknown): string {
  if (typeof value === 'string') return value;
  const join = (value as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (!join) return '"?"';
  return join[1].map((part) => (typeof part === 'string' ? part : 'ref')).join(join[0]);
}

describe('signing keys', () => {
  it('live in Secrets Manager, generated, and survive a stack delete (not a failed first creation)', () => {
    template.hasResource('AWS::SecretsManager::Secret', {
      DeletionPolicy: 'RetainExceptOnCreate',
      UpdateReplacePolicy: 'Retain',
      Properties: {
        GenerateSecretString: Match.objectLike({
          SecretStringTemplate: '{"current":"k1"}',
          GenerateStringKey: 'k1',
        }),
      },
    });
  });
});

describe('the marketplace token secret', () => {
  it('keeps the generated value it was first created with: a value in the template would overwrite the real token on every upgrade', () => {
    const secrets = Object.values(template.findResources('AWS::SecretsManager::Secret')).map(
      (r) => (r as { Properties: Record<string, unknown> }).Properties,
    );
    const token = secrets.find((p) => String(p.Description).includes('access token'));
    expect(token).toMatchObject({ GenerateSecretString: {} });
    expect(token).not.toHaveProperty('SecretString');
  });
});

describe('HTTP API', () => {
  /** Each API's route keys, by its logical id. */
  const routesByApi = () => {
    const byApi = new Map<string, { id: string; key: string }[]>();
    for (const [id, route] of Object.entries(template.findResources('AWS::ApiGatewayV2::Route'))) {
      const { ApiId, RouteKey } = (route as { Properties: { ApiId: { Ref: string }; RouteKey: string } })
        .Properties;
      byApi.set(ApiId.Ref, [...(byApi.get(ApiId.Ref) ?? []), { id, key: RouteKey }]);
    }
    return byApi;
  };
  const postbackRoutes = ROUTES.filter((route) => route.function === 'postback');

  it('has exactly the routes of the route table, and the postback routes again on an API of their own', () => {
    const byApi = routesByApi();
    expect([...byApi.keys()].sort()).toEqual(
      [logicalId(stack.api.api), logicalId(stack.postbackApi.api)].sort(),
    );
    expect(
      byApi
        .get(logicalId(stack.api.api))
        ?.map((r) => r.key)
        .sort(),
    ).toEqual(ROUTES.map(routeKey).sort());
    expect(
      byApi
        .get(logicalId(stack.postbackApi.api))
        ?.map((r) => r.key)
        .sort(),
    ).toEqual(postbackRoutes.map(routeKey).sort());
  });

  it("the survey URLs' postbacks point at the postback API, its URL an output for the CLI", () => {
    const sync = template.findResources('AWS::Lambda::Function', {
      Properties: { Description: SCHEDULED_FUNCTIONS['redirect-sync'].description },
    });
    const variables = (
      Object.values(sync)[0] as { Properties: { Environment: { Variables: Record<string, unknown> } } }
    ).Properties.Environment.Variables;
    expect(JSON.stringify(variables.POSTBACK_BASE_URL)).toContain(logicalId(stack.postbackApi.api));
    expect(JSON.stringify(variables.PUBLIC_BASE_URL)).toContain(logicalId(stack.api.api));
    expect(JSON.stringify(template.findOutputs('PostbackApiUrl'))).toContain(
      logicalId(stack.postbackApi.api),
    );
  });

  it('creates each stage after every route its settings name (API Gateway refuses settings of a route not there yet)', () => {
    const stages = template.findResources('AWS::ApiGatewayV2::Stage') as Record<
      string,
      { DependsOn?: string[]; Properties: { ApiId: { Ref: string } } }
    >;
    expect(Object.keys(stages)).toHaveLength(2);
    for (const [api, routes] of routesByApi()) {
      const stage = Object.values(stages).find((s) => s.Properties.ApiId.Ref === api);
      for (const { id } of routes) expect(stage?.DependsOn ?? [], id).toContain(id);
    }
  });

  it("throttles the postback API's routes like the public API's, on a stage of their own", () => {
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      ApiId: { Ref: logicalId(stack.postbackApi.api) },
      RouteSettings: Object.fromEntries(
        postbackRoutes.map((r) => [
          routeKey(r),
          { ThrottlingRateLimit: r.throttle.rate, ThrottlingBurstLimit: r.throttle.burst },
        ]),
      ),
    });
  });

  it('throttles the stage and every route', () => {
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      DefaultRouteSettings: { ThrottlingBurstLimit: Match.anyValue(), ThrottlingRateLimit: Match.anyValue() },
      RouteSettings: Object.fromEntries(
        ROUTES.map((r) => [
          routeKey(r),
          { ThrottlingRateLimit: r.throttle.rate, ThrottlingBurstLimit: r.throttle.burst },
        ]),
      ),
    });
  });

  it("takes the hit and finance routes' limits from settings, the stage's default the largest route's", () => {
    const bigger = Template.fromStack(
      new ReceiverStack(templateApp(), 'Bigger', {
        throttles: { hits: { rate: 5000, burst: 10_000 }, finance: { rate: 20, burst: 40 } },
      }),
    );
    bigger.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      DefaultRouteSettings: { ThrottlingRateLimit: 5000, ThrottlingBurstLimit: 10_000 },
      RouteSettings: Object.fromEntries(
        ROUTES.map((r) => [
          routeKey(r),
          r.function === 'finance'
            ? { ThrottlingRateLimit: 20, ThrottlingBurstLimit: 40 }
            : { ThrottlingRateLimit: 5000, ThrottlingBurstLimit: 10_000 },
        ]),
      ),
    });
  });

  it('writes access logs that never include the query string, on both APIs', () => {
    const stages = Object.values(template.findResources('AWS::ApiGatewayV2::Stage')) as {
      Properties: { AccessLogSettings: { Format: string } };
    }[];
    expect(stages).toHaveLength(2);
    for (const stage of stages) {
      const format = stage.Properties.AccessLogSettings.Format;
      expect(format).toContain('$context.requestId');
      expect(format).not.toMatch(/querystring|\$context\.path.*\?|\$request/i);
    }
  });

  it("keeps both APIs' access logs under /aws/vendedlogs/, named by the stack (the region's logs resource policy stays within its size)", () => {
    const groups = Object.values(template.findResources('AWS::Logs::LogGroup'))
      .map((g) => (g as { Properties: { LogGroupName?: unknown } }).Properties.LogGroupName)
      .filter((name): name is string => typeof name === 'string' && name.includes('apigateway'));
    expect(groups.sort()).toEqual([
      '/aws/vendedlogs/apigateway/Test/hit-api',
      '/aws/vendedlogs/apigateway/Test/postback-api',
    ]);
    // Replaced on a stack deployed before (its group unnamed): the old group kept, not deleted with its lines.
    const policies = Object.values(template.findResources('AWS::Logs::LogGroup'))
      .filter((g) => JSON.stringify(g).includes('vendedlogs'))
      .map((g) => [
        (g as { DeletionPolicy?: string }).DeletionPolicy,
        (g as { UpdateReplacePolicy?: string }).UpdateReplacePolicy,
      ]);
    expect(policies).toEqual([
      ['Delete', 'Retain'],
      ['Delete', 'Retain'],
    ]);
  });
});

describe('cdk-nag AwsSolutions', () => {
  it('reports no unacknowledged finding', () => {
    const report = new AwsSolutionsChecks().validateScope(stack);
    expect(report.violations.map((v) => v.ruleName)).toEqual([]);
  });

  it('would catch a finding (the check is live)', () => {
    const probe = new Stack(new App(), 'Probe');
    new HttpApi(probe, 'open-api').addRoutes({
      path: '/open',
      methods: [HttpMethod.GET],
      integration: new HttpUrlIntegration('url', 'https://example.com'),
    });
    const report = new AwsSolutionsChecks().validateScope(probe);
    expect(report.violations.map((v) => v.ruleName)).toContain('AwsSolutions-APIG4');
  });
});
