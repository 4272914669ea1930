import { describe, expect, it } from 'vitest';
import {
  ASSUMPTIONS,
  costPerMillionHits,
  feedCostPerMillionHits,
  PRICES,
  scheduledCostPerMillionHits,
  TRAFFIC_SHAPE,
} from '../bench/cost';
import { feedWriteCost } from '../bench/feed-cost';

describe('cost per million hits (npm run bench, section 7)', () => {
  const inputs = {
    memoryMb: 256,
    cpuUsPerHit: 500,
    importMs: 56,
    firstHitWriteUnits: 2,
    secondHitWriteUnits: 1,
    responseBytes: 150,
    accessLogLineBytes: 274,
  };

  it('prices each line from the measured inputs and the list prices', () => {
    const { lines, totalUsd } = costPerMillionHits(inputs);
    const usd = (item: string) => Number(lines.find((line) => line.item === item)?.usd);
    // 0.5 ms of CPU at 256 MB is 3.45 ms (a 256/1769 vCPU share), plus the 6 ms round trip: 10 ms billed.
    expect(lines.find((line) => line.item === 'Lambda duration')?.basis).toMatch(/^10 ms billed/);
    expect(usd('Lambda duration')).toBeCloseTo(1_000_000 * 0.01 * 0.25 * PRICES.lambdaArmPerGbSecond, 4);
    expect(usd('DynamoDB writes')).toBeCloseTo(1.5 * PRICES.dynamoPerMillionWriteUnits, 4);
    expect(usd('HTTP API requests')).toBe(PRICES.httpApiPerMillionRequests);
    expect(usd('Data transfer out')).toBeCloseTo(
      ((150 + ASSUMPTIONS.gatewayResponseBytes) / 1e3) * PRICES.dataTransferOutPerGb,
      4,
    );
    // One access log line a request, with CloudWatch's 26 bytes an event: ingested, then kept three months.
    expect(usd('CloudWatch Logs')).toBeCloseTo(
      (300 / 1e3) * (PRICES.cloudWatchLogsIngestPerGb + 3 * PRICES.cloudWatchLogsStorePerGbMonth),
      4,
    );
    expect(totalUsd).toBeCloseTo(
      lines.reduce((sum, line) => sum + Number(line.usd), 0),
      3,
    );
  });

  it('costs more when every hit creates its attempt', () => {
    const mixed = costPerMillionHits(inputs).totalUsd;
    const single = costPerMillionHits({ ...inputs, secondHitWriteUnits: 2 }).totalUsd;
    expect(single - mixed).toBeCloseTo(0.5 * PRICES.dynamoPerMillionWriteUnits, 4);
  });
});

