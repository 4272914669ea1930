import { RemovalPolicy } from 'aws-cdk-lib';

/**
 * How the stack keeps its secrets (the signing key ring, the marketplace token): through a stack's deletion and a
 * replacement (CloudFormation's `Retain`), but not when the stack operation that created them rolls back
 * (`RetainExceptOnCreate`): a failed first deploy (a Lambda quota too low, a memory size a new account refuses) then
 * leaves no secret behind to delete by hand, each try one more. They are created once, by the first deploy; nothing
 * was signed with a ring whose creation rolled back.
 *
 * Not the queues: CloudFormation deletes a `RetainExceptOnCreate` resource when whichever operation created it rolls
 * back, updates included, and a hit buffer created by an update (a replacement) may already hold hits the receivers
 * acknowledged. They keep plain `Retain`, as the table does (whose deletion protection would also fail a rollback's
 * delete): a failed first deploy leaves them behind, empty (README, "First deployment").
 */
export const RETAIN_UNLESS_CREATE_FAILS = RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE;
