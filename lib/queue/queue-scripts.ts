import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';

const file = (name: string) => join(__dirname, 'scripts', `${name}.lua`);

/** The queue's Lua scripts (one per operation), read once per process. */
export const QUEUE_SCRIPTS = {
  enqueue: new LuaScript('queue enqueue', file('enqueue')),
  pop: new LuaScript('queue pop', file('pop')),
  top: new LuaScript('queue top', file('top')),
  dequeue: new LuaScript('queue dequeue', file('dequeue')),
  claim: new LuaScript('queue claim', file('claim')),
  ack: new LuaScript('queue ack', file('ack')),
  nack: new LuaScript('queue nack', file('nack')),
  extendLease: new LuaScript('queue extend-lease', file('extend-lease')),
  release: new LuaScript('queue release', file('release')),
  stats: new LuaScript('queue stats', file('stats')),
  deadLetters: new LuaScript('queue dead-letters', file('dead-letters')),
  requeueDead: new LuaScript('queue requeue-dead', file('requeue-dead')),
};
