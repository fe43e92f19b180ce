import type { Cluster, Redis } from 'ioredis';
import { nextTick } from './unfaked-ticks';

type Stream = Redis['stream'];

/**
 * Commands held at most before they are sent: enough to save most of the writes, few enough that
 * Redis works on the first ones while this process still prepares the rest. One write for a whole
 * burst would leave Redis idle until the burst is ready, then this process idle while Redis runs
 * it: in the bench's enqueue shape (50 producers) 4 per write ran about 1.7x as many jobs/s as one
 * write per tick, and 16 per write 1.3x.
 */
const MAX_HELD = 4;

/** Sockets held until the end of the current tick, with how many commands they hold. */
const held = new WeakMap<Stream, number>();

function release(stream: Stream): void {
  held.delete(stream);
  stream.uncork();
}

/**
 * Holds the client's socket writes until the end of the current tick, so that the commands that
 * concurrent callers send in this tick leave together (at most `MAX_HELD` per write): one system
 * call here and one read in Redis for several commands instead of one each. The commands, their
 * order and their replies are unchanged; a command only leaves after the microtasks of this tick
 * (or with the next ones) instead of at once. Does nothing on a `Cluster` instance (each master
 * has its own connection: pass the one of the command's master, `clusterMasterOf`; without it
 * every command on a Cluster was a system call of its own, most of the client CPU a pair cost
 * there, bench/cluster-cpu.ts) or a client that is not ready (its commands wait in ioredis'
 * offline queue).
 * @param client the connection the next command is sent on
 * @example
 * coalesceWrites(connection.client);
 * await connection.run(QUEUE_SCRIPTS.enqueue, keys, args);
 */
export function coalesceWrites(client: Redis | Cluster): void {
  const stream = (client as Partial<Redis>).stream;
  if (!stream || client.status !== 'ready') return;
  const count = held.get(stream);
  if (count === undefined) {
    // A command with nothing else in flight is not part of a burst (a serial caller): it leaves
    // at once; the commands that follow it in this tick are held.
    if (((client as Redis).commandQueue?.length ?? 0) === 0) return;
    stream.cork();
    nextTick(release, stream);
    held.set(stream, 1);
  } else if (count >= MAX_HELD) {
    // Sends what is held, and holds the next ones.
    stream.uncork();
    stream.cork();
    held.set(stream, 1);
  } else {
    held.set(stream, count + 1);
  }
}
