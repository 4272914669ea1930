import { RemovalPolicy } from 'aws-cdk-lib';

/**
 * How the secrets and queues that hold the product's data are kept: through a stack's deletion and a resource's
 * replacement (CloudFormation's `Retain`), but not when the stack's own creation fails and rolls back
 * (`RetainExceptOnCreate`). Then they hold nothing yet (no URL was signed, no hit was buffered), and keeping them
 * would leave one more set behind for every failed first deploy (a Lambda quota too low, a memory size the new
 * account refuses) to delete by hand. The table keeps plain `Retain`: its deletion protection would make a
 * rollback's delete fail (ledger-table.ts).
 */
export const RETAIN_UNLESS_CREATE_FAILS = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE;
