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
      const command = this.sharded ? sub.ssubscribe(channel) : sub.subscribe(channel);
      entry.subscribed = bounded(
        this.sharded ? 'SSUBSCRIBE' : 'SUBSCRIBE',
        command,
        this.timeoutMs,
      ).then(() => undefined);
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

  /** Closes the subscriber connection. */
  close(): void {
    this.closed = true;
    for (const entry of this.channels.values()) clearTimeout(entry.linger);
    this.channels.clear();
    this.subscriber?.disconnect();
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
