/**
 * The HTTP API: one route per entry of the route table, each throttled; the hit routes open to the marketplace
 * and respondents' browsers (the handler checks the URL's signature), the finance routes behind IAM (SigV4).
 * Access logs never record the query string (it carries the URL's signature).
 */
import { RemovalPolicy } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import {
  type CfnStage,
  HttpApi,
  HttpMethod,
  HttpStage,
  LogGroupLogDestination,
} from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { type FunctionName, ROUTES, routeKey } from '../routes';

export interface HitApiProps {
  readonly functions: Record<FunctionName, IFunction>;
  /** Stage-wide limits; each route has its own below these. */
  readonly throttle?: { readonly rate: number; readonly burst: number };
}

export class HitApi extends Construct {
  readonly api: HttpApi;
  readonly stage: HttpStage;
  readonly accessLogs: LogGroup;

  constructor(scope: Construct, id: string, props: HitApiProps) {
    super(scope, id);
    this.api = new HttpApi(this, 'api', {
      createDefaultStage: false,
      description: 'Survey redirect and postback receiver',
    });
    this.accessLogs = new LogGroup(this, 'access-logs', {
      retention: RetentionDays.THREE_MONTHS,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const throttle = props.throttle ?? { rate: 1000, burst: 2000 };
    this.stage = new HttpStage(this, 'stage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: throttle.rate, burstLimit: throttle.burst },
      accessLogSettings: {
        destination: new LogGroupLogDestination(this.accessLogs),
        format: AccessLogFormat.custom(
          JSON.stringify({
            requestId: '$context.requestId',
            time: '$context.requestTimeEpoch',
            ip: '$context.identity.sourceIp',
            route: '$context.routeKey',
            path: '$context.path',
            status: '$context.status',
            latencyMs: '$context.responseLatency',
            integrationLatencyMs: '$context.integrationLatency',
            error: '$context.integrationErrorMessage',
          }),
        ),
      },
    });

    const integrations = new Map<FunctionName, HttpLambdaIntegration>();
    const integrationFor = (name: FunctionName) => {
      let integration = integrations.get(name);
      if (!integration) {
        integration = new HttpLambdaIntegration(`${name}-integration`, props.functions[name]);
        integrations.set(name, integration);
      }
      return integration;
    };
    const iam = new HttpIamAuthorizer();
    for (const route of ROUTES) {
      this.api.addRoutes({
        path: route.path,
        methods: [HttpMethod[route.method]],
        integration: integrationFor(route.function),
        ...(route.auth === 'iam' ? { authorizer: iam } : {}),
      });
    }
    // RouteSettings is free-form JSON in the L1, so its keys are written as CloudFormation spells them.
    const cfnStage = this.stage.node.defaultChild as CfnStage;
    cfnStage.routeSettings = Object.fromEntries(
      ROUTES.map((route) => [
        routeKey(route),
        { ThrottlingRateLimit: route.throttle.rate, ThrottlingBurstLimit: route.throttle.burst },
      ]),
    );
  }

  get url(): string {
    return this.stage.url;
  }
}
