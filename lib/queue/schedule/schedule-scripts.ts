import { join } from 'node:path';
import { LuaScript } from '../../redis/lua-script';

const file = (name: string) => join(__dirname, 'scripts', `${name}.lua`);

/** The Lua scripts of queue schedules, read once per process. */
export const QUEUE_SCHEDULE_SCRIPTS = {
  upsert: new LuaScript('queue schedule', file('upsert-schedule')),
  remove: new LuaScript('queue unschedule', file('remove-schedule')),
  read: new LuaScript('queue schedules', file('read-schedules')),
  readOne: new LuaScript('queue schedule read', file('read-schedule')),
  fire: new LuaScript(
    'queue schedule tick',
    file('fire-schedule'),
    join(__dirname, '..', 'scripts', 'includes', 'events.lua'),
  ),
};
