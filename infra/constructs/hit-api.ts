/**
 * An HTTP API: one route per entry of the route table (or of the routes given: the stack's postback API serves the
 * postback routes alone), each throttled; the hit routes open to the marketplace and respondents' browsers (the
 * handler checks the URL's signature), the finance routes behind IAM (SigV4). Access logs never record the query
 * string (it carries the URL's signature).
 */
import { CfnDeletionPolicy, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import {
  ApiMapping,
  type CfnStage,
  DomainName,
  HttpApi,
  HttpMethod,
  HttpStage,
  LogGroupLogDestination,
} from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { Certificate } from 'aws-cdk-lib/aws-certificatemanager';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { type CfnLogGroup, LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { type FunctionName, ROUTES, type Route, routeKey } from '../routes';

export interface HitApiProps {
  /** The functions behind the routes served (those of `routes`). */
  readonly functions: Partial<Record<FunctionName, IFunction>>;
  /** The routes served (default: every route of the route table). */
  readonly routes?: readonly Route[];
  readonly description?: string;
  /** Per-route limits of the hit routes and the finance routes, instead of the route table's defaults. */
  readonly throttles?: RouteThrottles;
  /**
   * The supplier's own host name for the API (an ACM certificate of the stack's region covers it): what every
   * survey's URLs are built on, so that they outlive the API itself (a replaced or redeployed API gets a new
   * execute-api host, and every survey would point at a dead one until re-applied).
   */
  readonly customDomain?: CustomDomain | undefined;
}

export interface CustomDomain {
  readonly name: string;
  readonly certificateArn: string;
  /** The postback API's own host name (the same certificate covers it), when the postbacks should outlive it too. */
  readonly postbackName?: string | undefined;
}

export interface Throttle {
  readonly rate: number;
  readonly burst: number;
}

export interface RouteThrottles {
  /** Each redirect and postback route (default 500 requests a second, burst 1,000). */
  readonly hits?: Throttle | undefined;
  /** Each finance route (default 10, burst 20). */
  readonly finance?: Throttle | undefined;
}

/**
 * One access log line per request, every route: what API Gateway knows of it (the path, never the query, which
 * carries the signature). At about 230 bytes a line it is what CloudWatch bills per hit (BENCHMARKS.md §7).
 */
export const ACCESS_LOG_FIELDS = {
  requestId: '$context.requestId',
  time: '$context.requestTimeEpoch',
  ip: '$context.identity.sourceIp',
  route: '$context.routeKey',
  path: '$context.path',
  status: '$context.status',
  latencyMs: '$context.responseLatency',
  integrationLatencyMs: '$context.integrationLatency',
  error: '$context.integrationErrorMessage',
} as const;

export class HitApi extends Construct {
  readonly api: HttpApi;
  readonly stage: HttpStage;
  readonly accessLogs: LogGroup;
  /** The custom domain, when one is set: DNS must point its name at `regionalDomainName`. */
  readonly domain?: DomainName;
  private readonly customHost?: string;

  constructor(scope: Construct, id: string, props: HitApiProps) {
    super(scope, id);
    const routes = props.routes ?? ROUTES;
    this.api = new HttpApi(this, 'api', {
      createDefaultStage: false,
      description: props.description ?? 'Survey redirect and postback receiver',
    });
    this.accessLogs = new LogGroup(this, 'access-logs', {
      // Under /aws/vendedlogs/: an HTTP API stage's access logging adds any other log group to the region's one
      // CloudWatch Logs resource policy, 5,120 characters that deleted stacks never give back, and a deploy fails
      // once it is full ("Cannot enable logging. Policy document length ..."); this prefix is covered by one entry.
      // Named by the stack and the API: a second stack, or this one deployed again after a destroy, takes its own.
      logGroupName: `/aws/vendedlogs/apigateway/${Stack.of(this).stackName}/${id}`,
      retention: RetentionDays.THREE_MONTHS,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // A stack deployed before the name was set replaces its group on the update: the old one stays, its lines
    // (the request ids an answer and a stored hit carry) ageing out under their retention, not deleted with it.
    (this.accessLogs.node.defaultChild as CfnLogGroup).cfnOptions.updateReplacePolicy =
      CfnDeletionPolicy.RETAIN;
    const routeThrottle = (route: Route): Throttle =>
      (route.function === 'finance' ? props.throttles?.finance : props.throttles?.hits) ?? route.throttle;
    // The stage's default applies to each route without settings of its own (none: every route has them below),
    // not to the routes together. It is the largest route's (at least 1,000 / 2,000) and no more than that: a
    // default above the account's limits (10,000 a second, a burst of 5,000, unless raised) may be refused, so it
    // does not double a route's raised for ten times the traffic (2,000 / 4,000).
    const throttle = {
      rate: Math.max(1000, ...routes.map((route) => routeThrottle(route).rate)),
      burst: Math.max(2000, ...routes.map((route) => routeThrottle(route).burst)),
    };
    this.stage = new HttpStage(this, 'stage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: throttle.rate, burstLimit: throttle.burst },
      accessLogSettings: {
        destination: new LogGroupLogDestination(this.accessLogs),
        format: AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
      },
    });

    const integrations = new Map<FunctionName, HttpLambdaIntegration>();
    const integrationFor = (name: FunctionName) => {
      let integration = integrations.get(name);
      if (!integration) {
        const fn = props.functions[name];
        if (!fn) throw new Error(`no function given for the ${name} routes`);
        integration = new HttpLambdaIntegration(`${name}-integration`, fn);
        integrations.set(name, integration);
      }
      return integration;
    };
    const iam = new HttpIamAuthorizer();
    for (const route of routes) {
      const added = this.api.addRoutes({
        path: route.path,
        methods: [HttpMethod[route.method]],
        integration: integrationFor(route.function),
        ...(route.auth === 'iam' ? { authorizer: iam } : {}),
      });
      // The stage's route settings name the routes by key: API Gateway refuses a stage whose settings name a route
      // that does not exist yet, so the stage is created after every route (else the first deploy fails).
      this.stage.node.addDependency(...added);
    }
    if (props.customDomain) {
      this.customHost = props.customDomain.name;
      this.domain = new DomainName(this, 'domain', {
        domainName: props.customDomain.name,
        certificate: Certificate.fromCertificateArn(this, 'certificate', props.customDomain.certificateArn),
      });
      new ApiMapping(this, 'domain-mapping', { api: this.api, domainName: this.domain, stage: this.stage });
    }
    // RouteSettings is free-form JSON in the L1, so its keys are written as CloudFormation spells them.
    const cfnStage = this.stage.node.defaultChild as CfnStage;
    cfnStage.routeSettings = Object.fromEntries(
      routes.map((route) => [
        routeKey(route),
        { ThrottlingRateLimit: routeThrottle(route).rate, ThrottlingBurstLimit: routeThrottle(route).burst },
      ]),
    );
  }

  /** The API's public base URL: the custom domain's when there is one. */
  get url(): string {
    return this.customHost ? `https://${this.customHost}/` : this.stage.url;
  }
}
