import type { Cluster, Redis } from 'ioredis';

type Stream = Redis['stream'];

/** Sockets held until the end of the current tick. */
const corked = new WeakSet<Stream>();

function uncork(stream: Stream): void {
  corked.delete(stream);
  stream.uncork();
}

/**
 * Holds the client's socket writes until the end of the current tick, so that the commands that
 * concurrent callers send in this tick leave in one write: one system call in this process and one
 * read in Redis instead of one per command. The commands, their order and their replies are
 * unchanged; a command only leaves after the microtasks of this tick instead of during them.
 * Does nothing on a Cluster (each node has its own connection) or a client that is not ready (its
 * commands wait in ioredis' offline queue).
 * @param client the connection the next commands are sent on
 * @example
 * coalesceWrites(connection.client);
 * await connection.run(QUEUE_SCRIPTS.enqueue, keys, args);
 */
export function coalesceWrites(client: Redis | Cluster): void {
  const stream = (client as Partial<Redis>).stream;
  if (!stream || client.status !== 'ready' || corked.has(stream)) return;
  corked.add(stream);
  stream.cork();
  process.nextTick(uncork, stream);
}
