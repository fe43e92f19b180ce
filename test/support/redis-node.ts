import { Redis } from 'ioredis';

/** The host every test node (server, cluster node, sentinel) listens on. */
export const NODE_HOST = '127.0.0.1';

/**
 * Sends one command to the node on `port` over a connection of its own and disconnects. Never
 * retries and gives up after 2 s (to connect, then to answer): the node may be dead or frozen.
 */
export async function askNode(port: number, ...args: Array<string | number>): Promise<unknown> {
  const client = new Redis({
    host: NODE_HOST,
    port,
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
