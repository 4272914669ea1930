/**
 * The HTTP routes and the functions behind them: one table read by the CDK stack and by the local API
 * Gateway, so what runs locally is what is deployed.
 */
import type { DynamoDBRecord } from 'aws-lambda';
import { ATTEMPT_PARTITION_PREFIX } from '../functions/ledger/ledger-schema';
import { HIT_PATHS } from '../functions/receiving/survey-urls';

/** The functions behind HTTP routes. */
export const FUNCTIONS = {
  redirect: { entry: 'functions/redirect.ts', description: 'Records redirect hits and sends respondents on' },
  postback: { entry: 'functions/postback.ts', description: 'Records the marketplace postbacks' },
  finance: {
    entry: 'functions/finance.ts',
    description: "Answers finance's questions from the reconciliation",
  },
} as const;

export type FunctionName = keyof typeof FUNCTIONS;

/** The functions run on a schedule. */
export const SCHEDULED_FUNCTIONS = {
  'redirect-sync': {
    entry: 'functions/redirect-sync.ts',
    description: "Points new live surveys' redirects and postbacks at the receiver",
  },
  reconcile: {
    entry: 'functions/reconcile.ts',
    description: "Reconciles the ledger against the marketplace's transaction list",
  },
  health: {
    entry: 'functions/health.ts',
    description: 'Judges every active survey from its recent traffic and notifies when one fails or recovers',
  },
} as const;

export type ScheduledFunctionName = keyof typeof SCHEDULED_FUNCTIONS;

export interface Route {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly function: FunctionName;
  /** Steady requests per second and burst allowed on the route in AWS. */
  readonly throttle: { readonly rate: number; readonly burst: number };
  /** `iam`: callers must sign with SigV4 (finance); absent: the handler authenticates (signed URLs). */
  readonly auth?: 'iam';
}

export const ROUTES: readonly Route[] = [
  { method: 'GET', path: HIT_PATHS.redirect, function: 'redirect', throttle: { rate: 500, burst: 1000 } },
  { method: 'GET', path: HIT_PATHS.postback, function: 'postback', throttle: { rate: 500, burst: 1000 } },
  { method: 'POST', path: HIT_PATHS.postback, function: 'postback', throttle: { rate: 500, burst: 1000 } },
  {
    method: 'GET',
    path: '/finance/summary',
    function: 'finance',
    throttle: { rate: 10, burst: 20 },
    auth: 'iam',
  },
  {
    method: 'GET',
    path: '/finance/discrepancies',
    function: 'finance',
    throttle: { rate: 10, burst: 20 },
    auth: 'iam',
  },
  {
    method: 'GET',
    path: '/finance/attempts/{surveyId}',
    function: 'finance',
    throttle: { rate: 10, burst: 20 },
    auth: 'iam',
  },
];

export const routeKey = (route: Route): string => `${route.method} ${route.path}`;

/** The functions fed by a queue. */
export const QUEUE_FUNCTIONS = {
  'drain-buffer': { entry: 'functions/drain-buffer.ts', description: 'Writes buffered hits to the ledger' },
} as const;

/** The functions fed by the ledger table's stream (with the `attemptFeed` setting). */
export const STREAM_FUNCTIONS = {
  'attempt-feed': {
    entry: 'functions/attempt-feed.ts',
    description: "Keeps the attempt feed from the ledger table's stream",
  },
} as const;

/**
 * The stream records the feed's consumer is given: changes of attempts (the event source mapping's filter in AWS;
 * the local stand-in applies it with `acceptedByFeed`). Other items' changes never invoke it. On the `dynamodb` key
 * alone, the only one a DynamoDB mapping filters on (Lambda's documentation): the consumer leaves removals out itself.
 */
export const FEED_STREAM_FILTER = {
  dynamodb: { Keys: { pk: { S: [{ prefix: ATTEMPT_PARTITION_PREFIX }] } } },
};
/** The filter above applied to one record, as the event source mapping applies it (the local stand-in's). */
export const acceptedByFeed = (record: DynamoDBRecord): boolean =>
  FEED_STREAM_FILTER.dynamodb.Keys.pk.S.some(
    (rule) => record.dynamodb?.Keys?.pk?.S?.startsWith(rule.prefix) === true,
  );
