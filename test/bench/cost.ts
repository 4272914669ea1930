/**
 * Cost per million hits in AWS, computed from the figures this run measured and AWS's list prices. What cannot be
 * measured on this machine is an assumption, stated next to the price list and printed with the result.
 */

/** List prices, US East (N. Virginia), from the AWS pricing pages as published in 2025. */
export const PRICES = {
  asOf: '2025 list prices, us-east-1 (DynamoDB on-demand after the November 2024 reduction)',
  httpApiPerMillionRequests: 1.0, // first 300 million a month
  lambdaPerMillionRequests: 0.2,
  lambdaArmPerGbSecond: 0.0000133334, // first 7.5 billion GB-s a month
  dynamoPerMillionWriteUnits: 0.625,
  dynamoPerMillionReadUnits: 0.125,
  dataTransferOutPerGb: 0.09, // after the first 100 GB a month
  secretsManagerPer10kCalls: 0.05,
  cloudWatchLogsIngestPerGb: 0.5,
  cloudWatchLogsStorePerGbMonth: 0.03,
} as const;

export const ASSUMPTIONS = {
  /** An UpdateItem's round trip inside a region; DynamoDB's documented "single-digit milliseconds". */
  storeRoundTripMs: 6,
  /** Lambda gives a function memory/1,769 MB of a vCPU; this machine's core is taken as equal to one. */
  mbPerVcpu: 1769,
  /** A container serves this many hits before it is replaced (each start is billed, INIT included). */
  hitsPerColdStart: 10_000,
  /** The runtime's own start before the bundle is imported. */
  runtimeStartMs: 100,
  /** Bytes API Gateway adds to each answer (status line, its own headers), besides the receiver's. */
  gatewayResponseBytes: 250,
  /** CloudWatch bills a log event as its message plus 26 bytes. */
  logEventOverheadBytes: 26,
  /** The access logs' retention (hit-api.ts), stored at their ingested size (an upper bound: stored compressed). */
  accessLogMonths: 3,
} as const;

export interface CostInputs {
  readonly memoryMb: number;
  /** Median CPU per hit with the SDK's pipeline (store answered at the socket), microseconds, redirect and postback. */
  readonly cpuUsPerHit: number;
  /** Median import time of the receiver bundles on this machine. */
  readonly importMs: number;
  /** Write units (table and indexes) for an attempt's first hit and for its second (the other channel). */
  readonly firstHitWriteUnits: number;
  readonly secondHitWriteUnits: number;
  readonly responseBytes: number;
  /** One API Gateway access log line of a hit, as the stage's format writes it. */
  readonly accessLogLineBytes: number;
}

export function costPerMillionHits(inputs: CostInputs) {
  const cpuScale = ASSUMPTIONS.mbPerVcpu / inputs.memoryMb;
  const gb = inputs.memoryMb / 1024;
  const billedMs = Math.ceil((inputs.cpuUsPerHit / 1000) * cpuScale + ASSUMPTIONS.storeRoundTripMs);
  const coldStarts = 1_000_000 / ASSUMPTIONS.hitsPerColdStart;
  const initMs = ASSUMPTIONS.runtimeStartMs + inputs.importMs * cpuScale;
  const writeUnitsPerHit = (inputs.firstHitWriteUnits + inputs.secondHitWriteUnits) / 2;
  const gigabytesOut = ((inputs.responseBytes + ASSUMPTIONS.gatewayResponseBytes) * 1_000_000) / 1e9;
  const lines = [
    { item: 'HTTP API requests', basis: '1,000,000 requests', usd: PRICES.httpApiPerMillionRequests },
    { item: 'Lambda requests', basis: '1,000,000 invocations', usd: PRICES.lambdaPerMillionRequests },
    {
      item: 'Lambda duration',
      basis: `${billedMs} ms billed per hit at ${inputs.memoryMb} MB`,
      usd: (1_000_000 * billedMs * gb * PRICES.lambdaArmPerGbSecond) / 1000,
    },
    {
      item: 'Lambda init (cold starts)',
      basis: `${coldStarts} starts x ${initMs.toFixed(0)} ms`,
      usd: (coldStarts * initMs * gb * PRICES.lambdaArmPerGbSecond) / 1000,
    },
    {
      item: 'DynamoDB writes',
      basis: `${writeUnitsPerHit} write units per hit`,
      usd: writeUnitsPerHit * PRICES.dynamoPerMillionWriteUnits,
    },
    { item: 'DynamoDB reads', basis: 'none on the hit path', usd: 0 },
    {
      item: 'Data transfer out',
      basis: `${gigabytesOut.toFixed(2)} GB`,
      usd: gigabytesOut * PRICES.dataTransferOutPerGb,
    },
    {
      item: 'Secrets Manager',
      basis: `${coldStarts} key ring fetches`,
      usd: (coldStarts / 10_000) * PRICES.secretsManagerPer10kCalls,
    },
    {
      item: 'CloudWatch Logs',
      basis: `access log ${inputs.accessLogLineBytes} B a request, kept ${ASSUMPTIONS.accessLogMonths} months (the functions log nothing for a successful hit)`,
      usd:
        (((inputs.accessLogLineBytes + ASSUMPTIONS.logEventOverheadBytes) * 1_000_000) / 1e9) *
        (PRICES.cloudWatchLogsIngestPerGb +
          ASSUMPTIONS.accessLogMonths * PRICES.cloudWatchLogsStorePerGbMonth),
    },
  ];
  const total = lines.reduce((sum, line) => sum + line.usd, 0);
  return {
    lines: lines.map((line) => ({ ...line, usd: line.usd.toFixed(4) })),
    totalUsd: total,
  };
}

