import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';

const file = (name: string) => join(__dirname, 'scripts', `${name}.lua`);
/** Helpers of the scripts that read a task's info (parse, group member, priority score, ring). */
const TASK_INFO = file('task-info');

/**
 * The queue's Lua scripts, read once per process. claim.lua also settles (ack, nack, release): it
 * is there once per operation name (`ack`, `nack`, `release`: one script, one SHA), so that a
 * failed call says what it was doing ("Redis queue ack failed").
 */
export const QUEUE_SCRIPTS = {
  enqueue: new LuaScript('queue enqueue', file('enqueue'), TASK_INFO),
  pop: new LuaScript('queue pop', file('pop')),
  top: new LuaScript('queue top', file('top')),
  dequeue: new LuaScript('queue dequeue', file('dequeue')),
  claim: new LuaScript('queue claim', file('claim'), TASK_INFO),
  ack: new LuaScript('queue ack', file('claim'), TASK_INFO),
  nack: new LuaScript('queue nack', file('claim'), TASK_INFO),
  release: new LuaScript('queue release', file('claim'), TASK_INFO),
  extendLease: new LuaScript('queue extend-lease', file('extend-lease')),
  stats: new LuaScript('queue stats', file('stats')),
  deadLetters: new LuaScript('queue dead-letters', file('dead-letters')),
  requeueDead: new LuaScript('queue requeue-dead', file('requeue-dead'), TASK_INFO),
  inspect: new LuaScript('queue inspect', file('inspect'), TASK_INFO),
  remove: new LuaScript('queue remove', file('remove'), TASK_INFO),
  config: new LuaScript('queue config', file('config')),
};
