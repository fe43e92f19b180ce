import { join } from 'node:path';

/**
 * The helpers of every script that reads, joins or renews a line of waiting processes (locks,
 * semaphores): a prelude, put before each such script when it is loaded.
 */
export const LINE_PRELUDE = join(__dirname, 'scripts', 'line.lua');
