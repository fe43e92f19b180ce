import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';

const file = (name: string) => join(__dirname, 'scripts', `${name}.lua`);

/** The dashboard's Lua scripts, read once per process. */
export const DASHBOARD_SCRIPTS = {
  recordEvents: new LuaScript('dashboard record-events', file('record-events')),
  recordThroughput: new LuaScript('dashboard record-throughput', file('record-throughput')),
  readThroughput: new LuaScript('dashboard read-throughput', file('read-throughput')),
  showLocks: new LuaScript('dashboard show-locks', file('show-locks')),
  reportLocalWaiters: new LuaScript('dashboard report-local-waiters', file('report-local-waiters')),
};
