import { join } from 'node:path';
import { LuaScript, TIME_MICROS_PRELUDE } from '../redis/lua-script';

const includes = (file: string) => join(__dirname, 'scripts', 'includes', file);

/**
 * The rate limiter's Lua script: a batch of checks (the consumes of one tick), each with its
 * algorithm. Read once per process.
 */
export const CONSUME_SCRIPT = new LuaScript(
  'rate limit',
  join(__dirname, 'scripts', 'consume.lua'),
  TIME_MICROS_PRELUDE,
  includes('redis-time.lua'),
  includes('sliding-window.lua'),
  includes('token-bucket.lua'),
);

/**
 * Gives back what the checks of a consume call counted when its reply came after the bound (its
 * callers were told `RedisUnavailableError`). Read once per process.
 */
export const REFUND_SCRIPT = new LuaScript(
  'rate limit refund',
  join(__dirname, 'scripts', 'refund.lua'),
  TIME_MICROS_PRELUDE,
  includes('redis-time.lua'),
);
