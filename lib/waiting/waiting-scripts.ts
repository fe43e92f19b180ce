import { join } from 'node:path';
import { TIME_MICROS_PRELUDE } from '../redis/lua-script';

/**
 * The helpers of every script that hands out fences (locks, semaphores): preludes, put before
 * each such script when it is loaded, in this order.
 */
export const FENCE_COUNTER_PRELUDES: readonly string[] = [
  TIME_MICROS_PRELUDE,
  join(__dirname, 'scripts', 'includes', 'fence-counter.lua'),
];

/** The fence counters with the one kept in a hash field (semaphores): preludes, in this order. */
export const FENCE_FIELD_PRELUDES: readonly string[] = [
  ...FENCE_COUNTER_PRELUDES,
  join(__dirname, 'scripts', 'includes', 'fence-field.lua'),
];

/**
 * The helpers of every script that reads, joins or renews a line of waiting processes (locks,
 * semaphores, the waiting room): preludes, put before each such script when it is loaded.
 */
export const LINE_PRELUDES: readonly string[] = [
  TIME_MICROS_PRELUDE,
  join(__dirname, 'scripts', 'line.lua'),
];
