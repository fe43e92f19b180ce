import { join } from 'node:path';
import { FENCE_COUNTER_PRELUDE } from '../fencing/fenced-scripts';
import { LuaScript } from '../redis/lua-script';

const file = (name: string) => join(__dirname, 'scripts', `${name}.lua`);
/** The helpers of the scripts that read a lock's line (first live waiter, handing over). */
const LINE = file('line');

/** The lock's Lua scripts, read once per process. */
export const LOCK_SCRIPTS = {
  acquire: new LuaScript('lock acquire', file('acquire'), FENCE_COUNTER_PRELUDE, LINE),
  release: new LuaScript('lock release', file('release'), FENCE_COUNTER_PRELUDE, LINE),
  extend: new LuaScript('lock extend', file('extend')),
  extendOrRelock: new LuaScript('lock extend-or-relock', file('extend-or-relock')),
  leaveLine: new LuaScript('lock leave-line', file('leave-line')),
  handoff: new LuaScript('lock handoff', file('handoff'), FENCE_COUNTER_PRELUDE, LINE),
  renew: new LuaScript('lock renew', file('renew'), LINE),
  acquireShared: new LuaScript(
    'lock acquire-shared',
    file('acquire-shared'),
    LINE,
    file('shared-common'),
  ),
  releaseShared: new LuaScript(
    'lock release-shared',
    file('release-shared'),
    FENCE_COUNTER_PRELUDE,
    LINE,
    file('shared-common'),
  ),
  extendShared: new LuaScript('lock extend-shared', file('extend-shared')),
  inspect: new LuaScript('lock inspect', file('inspect')),
};
