import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/** A TCP proxy in front of a Redis server that can lose one reply the way a failover does. */
export interface ReplyCuttingProxy {
  /** `redis://` URL of the proxy. */
  url: string;
  /**
   * The next connection that sends `marker` (bytes of one command, as RESP) has the server's next reply
   * dropped and both sides closed: Redis ran the command, the client never hears it did, as when
   * a master is killed after it replicated a write and before its reply reached the client.
   */
  cutAfter(marker: string): void;
  /** How many times a connection sent a marker so far (the first send and any resend). */
  seen(marker: string): number;
  /** Replies dropped so far. */
  readonly cuts: number;
  close(): Promise<void>;
}

/** Starts a proxy on a free port that forwards to `redisUrl`. */
export async function startReplyCuttingProxy(redisUrl: string): Promise<ReplyCuttingProxy> {
  const target = new URL(redisUrl);
  const sockets = new Set<Socket>();
  const counts = new Map<string, number>();
  let armed: string | undefined;
  let cuts = 0;
  const server: Server = createServer((client) => {
    const upstream = createConnection(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    // The marker may straddle two chunks: the last chunk's tail is searched with the next one.
    let tail = '';
    let cutNextReply = false;
    client.on('data', (chunk) => {
      const text = tail + chunk.toString('latin1');
      for (const marker of counts.keys()) {
        const found = text.split(marker).length - 1 - (tail.split(marker).length - 1);
        counts.set(marker, counts.get(marker)! + found);
        if (found > 0 && armed === marker) {
          armed = undefined;
          cutNextReply = true;
        }
      }
      tail = text.slice(-256);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!cutNextReply) {
        client.write(chunk);
        return;
      }
      cuts++;
      client.destroy();
      upstream.destroy();
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    cutAfter(marker) {
      counts.set(marker, counts.get(marker) ?? 0);
      armed = marker;
    },
    seen: (marker) => counts.get(marker) ?? 0,
    get cuts() {
      return cuts;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
