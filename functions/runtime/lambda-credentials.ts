/**
 * The credential chain the Lambda bundles use instead of the SDK's default one: in Lambda the function's role
 * credentials are always in the environment, so the environment provider is the whole chain. Aliased in place of
 * `@aws-sdk/credential-provider-node` by the functions' bundling only (infra/constructs/receiver-function.ts): the
 * default chain's SSO, INI, IMDS, container and login providers and their nested STS/SSO clients never load. The
 * local stack and the CLI run unbundled and keep the full chain.
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';

export const defaultProvider = (init: Parameters<typeof fromEnv>[0] = {}) => fromEnv(init);
