import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';

const file = (name: string) => join(__dirname, 'scripts', `${name}.lua`);

/** The Lua scripts of `@OncePerTick`, read once per process. */
export const SCHEDULE_SCRIPTS = {
  claimTick: new LuaScript('tick claim', file('claim-tick')),
  startTick: new LuaScript('tick start', file('start-tick')),
};
