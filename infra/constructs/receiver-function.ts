/**
 * The house Lambda function: every default fixed once (runtime, architecture, ESM bundle, logging) and
 * permissions granted together with the configuration that needs them, never more than the function uses.
 */
import { ArnFormat, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import type { ITableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { Effect, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import type { IKey } from 'aws-cdk-lib/aws-kms';
import {
  ApplicationLogLevel,
  Architecture,
  LoggingFormat,
  Runtime,
  SystemLogLevel,
} from 'aws-cdk-lib/aws-lambda';
import { type BundlingOptions, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import {
  ATTEMPT_PARTITION_PREFIX,
  HIT_PATH_PARTITION_PREFIXES,
  HIT_PATH_SUMMARY_ATTRIBUTES,
  LEDGER,
  SUMMARY_PARTITION_PREFIX,
} from '../../functions/ledger/ledger-schema';
import { METRIC_NAMESPACE } from '../../functions/runtime/metric-catalogue';
import { REPO_ROOT } from '../paths';

/** How every function is bundled: one minified ESM file per function, the SDK inside it. */
export const BUNDLING = {
  format: OutputFormat.ESM,
  target: 'node22',
  minify: true,
  // No source map: nothing would load it (that takes NODE_OPTIONS=--enable-source-maps, which slows every cold
  // start and every stack trace), and the functions log an error's name and message, not its stack.
  sourceMap: false,
  mainFields: ['module', 'main'],
  // The SDK is bundled, not taken from the runtime: the version we test is the version that runs, and
  // tree-shaking keeps the bundle smaller than the runtime's full copy would load.
  externalModules: [],
  banner: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);",
  // In Lambda the role's credentials are in the environment: the SDK's default chain (SSO, INI, IMDS, container,
  // login providers and their nested STS and SSO clients, about 135 kB) is replaced by the environment provider.
  esbuildArgs: {
    '--alias:@aws-sdk/credential-provider-node': './functions/runtime/lambda-credentials.ts',
  },
  forceDockerBundling: false,
} as const satisfies BundlingOptions;

export interface ReceiverFunctionProps {
  /** Entry file, relative to the repository root. */
  readonly entry: string;
  readonly description: string;
  readonly memorySize?: number;
  readonly timeout?: Duration;
  readonly environment?: Record<string, string>;
  readonly logRetention?: RetentionDays;
  /** A fixed physical name, for a function that must know its own ARN without a reference cycle. */
  readonly functionName?: string;
}

/** The DynamoDB actions a function may take on the ledger. */
export type LedgerAction =
  | 'dynamodb:UpdateItem'
  | 'dynamodb:PutItem'
  | 'dynamodb:Query'
  | 'dynamodb:GetItem'
  | 'dynamodb:BatchGetItem';

export class ReceiverFunction extends Construct {
  readonly function: NodejsFunction;
  readonly role: Role;
  readonly logGroup: LogGroup;
  private readonly fixedName: string | undefined;

  constructor(scope: Construct, id: string, props: ReceiverFunctionProps) {
    super(scope, id);
    this.fixedName = props.functionName;
    this.logGroup = new LogGroup(this, 'logs', {
      retention: props.logRetention ?? RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // An own role instead of AWSLambdaBasicExecutionRole: it may write to this function's log group only.
    this.role = new Role(this, 'role', { assumedBy: new ServicePrincipal('lambda.amazonaws.com') });
    this.logGroup.grantWrite(this.role);

    this.function = new NodejsFunction(this, 'function', {
      entry: `${REPO_ROOT}/${props.entry}`,
      handler: 'handler',
      projectRoot: REPO_ROOT,
      depsLockFilePath: `${REPO_ROOT}/package-lock.json`,
      description: props.description,
      ...(props.functionName ? { functionName: props.functionName } : {}),
      runtime: Runtime.NODEJS_22_X,
      architecture: Architecture.ARM_64,
      memorySize: props.memorySize ?? 256,
      timeout: props.timeout ?? Duration.seconds(10),
      role: this.role,
      logGroup: this.logGroup,
      loggingFormat: LoggingFormat.JSON,
      applicationLogLevelV2: ApplicationLogLevel.INFO,
      // START/END/REPORT lines on every invocation would cost more than the hit; errors still show.
      systemLogLevelV2: SystemLogLevel.WARN,
      environment: {
        // The stack's name, which its alarms read (metric-catalogue.ts): stacks in one account keep apart.
        POWERTOOLS_SERVICE_NAME: Stack.of(this).stackName,
        POWERTOOLS_METRICS_NAMESPACE: METRIC_NAMESPACE,
        POWERTOOLS_LOG_LEVEL: 'INFO',
        ...props.environment,
      },
      bundling: BUNDLING,
    });
  }

  /**
   * Gives the function the ledger's name and exactly the actions listed, on the table itself; `indexQuery` and
   * `discrepancyIndexQuery` add Query on those indexes (and only those).
   */
  bindLedger(
    table: ITableV2,
    actions: readonly LedgerAction[],
    options: { indexQuery?: boolean; discrepancyIndexQuery?: boolean } = {},
  ): this {
    this.function.addEnvironment('TABLE_NAME', table.tableName);
    if (actions.length > 0)
      this.role.addToPrincipalPolicy(
        new PolicyStatement({ effect: Effect.ALLOW, actions: [...actions], resources: [table.tableArn] }),
      );
    const indexes = [
      ...(options.indexQuery ? [LEDGER.index.name] : []),
      ...(options.discrepancyIndexQuery ? [LEDGER.discrepancyIndex.name] : []),
    ];
    if (indexes.length > 0) {
      this.role.addToPrincipalPolicy(
        new PolicyStatement({
          effect: Effect.ALLOW,
          actions: ['dynamodb:Query'],
          resources: indexes.map((name) => `${table.tableArn}/index/${name}`),
        }),
      );
    }
    return this;
  }

  /**
   * Lets the function take `actions` on the ledger items whose partition key starts with `partitionPrefix`
   * (`HEALTH#`, `ATTEMPT#`), and no other: IAM checks the key of every request against `dynamodb:LeadingKeys`, so a
   * bug or a stolen role cannot touch other items. Call bindLedger first for the table's name.
   */
  allowLedgerItems(
    table: ITableV2,
    actions: readonly (
      | 'dynamodb:PutItem'
      | 'dynamodb:UpdateItem'
      | 'dynamodb:GetItem'
      | 'dynamodb:BatchGetItem'
      | 'dynamodb:Query'
    )[],
    partitionPrefix: string | readonly string[],
    options: {
      /**
       * The attributes a request may name (`*` ends a prefix), and no other: the item's other attributes are out of
       * reach, and no answer returns them (`ReturnValues` NONE or the updated ones only).
       */
      readonly attributes?: readonly string[];
    } = {},
  ): this {
    const prefixes = typeof partitionPrefix === 'string' ? [partitionPrefix] : partitionPrefix;
    this.role.addToPrincipalPolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        actions: [...actions],
        resources: [table.tableArn],
        conditions: {
          'ForAllValues:StringLike': {
            'dynamodb:LeadingKeys': prefixes.map((prefix) => `${prefix}*`),
            ...(options.attributes ? { 'dynamodb:Attributes': [...options.attributes] } : {}),
          },
          ...(options.attributes
            ? { StringEqualsIfExists: { 'dynamodb:ReturnValues': ['NONE', 'UPDATED_OLD', 'UPDATED_NEW'] } }
            : {}),
        },
      }),
    );
    return this;
  }

  /**
   * The hit path's ledger access (receivers and drainer): the table's name; UpdateItem on attempts and (unless
   * `refusals` is false: the drainer) counts of refused hits, and on a survey's summaries for a late hit's flag alone (`HIT_PATH_SUMMARY_ATTRIBUTES`); GetItem on
   * attempts, to read back a retried write.
   */
  bindHitPath(table: ITableV2, options: { refusals?: boolean } = {}): this {
    return this.bindLedger(table, [])
      .allowLedgerItems(
        table,
        ['dynamodb:UpdateItem'],
        // The counts of refused hits are the receivers' to write; the drainer writes buffered hits only.
        options.refusals === false ? ATTEMPT_PARTITION_PREFIX : HIT_PATH_PARTITION_PREFIXES,
      )
      .allowLedgerItems(table, ['dynamodb:UpdateItem'], SUMMARY_PARTITION_PREFIX, {
        attributes: HIT_PATH_SUMMARY_ATTRIBUTES,
      })
      .allowLedgerItems(table, ['dynamodb:GetItem'], ATTEMPT_PARTITION_PREFIX);
  }

  /**
   * Gives the function the alarm topic's ARN (ALARM_TOPIC_ARN) and lets it publish there and nowhere else. The
   * topic is encrypted with its own key, so publishing also takes the two key actions SNS makes on the
   * publisher's behalf (GenerateDataKey, Decrypt; named exactly, not `GenerateDataKey*`), on that key only.
   */
  bindAlarmTopic(topic: ITopic, key: IKey): this {
    this.function.addEnvironment('ALARM_TOPIC_ARN', topic.topicArn);
    this.role.addToPrincipalPolicy(
      new PolicyStatement({ effect: Effect.ALLOW, actions: ['sns:Publish'], resources: [topic.topicArn] }),
    );
    this.role.addToPrincipalPolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        actions: ['kms:Decrypt', 'kms:GenerateDataKey'],
        resources: [key.keyArn],
      }),
    );
    return this;
  }

  /** Lets the function invoke itself (to continue a long run), by a name-built ARN so no reference cycle forms. */
  allowSelfInvoke(): this {
    const name = this.fixedName;
    if (!name)
      throw new Error(`${this.node.path}: a function that invokes itself needs a fixed functionName`);
    this.role.addToPrincipalPolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        actions: ['lambda:InvokeFunction'],
        resources: [
          Stack.of(this).formatArn({
            service: 'lambda',
            resource: 'function',
            resourceName: name,
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          }),
        ],
      }),
    );
    return this;
  }

  /** Gives the function the signing key ring's location and read access to that secret only. */
  bindSigningKeys(secret: ISecret): this {
    return this.bindSecret('SIGNING_KEYS_SECRET_ID', secret);
  }

  /**
   * Puts a secret's id in an environment variable and lets the function read that secret, nothing else. A secret
   * named in the settings (imported by name) has no full ARN here: the function is given its name, and the policy
   * its ARN with the six characters Secrets Manager appends (`-??????`), which a name-built ARN never matches.
   */
  bindSecret(variable: string, secret: ISecret): this {
    const fullArn = secret.secretFullArn;
    this.function.addEnvironment(variable, fullArn ?? secret.secretName);
    this.role.addToPrincipalPolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        actions: ['secretsmanager:GetSecretValue'],
        resources: [fullArn ?? `${secret.secretArn}-??????`],
      }),
    );
    return this;
  }
}
