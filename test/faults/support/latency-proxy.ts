import { createServer, Socket, type AddressInfo, type Server } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 that delays every chunk by `delayMs` in both directions, keeping the
 * order of each direction: a round trip through it costs at least `2 × delayMs` more. `hold()`
 * keeps every chunk (a partition that leaves the connections open, as a dropped link does until
 * TCP gives up) and `resume()` delivers them all, in order: requests sent during the partition
 * reach the server after the heal.
 */
export class LatencyProxy {
  private readonly sockets = new Set<Socket>();
  private server?: Server;
  private held = false;
  /** The flush of each direction of each connection, for `resume()`. */
  private readonly flushes = new Set<() => void>();
  /** Chunks forwarded so far (both directions). */
  chunks = 0;
  /** `redis://127.0.0.1:<port>` of the proxy, once started. */
  url = '';

  /** @param delayMs one-way delay added to every chunk; may be changed at any time */
  constructor(
    private readonly upstreamPort: number,
    public delayMs: number,
  ) {}

  /** Starts listening on a free port; resolves the proxy's URL. */
  async start(): Promise<string> {
    const server = createServer({ allowHalfOpen: true }, (client) => this.connect(client));
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.url = `redis://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this.url;
  }

  /** From now on forwards nothing: every chunk waits (both directions) until `resume()`. */
  hold(): void {
    this.held = true;
  }

  /** Forwards the chunks kept since `hold()`, in arrival order, and goes on as before. */
  resume(): void {
    this.held = false;
    for (const flush of this.flushes) flush();
  }

  /** Stops listening and drops every connection. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) =>
      this.server ? this.server.close(() => resolve()) : resolve(),
    );
  }

  private connect(client: Socket): void {
    const upstream = new Socket({ allowHalfOpen: true });
    for (const socket of [client, upstream]) {
      // Without it, Nagle's algorithm holds a small chunk written while the previous one is not yet
      // acknowledged, for up to the peer's delayed-ACK time (40 ms on Linux), on top of `delayMs`.
      socket.setNoDelay(true);
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    this.pipe(client, upstream);
    this.pipe(upstream, client);
    upstream.connect(this.upstreamPort, '127.0.0.1');
  }

  /**
   * Forwards `from` to `to`, each chunk `delayMs` after it arrived, in arrival order; when `from`
   * ends, ends `to` after the last delayed chunk (a reply followed by a close, as to QUIT, must
   * still arrive).
   */
  private pipe(from: Socket, to: Socket): void {
    const queue: Array<{ at: number; chunk: Buffer }> = [];
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    const flush = () => {
      clearTimeout(timer);
      timer = undefined;
      if (this.held) return;
      const now = Date.now();
      while (queue.length > 0 && queue[0].at <= now) {
        const { chunk } = queue.shift()!;
        this.chunks++;
        if (!to.destroyed) to.write(chunk);
      }
      if (queue.length > 0) timer = setTimeout(flush, queue[0].at - now);
      else if (ended && !to.destroyed) to.end();
    };
    this.flushes.add(flush);
    to.once('close', () => this.flushes.delete(flush));
    from.on('data', (chunk: Buffer) => {
      // A later chunk never overtakes an earlier one, even when delayMs was lowered meanwhile.
      const last = queue.length > 0 ? queue[queue.length - 1].at : 0;
      queue.push({ at: Math.max(Date.now() + this.delayMs, last), chunk });
      if (!this.held) timer ??= setTimeout(flush, queue[0].at - Date.now());
    });
    from.on('end', () => {
      ended = true;
      if (!timer) flush();
    });
  }
}
