/**
 * The ledger table: on-demand, point-in-time recovery, deletion protection, kept when the stack is deleted.
 * Its keys and index come from the same schema module the store and the local engine use.
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import { AttributeType, Billing, ProjectionType, StreamViewType, TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { LEDGER } from '../../functions/ledger/ledger-schema';

export class LedgerTable extends Construct {
  readonly table: TableV2;

  /** `stream`: the table keeps a stream of its changes (new and old images) for the attempt feed's consumer. */
  constructor(scope: Construct, id: string, options: { stream?: boolean } = {}) {
    super(scope, id);
    const key = (name: string) => ({ name, type: AttributeType.STRING });
    this.table = new TableV2(this, 'table', {
      partitionKey: key(LEDGER.partitionKey),
      sortKey: key(LEDGER.sortKey),
      billing: Billing.onDemand(),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: true,
      // Kept even when the stack's first creation rolls back (deletion protection would fail that delete): a failed
      // first deploy leaves an empty table behind (README, "First deployment"; constructs/retention.ts).
      removalPolicy: RemovalPolicy.RETAIN,
      timeToLiveAttribute: LEDGER.timeToLive,
      ...(options.stream ? { dynamoStream: StreamViewType.NEW_AND_OLD_IMAGES } : {}),
      globalSecondaryIndexes: [
        {
          indexName: LEDGER.index.name,
          partitionKey: key(LEDGER.index.partitionKey),
          sortKey: key(LEDGER.index.sortKey),
          // Keys only: the index is written once per attempt, never by later hits (see ledger-schema.ts).
          projectionType: ProjectionType.KEYS_ONLY,
        },
        {
          indexName: LEDGER.discrepancyIndex.name,
          partitionKey: key(LEDGER.discrepancyIndex.partitionKey),
          sortKey: key(LEDGER.discrepancyIndex.sortKey),
          // Sparse: only attempts whose verdict is a discrepancy carry these keys; hits never change them.
          projectionType: ProjectionType.KEYS_ONLY,
        },
      ],
    });
  }
}
