import { describe, expect, it } from 'vitest';
import { ASSUMPTIONS, costPerMillionHits, PRICES } from '../bench/cost';

describe('cost per million hits (npm run bench, section 7)', () => {
  const inputs = {
    memoryMb: 256,
    cpuUsPerHit: 500,
    importMs: 56,
    firstHitWriteUnits: 2,
    secondHitWriteUnits: 1,
    responseBytes: 150,
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
