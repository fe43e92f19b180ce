import type { QueueDefaults } from '../interfaces/redis-lock-module-options.interface';
import { checkInt, checkKnownKeys, checkMs } from '../options/validate';
import type { QueueWorkerOptions } from './interfaces/queue-options.interface';

/** Worker options with every default applied. */
export type ResolvedWorkerOptions = Required<QueueWorkerOptions>;

const WORKER_KEYS = [
  'concurrency',
  'leaseMs',
  'maxAttempts',
  'backoffMs',
  'drainTimeoutMs',
] as const;

/**
 * Validates the options of a worker (`@QueueWorker` / `process`) and fills unset ones from the
 * module's queue defaults; throws `RedisLockOptionsError` naming the option.
 */
export function resolveWorkerOptions(
  defaults: Required<QueueDefaults>,
  options: QueueWorkerOptions | undefined,
): ResolvedWorkerOptions {
  checkKnownKeys('', options, WORKER_KEYS);
  const o = options ?? {};
  return {
    concurrency:
      o.concurrency === undefined
        ? defaults.concurrency
        : checkInt('concurrency', o.concurrency, 1, 10_000),
    leaseMs: o.leaseMs === undefined ? defaults.leaseMs : checkMs('leaseMs', o.leaseMs, 1),
    maxAttempts:
      o.maxAttempts === undefined
        ? defaults.maxAttempts
        : checkInt('maxAttempts', o.maxAttempts, 1, 1_000_000),
    backoffMs:
      o.backoffMs === undefined ? defaults.backoffMs : checkMs('backoffMs', o.backoffMs, 0),
    drainTimeoutMs:
      o.drainTimeoutMs === undefined
        ? defaults.drainTimeoutMs
        : checkMs('drainTimeoutMs', o.drainTimeoutMs, 0),
  };
}

/** Throws `RedisLockOptionsError` naming the first invalid option (`@QueueWorker` checks early). */
export function checkWorkerOptions(options: QueueWorkerOptions | undefined): void {
  resolveWorkerOptions(
    { concurrency: 1, leaseMs: 1, maxAttempts: 1, backoffMs: 0, drainTimeoutMs: 0 },
    options,
  );
}