/**
 * The traffic the all-in figure is stated for: a supplier ten times a mid-size panel. The scheduled functions'
 * cost grows with the surveys they visit and the attempts they re-read, not with hits, so per million hits it
 * depends on how many hits each survey brings; the shape is printed with the result.
 */
export interface TrafficShape {
  readonly hitsPerMonth: number;
  readonly activeSurveys: number;
  readonly hitsPerAttempt: number;
  readonly reconcileRunsPerMonth: number;
  readonly syncRunsPerMonth: number;
  readonly healthRunsPerMonth: number;
}

export const TRAFFIC_SHAPE: TrafficShape = {
  hitsPerMonth: 30_000_000,
  activeSurveys: 1_000,
  /** Each attempt brings a redirect and a postback. */
  hitsPerAttempt: 2,
  /** The deployed schedules' defaults (infra/receiver-stack.ts, infra/settings.ts). */
  reconcileRunsPerMonth: 720,
  syncRunsPerMonth: 2_880,
  healthRunsPerMonth: 8_640,
};

export const SCHEDULE_ASSUMPTIONS = {
  /** A marketplace call's round trip as a scheduled function waits for it (its pages included). */
  marketplaceCallMs: 400,
  /** Surveys a reconciliation run works on at once (RECONCILE_CONCURRENCY). */
  reconcileConcurrency: 4,
  reconcileMemoryMb: 512,
  scheduledMemoryMb: 256,
  /** A scheduled run's fixed start (a warm container, its first requests), besides its per-survey work. */
  runOverheadMs: 50,
} as const;

/** What one scheduled function consumes, per survey per run and per attempt over its reconciliation week. */
export interface ScheduledUsage {
  /** Reconciliation, measured over a simulated week of hourly runs: units per attempt over its week. */
  readonly reconcile: {
    /** The attempts' own units (day index, batch reads; verdict writes), per attempt over its week. */
    readonly readUnitsPerAttemptWeek: number;
    readonly writeUnitsPerAttemptWeek: number;
    /** Per survey per run whatever its traffic (its state and day summaries). */
    readonly readUnitsPerSurveyRun?: number;
    readonly writeUnitsPerSurveyRun?: number;
    /** Per run whatever the number of surveys (run state, lease, finished-run record, registry listing). */
    readonly readUnitsPerRun?: number;
    readonly writeUnitsPerRun?: number;
    /** Store requests per survey per run (the store's round trips, waited for in turn within a survey). */
    readonly requestsPerSurveyRun: number;
    /** Marketplace calls per survey per run. */
    readonly marketplaceCallsPerSurveyRun: number;
  };
  readonly sync: {
    readonly readUnitsPerSurveyRun: number;
    readonly writeUnitsPerSurveyRun: number;
    readonly requestsPerSurveyRun: number;
    readonly marketplaceCallsPerRun: number;
  };
  /** The survey health check, measured in its steady state (`schedule-cost.ts`). */
  readonly health?: {
    readonly readUnitsPerSurveyRun: number;
    readonly writeUnitsPerSurveyRun: number;
    readonly readUnitsPerAttempt: number;
    readonly requestsPerSurveyRun: number;
  };
}

