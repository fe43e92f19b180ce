import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';
import { FENCE_FIELD_PRELUDES, LINE_PRELUDES } from '../waiting/waiting-scripts';

/**
 * One operation's script, with the fence counters (fence-field.lua's too), the line's helpers and
 * common.lua before it.
 */
const script = (operation: string) =>
  new LuaScript(
    `semaphore ${operation}`,
    join(__dirname, 'scripts', `${operation}.lua`),
    ...FENCE_FIELD_PRELUDES,
    ...LINE_PRELUDES,
    join(__dirname, 'scripts', 'common.lua'),
  );

/** The semaphore's Lua scripts, one per operation, read once per process. */
export const SEMAPHORE_SCRIPTS = {
  acquire: script('acquire'),
  release: script('release'),
  leaveLine: script('leave-line'),
  extend: script('extend'),
  renew: script('renew'),
  isHeld: script('is-held'),
};
