import type { Cluster, Redis } from 'ioredis';
import { bounded } from './bounded';

interface ChannelEntry {
  listeners: Set<(message: string) => void>;
  subscribed?: Promise<void>;
  linger?: NodeJS.Timeout;
}

/** How long a channel stays subscribed after its last listener left, in ms. */
const LINGER_MS = 2_000;

/**
 * One subscriber connection shared by every waiter of a module: channels are subscribed on first
 * use, reference-counted, and unsubscribed a little after the last listener leaves (so a hot key's
 * next waiter skips the SUBSCRIBE round trip). Uses sharded pub/sub (SSUBSCRIBE) on Cluster.
 */
export class PubSubHub {
  private subscriber?: Redis | Cluster;
  private readonly channels = new Map<string, ChannelEntry>();
  private closed = false;
  /** The wait for the subscriber to be ready that SUBSCRIBEs share, while one is under way. */
  private readying?: Promise<void>;

  /**
   * @param createSubscriber opens the dedicated subscriber connection (called once, lazily)
   * @param sharded use SSUBSCRIBE/`smessage` instead of SUBSCRIBE/`message`
   * @param timeoutMs bound of a SUBSCRIBE
   */
  constructor(
    private readonly createSubscriber: () => Redis | Cluster,
    private readonly sharded: boolean,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Calls `onMessage` for every message on `channel` until the returned function is called.
   * Resolves once the subscription is active; rejects (typed, bounded) when it cannot be made.
   */
  async listen(channel: string, onMessage: (message: string) => void): Promise<() => void> {
    if (this.closed) throw new Error('pub/sub hub is closed');
    let entry = this.channels.get(channel);
    if (!entry) {
      entry = { listeners: new Set() };
      this.channels.set(channel, entry);
    }
    clearTimeout(entry.linger);
    entry.linger = undefined;
    entry.listeners.add(onMessage);
    const current = entry;
    const unlisten = () => this.unlisten(channel, current, onMessage);
    if (!entry.subscribed) {
      const sub = this.connection();
      const operation = this.sharded ? 'SSUBSCRIBE' : 'SUBSCRIBE';
      entry.subscribed = this.ready(sub, operation).then(async () => {
        const command = this.sharded ? sub.ssubscribe(channel) : sub.subscribe(channel);
        await bounded(operation, command, this.timeoutMs);
      });
      entry.subscribed.catch(() => (current.subscribed = undefined));
    }
    try {
      await entry.subscribed;
    } catch (err) {
      unlisten();
      throw err;
    }
    return unlisten;
  }

  /**
   * PINGs the subscriber connection within `ms` (health checks); resolves `false` without a PING
   * when no subscriber was needed yet.
   */
  async ping(ms: number): Promise<boolean> {
    const sub = this.subscriber;
    if (!sub) return false;
    await bounded('PING (subscriber)', sub.ping(), ms);
    return true;
  }

  /** Closes the subscriber connection. */
  close(): void {
    this.closed = true;
    for (const entry of this.channels.values()) clearTimeout(entry.linger);
    this.channels.clear();
    this.subscriber?.disconnect();
  }

  /**
   * Resolves once `sub` is ready, within `timeoutMs`; connects it if it was made with `lazyConnect`.
   *
   * Why: a SUBSCRIBE sent after the socket connected but before ioredis's ready check (INFO) puts
   * the connection in subscriber mode under that check; since ioredis 5.8.2 the check is sent only
   * after the CLIENT SETINFO replies, so the INFO fails, ioredis drops the connection and rejects
   * the SUBSCRIBEs it had queued (ioredis issue 2037), and those waiters only poll. Waiting is
   * chosen over turning the ready check off in the copy: it holds for any ioredis version and any
   * options the user's client was made with (`enableOfflineQueue: false`, `lazyConnect`), for the
   * Cluster copy too, and after every reconnect, where ioredis itself resubscribes only when ready.
   */
  private ready(sub: Redis | Cluster, operation: string): Promise<void> {
    if (sub.status === 'ready') return Promise.resolve();
    if (!this.readying) {
      let onReady!: () => void;
      let onEnd!: () => void;
      const ready = new Promise<void>((resolve, reject) => {
        onReady = resolve;
        onEnd = () => reject(new Error('Connection is closed.'));
      });
      sub.once('ready', onReady).once('end', onEnd);
      if (sub.status === 'wait') sub.connect().catch(() => undefined);
      this.readying = bounded(
        `${operation} (waiting for the connection)`,
        ready,
        this.timeoutMs,
      ).finally(() => {
        sub.off('ready', onReady).off('end', onEnd);
        this.readying = undefined;
      });
    }
    return this.readying;
  }

  private connection(): Redis | Cluster {
    if (!this.subscriber) {
      const sub = this.createSubscriber();
      sub.on(this.sharded ? 'smessage' : 'message', (channel: string, message: string) => {
        const entry = this.channels.get(channel);
        if (entry) for (const listener of entry.listeners) listener(message);
      });
      // Errors surface as failed SUBSCRIBEs; waiters then fall back to polling.
      sub.on('error', () => undefined);
      this.subscriber = sub;
    }
    return this.subscriber;
  }

  private unlisten(channel: string, entry: ChannelEntry, listener: (m: string) => void): void {
    entry.listeners.delete(listener);
    if (entry.listeners.size > 0 || entry.linger || this.closed) return;
    entry.linger = setTimeout(() => {
      entry.linger = undefined;
      if (entry.listeners.size > 0 || this.channels.get(channel) !== entry) return;
      this.channels.delete(channel);
      if (entry.subscribed && this.subscriber) {
        const sub = this.subscriber;
        const command = this.sharded ? sub.sunsubscribe(channel) : sub.unsubscribe(channel);
        command.catch(() => undefined);
      }
    }, LINGER_MS);
    entry.linger.unref();
  }
}