/**
 * The scheduled functions' cost per million hits at `shape`: DynamoDB units from the measured usage, Lambda time
 * from the store's and the marketplace's round trips, and the scheduler's invocations.
 */
export function scheduledCostPerMillionHits(usage: ScheduledUsage, shape = TRAFFIC_SHAPE) {
  const millions = shape.hitsPerMonth / 1_000_000;
  const attemptsPerMillionHits = 1_000_000 / shape.hitsPerAttempt;
  const surveyRuns = (runs: number) => (shape.activeSurveys * runs) / millions;
  const perMillion = (units: number, price: number) => (units * price) / 1_000_000;
  const gbSeconds = (ms: number, memoryMb: number) => (ms / 1000) * (memoryMb / 1024);
  const { reconcile, sync, health } = usage;
  const reconcileMsPerSurvey =
    reconcile.marketplaceCallsPerSurveyRun * SCHEDULE_ASSUMPTIONS.marketplaceCallMs +
    reconcile.requestsPerSurveyRun * ASSUMPTIONS.storeRoundTripMs;
  const reconcileGbS =
    gbSeconds(
      (surveyRuns(shape.reconcileRunsPerMonth) * reconcileMsPerSurvey) /
        SCHEDULE_ASSUMPTIONS.reconcileConcurrency,
      SCHEDULE_ASSUMPTIONS.reconcileMemoryMb,
    ) +
    gbSeconds(
      (shape.reconcileRunsPerMonth / millions) * SCHEDULE_ASSUMPTIONS.runOverheadMs,
      SCHEDULE_ASSUMPTIONS.reconcileMemoryMb,
    );
  // The sync and the health check wait for the store in turn, survey after survey, at their concurrency of 4.
  const syncRunMs =
    SCHEDULE_ASSUMPTIONS.runOverheadMs +
    sync.marketplaceCallsPerRun * SCHEDULE_ASSUMPTIONS.marketplaceCallMs +
    (shape.activeSurveys * sync.requestsPerSurveyRun * ASSUMPTIONS.storeRoundTripMs) / 4;
  const healthRunMs = health
    ? SCHEDULE_ASSUMPTIONS.runOverheadMs +
      (shape.activeSurveys * health.requestsPerSurveyRun * ASSUMPTIONS.storeRoundTripMs) / 4
    : 0;
  const otherRuns = (shape.syncRunsPerMonth + (health ? shape.healthRunsPerMonth : 0)) / millions;
  const otherGbS = gbSeconds(
    (shape.syncRunsPerMonth * syncRunMs + (health ? shape.healthRunsPerMonth * healthRunMs : 0)) / millions,
    SCHEDULE_ASSUMPTIONS.scheduledMemoryMb,
  );
  /** Units the reconciliation consumes per million hits: per attempt, per survey and run, per run. */
  const reconcileUnits = (perAttempt: number, perSurveyRun = 0, perRun = 0) =>
    attemptsPerMillionHits * perAttempt +
    surveyRuns(shape.reconcileRunsPerMonth) * perSurveyRun +
    (shape.reconcileRunsPerMonth / millions) * perRun;
  const lines = [
    {
      item: 'Reconciliation reads',
      basis: `${usage.reconcile.readUnitsPerAttemptWeek.toFixed(2)} read units per attempt over its week, ${(reconcile.readUnitsPerSurveyRun ?? 0).toFixed(2)} per survey and run, ${(reconcile.readUnitsPerRun ?? 0).toFixed(2)} per run`,
      usd: perMillion(
        reconcileUnits(
          reconcile.readUnitsPerAttemptWeek,
          reconcile.readUnitsPerSurveyRun,
          reconcile.readUnitsPerRun,
        ),
        PRICES.dynamoPerMillionReadUnits,
      ),
    },
    {
      item: 'Reconciliation writes',
      basis: `${reconcile.writeUnitsPerAttemptWeek.toFixed(2)} write units per attempt (verdicts), ${(reconcile.writeUnitsPerSurveyRun ?? 0).toFixed(2)} per survey and run (summaries, state), ${(reconcile.writeUnitsPerRun ?? 0).toFixed(2)} per run`,
      usd: perMillion(
        reconcileUnits(
          reconcile.writeUnitsPerAttemptWeek,
          reconcile.writeUnitsPerSurveyRun,
          reconcile.writeUnitsPerRun,
        ),
        PRICES.dynamoPerMillionWriteUnits,
      ),
    },
    {
      item: 'Reconciliation Lambda',
      basis: `${reconcileMsPerSurvey.toFixed(0)} ms per survey per run, ${SCHEDULE_ASSUMPTIONS.reconcileConcurrency} at once`,
      usd:
        reconcileGbS * PRICES.lambdaArmPerGbSecond +
        perMillion(shape.reconcileRunsPerMonth / millions, PRICES.lambdaPerMillionRequests),
    },
    {
      item: 'Redirect sync',
      basis: `${sync.readUnitsPerSurveyRun.toFixed(2)} read units per survey per run, every 15 minutes`,
      usd:
        perMillion(
          surveyRuns(shape.syncRunsPerMonth) * sync.readUnitsPerSurveyRun,
          PRICES.dynamoPerMillionReadUnits,
        ) +
        perMillion(
          surveyRuns(shape.syncRunsPerMonth) * sync.writeUnitsPerSurveyRun,
          PRICES.dynamoPerMillionWriteUnits,
        ),
    },
    ...(health
      ? [
          {
            item: 'Survey health',
            basis: `${health.readUnitsPerSurveyRun.toFixed(2)} read units per survey per run every 5 minutes, ${health.readUnitsPerAttempt.toFixed(2)} per attempt`,
            usd:
              perMillion(
                surveyRuns(shape.healthRunsPerMonth) * health.readUnitsPerSurveyRun +
                  attemptsPerMillionHits * health.readUnitsPerAttempt,
                PRICES.dynamoPerMillionReadUnits,
              ) +
              perMillion(
                surveyRuns(shape.healthRunsPerMonth) * health.writeUnitsPerSurveyRun,
                PRICES.dynamoPerMillionWriteUnits,
              ),
          },
        ]
      : []),
    {
      item: 'Scheduled Lambda runs (sync, health)',
      basis: `${Math.round(otherRuns)} runs per million hits, ${syncRunMs.toFixed(0)} ms and ${healthRunMs.toFixed(0)} ms each`,
      usd: perMillion(otherRuns, PRICES.lambdaPerMillionRequests) + otherGbS * PRICES.lambdaArmPerGbSecond,
    },
  ];
  const total = lines.reduce((sum, line) => sum + line.usd, 0);
  return { lines: lines.map((line) => ({ ...line, usd: line.usd.toFixed(4) })), totalUsd: total, shape };
}

