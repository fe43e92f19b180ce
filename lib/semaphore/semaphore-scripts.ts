import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';

const file = (name: string) => join(__dirname, 'scripts', `${name}.lua`);

/** The semaphore's Lua scripts (one per operation, each with common.lua before it), read once. */
export const SEMAPHORE_SCRIPTS = {
  acquire: new LuaScript('semaphore acquire', file('acquire'), file('common')),
  release: new LuaScript('semaphore release', file('release'), file('common')),
  leaveLine: new LuaScript('semaphore leave-line', file('leave-line'), file('common')),
  extend: new LuaScript('semaphore extend', file('extend'), file('common')),
  renew: new LuaScript('semaphore renew', file('renew'), file('common')),
  isHeld: new LuaScript('semaphore is-held', file('is-held'), file('common')),
};
