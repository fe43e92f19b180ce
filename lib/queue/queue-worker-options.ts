import type { QueueDefaults } from '../interfaces/redis-lock-module-options.interface';
import { QUEUE_DEFAULTS, resolveQueueOptions } from '../options/resolve-options';
import type { QueueWorkerOptions } from './interfaces/queue-options.interface';

/** Worker options with every default applied. */
export type ResolvedWorkerOptions = Required<QueueWorkerOptions>;

/**
 * Validates the options of a worker (`@QueueWorker` / `process`) and fills unset ones from the
 * module's queue defaults; throws `RedisLockOptionsError` naming the option.
 */
export function resolveWorkerOptions(
  defaults: Required<QueueDefaults>,
  options: QueueWorkerOptions | undefined,
): ResolvedWorkerOptions {
  return resolveQueueOptions(defaults, options);
}

/** Throws `RedisLockOptionsError` naming the first invalid option (`@QueueWorker` checks early). */
export function checkWorkerOptions(options: QueueWorkerOptions | undefined): void {
  resolveWorkerOptions(QUEUE_DEFAULTS, options);
}
