// setupFilesAfterEnv of the contract suite on the in-memory backend (jest.config.js, project
// 'memory'): the contract files run unchanged, except the tests below, which need what only a
// real redis-server has. They are reported as skipped there, and run on redis-server (project
// 'redis') as always.

const OTHER_PROCESSES = 'other processes (child apps) reach only a real redis-server';

/** Tests (by name) that stay on redis-server, with why. */
export const NEEDS_REDIS_SERVER: Readonly<Record<string, string>> = {
  'keeps the lease tokens of a few leases in a hashtable, not a listpack searched end to end':
    'OBJECT ENCODING (how redis-server stores a hash)',
  'keeps 14 days of busy minutes in at most 150 KB, and every key expires':
    'MEMORY USAGE (how much memory redis-server allocates for a key)',
  'a promoted replica that missed the last grants hands out higher fences (two real servers)':
    'replication between two redis-servers',
  'fails with RedisUnavailableError within commandTimeoutMs, and works again after a restart':
    'stops and restarts redis-server',
  'keeps working after Redis restarts': 'stops and restarts redis-server',
  'an attempt whose reply times out leaves no read hold behind once Redis runs it':
    'a Lua script that keeps redis-server busy past commandTimeoutMs',
  'looks every waiter up again when its connection was killed, and sees events trimmed meanwhile':
    'CLIENT KILL of a connection',
  '3 processes x 40 callers x 5 items: exact counter, no overlap, fences strictly increasing batch after batch':
    OTHER_PROCESSES,
  '4 processes x 32 callers: exact counter, no overlap, fences strictly increasing in the order sections ran':
    OTHER_PROCESSES,
  'bounds the bypass: at most maxLocalHandoffs local handoffs in a row while another process waits':
    OTHER_PROCESSES,
  'parked callers cost the renewal only: one call per second per process, whatever their number':
    OTHER_PROCESSES,
  'a SIGKILLed process, holding or waiting, does not stall the others beyond one TTL and entry deadline':
    OTHER_PROCESSES,
  'a SIGSTOPped process loses its place once its entry deadline passed, and is not handed the lock while frozen':
    OTHER_PROCESSES,
  '3 processes of readers and writers: readers overlap, a writer is alone, writer fences strictly increase':
    OTHER_PROCESSES,
  'limit 5 over 6 processes x 8 callers: never more than 5 inside, grants in line order':
    OTHER_PROCESSES,
  "a SIGKILLed holder's permit comes back after its TTL": OTHER_PROCESSES,
  'lets many callers of a process wait outside a line without a listener-leak warning':
    OTHER_PROCESSES,
  'refuses the write of a worker frozen (SIGSTOP) past its lease once the worker that took the task over wrote: one write accepted, one refused':
    OTHER_PROCESSES,
  'aborts the signal of each of 200 running handlers; each task ends cancelled after 1 attempt, none retried or left leased':
    OTHER_PROCESSES,
  'ends each task of a cancel racing with its completion in exactly one of completed / cancelled, as the reply says':
    OTHER_PROCESSES,
  '3 instances upserting the same schedules: each tick processed exactly once; an upsert changes the interval without a double tick; unschedule stops them':
    OTHER_PROCESSES,
  '8 producers in 4 processes racing for a bound of 100: exactly 100 added, every other call refused':
    OTHER_PROCESSES,
};

type TestFn = typeof it;

function skipping(fn: TestFn): TestFn {
  const wrapped = ((name: unknown, ...rest: unknown[]) =>
    typeof name === 'string' && name in NEEDS_REDIS_SERVER
      ? fn.skip(name, ...(rest as [() => void]))
      : fn(name as string, ...(rest as [() => void]))) as TestFn;
  return Object.assign(wrapped, fn);
}

globalThis.it = skipping(globalThis.it);
globalThis.test = skipping(globalThis.test);
