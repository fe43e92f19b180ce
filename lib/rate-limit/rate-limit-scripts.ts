import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';

const TIME = join(__dirname, 'scripts', 'includes', 'redis-time.lua');

/** The rate limiter's Lua scripts, one per algorithm, read once per process. */
export const RATE_LIMIT_SCRIPTS = {
  'sliding-window': new LuaScript(
    'rate limit (sliding window)',
    join(__dirname, 'scripts', 'sliding-window.lua'),
    TIME,
  ),
  'token-bucket': new LuaScript(
    'rate limit (token bucket)',
    join(__dirname, 'scripts', 'token-bucket.lua'),
    TIME,
  ),
};
