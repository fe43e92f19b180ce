import { join } from 'node:path';

/**
 * The helpers of every script that hands out fences (locks, semaphores): a prelude, put before
 * each such script when it is loaded.
 */
export const FENCE_COUNTER_PRELUDE = join(__dirname, 'scripts', 'includes', 'fence-counter.lua');

/**
 * The helpers of every script that reads, joins or renews a line of waiting processes (locks,
 * semaphores): a prelude, put before each such script when it is loaded.
 */
export const LINE_PRELUDE = join(__dirname, 'scripts', 'line.lua');
