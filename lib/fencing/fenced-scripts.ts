import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';

/**
 * The helpers of every script that hands out fences (locks, semaphores): a prelude, put before
 * each such script when it is loaded.
 */
export const FENCE_COUNTER_PRELUDE = join(__dirname, 'scripts', 'fence-counter.lua');

/** The fenced store's Lua scripts, read once per process. */
export const FENCED_SCRIPTS = {
  write: new LuaScript('fenced write', join(__dirname, 'scripts', 'fenced-write.lua')),
};
