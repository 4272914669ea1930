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
    { item: 'CloudWatch Logs', basis: 'successful hits log nothing', usd: 0 },
  ];
  const total = lines.reduce((sum, line) => sum + line.usd, 0);
  return {
    lines: lines.map((line) => ({ ...line, usd: line.usd.toFixed(4) })),
    totalUsd: total,
  };
}
