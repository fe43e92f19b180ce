import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';

/** The fenced store's Lua scripts, read once per process. */
export const FENCED_SCRIPTS = {
  write: new LuaScript('fenced write', join(__dirname, 'scripts', 'fenced-write.lua')),
};
