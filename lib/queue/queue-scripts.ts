import { join } from 'node:path';
import { LuaScript } from '../redis/lua-script';

const file = (name: string) => join(__dirname, 'scripts', `${name}.lua`);
const include = (name: string) => join(__dirname, 'scripts', 'includes', `${name}.lua`);
/** Helpers of the scripts that read a task's info (parse, group member, priority score, ring). */
const TASK_INFO = include('task-info');
/** `emit`: one entry of the queue's event stream. */
const EVENTS = include('events');
/** Bounds of the finished sets (`trimFinished`, `forgetAll`, `variadic`). */
const FINISHED = include('finished');
/** Flows: a child's outcome reaches its parent (`childEnded`, `applyChild`, `closeParent`). */
const FLOW = include('flow');
/** Expiring tasks: a task's deadline, taking a waiting task out (`expiryOf`, `unqueue`). */
const EXPIRY = include('expiry');

/**
 * The queue's Lua scripts, read once per process (only `QueueStore` runs them). claim.lua also
 * settles (ack, nack, release): it is there once per operation name (`ack`, `nack`, `release`: one
 * script, one SHA), so that a failed call says what it was doing ("Redis queue ack failed").
 */
export const QUEUE_SCRIPTS = {
  enqueue: new LuaScript('queue enqueue', file('enqueue'), TASK_INFO, EVENTS, EXPIRY, FINISHED),
  pop: new LuaScript('queue pop', file('pop'), EVENTS, FLOW),
  top: new LuaScript('queue top', file('top')),
  dequeue: new LuaScript('queue dequeue', file('dequeue'), EVENTS, FLOW),
  claim: new LuaScript('queue claim', file('claim'), TASK_INFO, EVENTS, FINISHED, FLOW, EXPIRY),
  ack: new LuaScript('queue ack', file('claim'), TASK_INFO, EVENTS, FINISHED, FLOW, EXPIRY),
  nack: new LuaScript('queue nack', file('claim'), TASK_INFO, EVENTS, FINISHED, FLOW, EXPIRY),
  release: new LuaScript('queue release', file('claim'), TASK_INFO, EVENTS, FINISHED, FLOW, EXPIRY),
  extendLease: new LuaScript('queue extend-lease', file('extend-lease')),
  updateTask: new LuaScript('queue update-task', file('update-task'), EVENTS),
  cancel: new LuaScript('queue cancel', file('cancel'), TASK_INFO, EVENTS, FINISHED, FLOW),
  stats: new LuaScript('queue stats', file('stats')),
  deadLetters: new LuaScript('queue dead-letters', file('dead-letters')),
  requeueDead: new LuaScript('queue requeue-dead', file('requeue-dead'), TASK_INFO, EVENTS, EXPIRY),
  inspect: new LuaScript('queue inspect', file('inspect'), TASK_INFO),
  remove: new LuaScript('queue remove', file('remove'), TASK_INFO, EVENTS, FLOW),
  config: new LuaScript('queue config', file('config'), EVENTS),
  clean: new LuaScript('queue clean', file('clean'), EVENTS, FINISHED),
  drain: new LuaScript('queue drain', file('drain'), EVENTS, FINISHED, FLOW),
  obliterate: new LuaScript('queue obliterate', file('obliterate'), EVENTS),
  log: new LuaScript('queue log', file('log'), EVENTS),
  addFlow: new LuaScript('queue add-flow', file('add-flow'), TASK_INFO, EVENTS, EXPIRY),
  flowApply: new LuaScript('queue flow-apply', file('flow-apply'), EVENTS, FLOW),
  workers: new LuaScript('queue workers', file('workers')),
  recordMetrics: new LuaScript('queue record-metrics', file('record-metrics')),
};