/** What keeping the attempt feed adds (feed-cost.ts measures its inputs), per million hits at the shape. */
export function feedCostPerMillionHits(
  feed: {
    readonly writeUnitsPerAttempt: number;
    readonly invocationsPerMonth: number;
    readonly cpuMsPerInvocation: number;
    readonly itemsPerInvocation: number;
  },
  shape = TRAFFIC_SHAPE,
) {
  const millions = shape.hitsPerMonth / 1_000_000;
  const attemptsPerMillionHits = 1_000_000 / shape.hitsPerAttempt;
  const invocations = feed.invocationsPerMonth / millions;
  // The consumer's memory (the house default) and CPU share, as for the receivers; its puts wait in turn, 8 at once.
  const memoryMb = 256;
  const msPerInvocation =
    feed.cpuMsPerInvocation * (ASSUMPTIONS.mbPerVcpu / memoryMb) +
    Math.ceil(feed.itemsPerInvocation / 8) * ASSUMPTIONS.storeRoundTripMs;
  const lines = [
    {
      item: 'Attempt feed writes',
      basis: `${feed.writeUnitsPerAttempt.toFixed(3)} write units per attempt`,
      usd:
        (attemptsPerMillionHits * feed.writeUnitsPerAttempt * PRICES.dynamoPerMillionWriteUnits) / 1_000_000,
    },
    {
      item: 'Attempt feed consumer',
      basis: `${Math.round(invocations)} invocations per million hits, ${msPerInvocation.toFixed(0)} ms each at ${memoryMb} MB (its stream reads are not billed)`,
      usd:
        (invocations * PRICES.lambdaPerMillionRequests) / 1_000_000 +
        ((invocations * msPerInvocation) / 1000) * (memoryMb / 1024) * PRICES.lambdaArmPerGbSecond,
    },
  ];
  const total = lines.reduce((sum, line) => sum + line.usd, 0);
  return { lines: lines.map((line) => ({ ...line, usd: line.usd.toFixed(4) })), totalUsd: total };
}
