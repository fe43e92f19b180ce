import { Redis } from 'ioredis';

/** The host every test node (server, cluster node, sentinel) listens on. */
export const NODE_HOST = '127.0.0.1';

/**
 * Sends one command to the node on `port` over a connection of its own and disconnects. Never
 * retries and gives up after 2 s (to connect, then to answer): the node may be dead or frozen.
 */
export function askNode(port: number, ...args: Array<string | number>): Promise<unknown> {
  return askNodeAt({ host: NODE_HOST, port }, ...args);
}

/** `askNode` for a node on another host (e.g. in a network namespace of the partition suite). */
export async function askNodeAt(
  node: { host: string; port: number },
  ...args: Array<string | number>
): Promise<unknown> {
  const client = new Redis({
    host: node.host,
    port: node.port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2_000,
    commandTimeout: 2_000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(String(args[0]), ...args.slice(1));
  } finally {
    client.disconnect();
  }
}
