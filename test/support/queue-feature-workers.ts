import type { ChildProcess } from 'node:child_process';
import type { QueueWorkerOptions } from '../../lib';
import { lineFrom, spawnTs } from './child';
import { testRedisUrl } from './helpers';

/** One worker of a `test/fixtures/queue-feature-child.ts` process. */
export interface FeatureWorker {
  queue: string;
  options: QueueWorkerOptions;
}

/**
 * Starts a process running `workers` (records under `<prefix>obs:<queue>:`, see the fixture) and
 * resolves once they run.
 */
export async function spawnFeatureWorkers(
  prefix: string,
  workers: readonly FeatureWorker[],
  env: NodeJS.ProcessEnv = {},
): Promise<ChildProcess> {
  const child = spawnTs('test/fixtures/queue-feature-child.ts', [], {
    REDIS_URL: testRedisUrl(),
    PREFIX: prefix,
    WORKERS_JSON: JSON.stringify(workers),
    ...env,
  });
  await lineFrom(child, /^ready \d+$/, 30_000);
  return child;
}

/** Jain's fairness index of `counts`: 1 when all are equal, 1/n when one has everything. */
export function jainIndex(counts: readonly number[]): number {
  const sum = counts.reduce((a, b) => a + b, 0);
  const squares = counts.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 1 : (sum * sum) / (counts.length * squares);
}
