/**
 * The receiver, deployed: the ledger table, the signing key ring, the functions and the HTTP API in front.
 */
import { CfnOutput, RemovalPolicy, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { templateProblem } from '../functions/core/landing-page';
import type { LANDING_VARIABLES } from '../functions/lambda/config';
import { HitApi } from './constructs/hit-api';
import { LedgerTable } from './constructs/ledger-table';
import { ReceiverFunction } from './constructs/receiver-function';
import { FUNCTIONS } from './routes';

export interface ReceiverStackProps extends StackProps {
  /** Landing URL templates by environment variable name (LANDING_URL_SUCCESS ...), for the redirect function. */
  readonly landingUrls?: Partial<Record<(typeof LANDING_VARIABLES)[keyof typeof LANDING_VARIABLES], string>>;
}

export class ReceiverStack extends Stack {
  readonly ledger: LedgerTable;
  readonly signingKeys: Secret;
  readonly redirect: ReceiverFunction;
  readonly postback: ReceiverFunction;
  readonly api: HitApi;

  constructor(scope: Construct, id: string, props: ReceiverStackProps = {}) {
    super(scope, id, props);
    const landingUrls = props.landingUrls ?? {};
    for (const [name, template] of Object.entries(landingUrls)) {
      const problem = template ? templateProblem(template) : undefined;
      if (problem) throw new Error(`${name} ${problem}`);
    }

    this.ledger = new LedgerTable(this, 'ledger');
    this.signingKeys = new Secret(this, 'signing-keys', {
      description: 'Key ring that signs the redirect and postback URLs handed to the marketplace',
      generateSecretString: {
        secretStringTemplate: JSON.stringify({ current: 'k1' }),
        generateStringKey: 'k1',
        passwordLength: 64,
        excludePunctuation: true,
      },
      // Losing the ring would invalidate every URL configured at the marketplace.
      removalPolicy: RemovalPolicy.RETAIN,
    });

    this.redirect = new ReceiverFunction(this, 'redirect', {
      ...FUNCTIONS.redirect,
      environment: Object.fromEntries(Object.entries(landingUrls).filter(([, value]) => value)) as Record<
        string,
        string
      >,
    })
      .bindLedger(this.ledger.table, ['dynamodb:UpdateItem', 'dynamodb:PutItem'])
      .bindSigningKeys(this.signingKeys);
    this.postback = new ReceiverFunction(this, 'postback', FUNCTIONS.postback)
      .bindLedger(this.ledger.table, ['dynamodb:UpdateItem'])
      .bindSigningKeys(this.signingKeys);

    this.api = new HitApi(this, 'hit-api', {
      functions: { redirect: this.redirect.function, postback: this.postback.function },
    });

    new CfnOutput(this, 'ApiUrl', { value: this.api.url, description: 'PUBLIC_BASE_URL for the CLI' });
    new CfnOutput(this, 'TableName', { value: this.ledger.table.tableName });
    new CfnOutput(this, 'SigningKeysSecretArn', { value: this.signingKeys.secretArn });

    this.suppressAcceptedFindings();
  }

  /** cdk-nag findings that are decisions, each acknowledged with its reason. */
  private suppressAcceptedFindings() {
    Validations.of(this.api.api).acknowledge({
      id: 'AwsSolutions-APIG4',
      reason:
        "The marketplace and respondents' browsers cannot sign requests. Every route authenticates in the handler with the HMAC signature carried in the URL.",
    });
    Validations.of(this.signingKeys).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The ring is rotated by key id (a new key is added and surveys are re-pointed before the old one retires); an automatic rotation would invalidate URLs already configured at the marketplace.',
    });
    for (const fn of [this.redirect, this.postback]) {
      Validations.of(fn).acknowledge({
        id: 'AwsSolutions-L1',
        reason: 'nodejs22.x is the runtime this product is built and tested for.',
      });
    }
  }
}
