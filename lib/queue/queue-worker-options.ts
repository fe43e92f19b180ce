import {
  QUEUE_DEFAULTS,
  resolveWorkerOptions,
  type ResolvedWorkerOptions,
} from '../options/resolve-options';
import type { QueueWorkerOptions } from './interfaces/queue-options.interface';

export { resolveWorkerOptions, type ResolvedWorkerOptions };

/** Throws `RedisLockOptionsError` naming the first invalid option (`@QueueWorker` checks early). */
export function checkWorkerOptions(options: QueueWorkerOptions | undefined): void {
  resolveWorkerOptions(QUEUE_DEFAULTS, options);
}
