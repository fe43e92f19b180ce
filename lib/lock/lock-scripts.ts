import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';
import { FENCE_COUNTER_PRELUDES, LINE_PRELUDES } from '../waiting/waiting-scripts';

const file = (name: string) => join(__dirname, 'scripts', `${name}.lua`);
/**
 * The helpers of the scripts that read, join or renew a lock's line (the line's own, then marking
 * the holder and handing over), with the fence counter handing over needs.
 */
const LINE = [...FENCE_COUNTER_PRELUDES, ...LINE_PRELUDES, file('mark-waited'), file('hand-over')];

/** The lock's Lua scripts, read once per process. */
export const LOCK_SCRIPTS = {
  // The fast paths come before the helpers they do not need: a call they answer sets none up.
  acquire: new LuaScript(
    'lock acquire',
    file('acquire'),
    file('lock-keys'),
    ...FENCE_COUNTER_PRELUDES,
    file('acquire-fast'),
    ...LINE_PRELUDES,
    file('mark-waited'),
  ),
  release: new LuaScript(
    'lock release',
    file('release'),
    file('lock-keys'),
    file('release-fast'),
    ...LINE,
  ),
  extend: new LuaScript('lock extend', file('extend')),
  extendOrRelock: new LuaScript('lock extend-or-relock', file('extend-or-relock')),
  quorumAcquire: new LuaScript('lock quorum-acquire', file('quorum-acquire'), ...LINE),
  quorumRaiseFence: new LuaScript(
    'lock quorum-raise-fence',
    file('quorum-raise-fence'),
    ...FENCE_COUNTER_PRELUDES,
  ),
  leaveLine: new LuaScript('lock leave-line', file('leave-line'), ...LINE, file('shared-common')),
  handoff: new LuaScript('lock handoff', file('handoff'), ...LINE),
  renew: new LuaScript('lock renew', file('renew'), ...LINE),
  acquireShared: new LuaScript(
    'lock acquire-shared',
    file('acquire-shared'),
    ...LINE,
    file('shared-common'),
  ),
  releaseShared: new LuaScript(
    'lock release-shared',
    file('release-shared'),
    ...LINE,
    file('shared-common'),
  ),
  extendShared: new LuaScript('lock extend-shared', file('extend-shared')),
  inspect: new LuaScript('lock inspect', file('inspect')),
};