describe('scheduled functions per million hits (npm run bench, section 7)', () => {
  const usage = {
    reconcile: {
      readUnitsPerAttemptWeek: 10,
      writeUnitsPerAttemptWeek: 1,
      requestsPerSurveyRun: 10,
      marketplaceCallsPerSurveyRun: 1,
    },
    sync: {
      readUnitsPerSurveyRun: 0.5,
      writeUnitsPerSurveyRun: 0,
      requestsPerSurveyRun: 0.02,
      marketplaceCallsPerRun: 1,
    },
  };
  const usd = (lines: { item: string; usd: string }[], item: string) =>
    Number(lines.find((line) => line.item === item)?.usd);

  it('prices the reconciliation per attempt and the sync per survey and run', () => {
    const { lines, totalUsd } = scheduledCostPerMillionHits(usage);
    // 500,000 attempts per million hits, 10 read units each.
    expect(usd(lines, 'Reconciliation reads')).toBeCloseTo(
      (500_000 * 10 * PRICES.dynamoPerMillionReadUnits) / 1e6,
      4,
    );
    expect(usd(lines, 'Reconciliation writes')).toBeCloseTo(
      (500_000 * PRICES.dynamoPerMillionWriteUnits) / 1e6,
      4,
    );
    // 1,000 surveys x 2,880 runs a month over 30 million hits: 96,000 survey-runs per million hits.
    const surveyRuns = (TRAFFIC_SHAPE.activeSurveys * TRAFFIC_SHAPE.syncRunsPerMonth) / 30;
    expect(usd(lines, 'Redirect sync')).toBeCloseTo(
      (surveyRuns * 0.5 * PRICES.dynamoPerMillionReadUnits) / 1e6,
      4,
    );
    expect(lines.some((line) => line.item === 'Survey health')).toBe(false);
    expect(totalUsd).toBeCloseTo(
      lines.reduce((sum, line) => sum + Number(line.usd), 0),
      3,
    );
  });

  it('spreads the per-survey cost over more hits when surveys are busier', () => {
    const withHealth = {
      ...usage,
      health: {
        readUnitsPerSurveyRun: 1,
        writeUnitsPerSurveyRun: 0,
        readUnitsPerAttempt: 0,
        requestsPerSurveyRun: 1,
      },
    };
    const base = scheduledCostPerMillionHits(withHealth);
    const busier = scheduledCostPerMillionHits(withHealth, { ...TRAFFIC_SHAPE, hitsPerMonth: 60_000_000 });
    expect(usd(busier.lines, 'Survey health')).toBeCloseTo(usd(base.lines, 'Survey health') / 2, 4);
    expect(usd(busier.lines, 'Reconciliation reads')).toBe(usd(base.lines, 'Reconciliation reads'));
  });

  it('prices the reconciliation per attempt, per survey and run, and per run, each at its own count', () => {
    const base = scheduledCostPerMillionHits(usage);
    const split = scheduledCostPerMillionHits({
      ...usage,
      reconcile: { ...usage.reconcile, writeUnitsPerSurveyRun: 2, writeUnitsPerRun: 3, readUnitsPerRun: 4 },
    });
    // 1,000 surveys x 720 hourly runs a month over 30 million hits: 24,000 survey-runs and 24 runs per million.
    const runs = TRAFFIC_SHAPE.reconcileRunsPerMonth / 30;
    expect(usd(split.lines, 'Reconciliation writes') - usd(base.lines, 'Reconciliation writes')).toBeCloseTo(
      ((runs * TRAFFIC_SHAPE.activeSurveys * 2 + runs * 3) * PRICES.dynamoPerMillionWriteUnits) / 1e6,
      4,
    );
    expect(usd(split.lines, 'Reconciliation reads') - usd(base.lines, 'Reconciliation reads')).toBeCloseTo(
      (runs * 4 * PRICES.dynamoPerMillionReadUnits) / 1e6,
      4,
    );
  });
});

describe('the attempt feed (npm run bench, section 7)', () => {
  it('prices an hour of traffic through the real consumer: packed batches cost a fraction of a write unit an attempt', async () => {
    const small = await feedWriteCost({
      ...TRAFFIC_SHAPE,
      hitsPerMonth: 3_000_000,
      windowSeconds: 300,
      shards: 1,
      verdictWrites: 0,
    });
    // Every attempt's two hits were consumed, and a batch that holds both keeps one record of the attempt: with the
    // second hit within 30 s and batches of five minutes, most do.
    expect(small.changes).toBe(2 * small.attempts);
    expect(small.records).toBe(small.changes);
    expect(small.kept).toBeLessThan(1.5 * small.attempts);
    expect(small.kept).toBeGreaterThanOrEqual(small.attempts);
    expect(small.items).toBeGreaterThan(0);
    expect(small.writeUnitsPerAttempt).toBeGreaterThan(0);
    expect(small.writeUnitsPerAttempt).toBeLessThan(0.5);
    // One item per change (a batch a change) would cost at least a write unit each.
    const unpacked = await feedWriteCost({
      ...TRAFFIC_SHAPE,
      hitsPerMonth: 3_000_000,
      windowSeconds: 0,
      shards: 1,
      verdictWrites: 0,
    });
    expect(unpacked.writeUnitsPerAttempt).toBeGreaterThan(small.writeUnitsPerAttempt * 3);
    // Judged and written again by reconciliation (the default two): each verdict a change the feed keeps, in the run's burst.
    const judged = await feedWriteCost({
      ...TRAFFIC_SHAPE,
      hitsPerMonth: 3_000_000,
      windowSeconds: 300,
      shards: 1,
    });
    expect(judged.changes).toBe(4 * judged.attempts);
    expect(judged.kept).toBeGreaterThanOrEqual(3 * judged.attempts);
    expect(judged.kept).toBeLessThan(3.5 * judged.attempts);
    expect(judged.writeUnitsPerAttempt).toBeGreaterThan(small.writeUnitsPerAttempt);
    expect(judged.writeUnitsPerAttempt).toBeLessThan(0.5);
    const { lines, totalUsd } = feedCostPerMillionHits(small);
    expect(Number(lines[0]?.usd)).toBeCloseTo(
      (500_000 * small.writeUnitsPerAttempt * PRICES.dynamoPerMillionWriteUnits) / 1e6,
      4,
    );
    expect(totalUsd).toBeGreaterThan(Number(lines[0]?.usd));
  });
});
