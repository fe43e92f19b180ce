import type { Cluster, Redis } from 'ioredis';
import { bounded } from './bounded';
import { clusterKeySlot } from './cluster-slot';

/** One `listen` call: its message listener and what to call when the channel was subscribed again. */
interface Listener {
  onMessage: (message: string) => void;
  onResubscribed?: () => void;
}

interface ChannelEntry {
  listeners: Set<Listener>;
  subscribed?: Promise<void>;
  /** Its subscription was answered (and not given up since). */
  active?: boolean;
  linger?: NodeJS.Timeout;
  /** Cluster: the hash slot of the channel, and the master that served it at the last check. */
  slot?: number;
  owner?: string;
}

/**
 * What was sent for a channel: subscriptions and unsubscriptions still in flight, and the last
 * one that Redis carried out (the last to succeed). ioredis may send a command again later
 * (retries after a closed connection or a MOVED), so replies can come in another order than the
 * calls were made: the subscription Redis holds is the last one answered.
 */
interface ChannelState {
  inFlight: number;
  last?: 'subscribe' | 'unsubscribe';
}

/** How long a channel stays subscribed after its last listener left, in ms. */
const LINGER_MS = 2_000;

/**
 * Delay between a topology signal and the re-subscription it causes, in ms: a failover emits
 * several signals within a few ms ('-node', 'refresh', 'subscribersReady'); one pass serves them.
 */
const RESYNC_DELAY_MS = 50;

/** A re-subscription that failed (the new master not reachable yet) is tried again after this. */
const RESYNC_RETRY_MS = 1_000;

/** Least time between two slot map refreshes of the subscriber that `refreshTopology` asks for. */
const REFRESH_MIN_INTERVAL_MS = 500;
/**
 * Refreshes of the subscriber's map after one `refreshTopology` while it still disagrees with the
 * command client's on a subscribed channel's master (the node it asked had not yet heard of the
 * failover): with `REFRESH_MIN_INTERVAL_MS`, about 5 s of trying.
 */
const REFRESH_FOLLOW_UPS = 10;

/**
 * One subscriber connection shared by every waiter of a module: channels are subscribed on first
 * use, reference-counted, and unsubscribed a little after the last listener leaves (so a hot key's
 * next waiter skips the SUBSCRIBE round trip). Uses sharded pub/sub (SSUBSCRIBE) on Cluster.
 *
 * A subscription that a topology change can drop is made again: after a reconnect of the
 * subscriber (single node, Sentinel) and, on Cluster, after ioredis reports a node gone, its
 * subscribers re-made, or a slot map in which the master of a channel's slot changed (a
 * failover), every channel that still has listeners is subscribed again (SSUBSCRIBE is idempotent)
 * and its listeners' `onResubscribed` runs, since messages published meanwhile were lost. So is a
 * channel whose last answered command was an unsubscription that ioredis sent again after a later
 * subscription (a retry across a failover).
 */
export class PubSubHub {
  private subscriber?: Redis | Cluster;
  private readonly channels = new Map<string, ChannelEntry>();
  private readonly states = new Map<string, ChannelState>();
  private closed = false;
  /** The wait for the subscriber to be ready that SUBSCRIBEs share, while one is under way. */
  private readying?: Promise<void>;
  /** Channels to subscribe again at the next pass, and its timer. */
  private readonly stale = new Set<string>();
  private resyncTimer?: NodeJS.Timeout;
  private wasReady = false;
  private lastRefresh = 0;
  private refreshTimer?: NodeJS.Timeout;
  /** Refreshes left while the two maps disagree (see `REFRESH_FOLLOW_UPS`). */
  private followUps = 0;

  /**
   * @param createSubscriber opens the dedicated subscriber connection (called once, lazily)
   * @param sharded use SSUBSCRIBE/`smessage` instead of SUBSCRIBE/`message`
   * @param timeoutMs bound of a SUBSCRIBE
   * @param commandOwnerOf Cluster: the master of a slot in the command client's map (which
   *   follows `MOVED`), to tell when the subscriber's map is still behind it
   */
  constructor(
    private readonly createSubscriber: () => Redis | Cluster,
    private readonly sharded: boolean,
    private readonly timeoutMs: number,
    private readonly commandOwnerOf?: (slot: number) => string | undefined,
  ) {}

  /**
   * Calls `onMessage` for every message on `channel` until the returned function is called.
   * Resolves once the subscription is active; rejects (typed, bounded) when it cannot be made.
   * @param onResubscribed called after the channel was subscribed again (a reconnect, a Cluster
   *   failover): messages published meanwhile were lost, so a waiter should check again
   */
  async listen(
    channel: string,
    onMessage: (message: string) => void,
    onResubscribed?: () => void,
  ): Promise<() => void> {
    if (this.closed) throw new Error('pub/sub hub is closed');
    let entry = this.channels.get(channel);
    if (!entry) {
      entry = { listeners: new Set() };
      this.channels.set(channel, entry);
    }
    clearTimeout(entry.linger);
    entry.linger = undefined;
    const listener: Listener = { onMessage, onResubscribed };
    entry.listeners.add(listener);
    const current = entry;
    const unlisten = () => this.unlisten(channel, current, listener);
    if (!entry.subscribed) {
      const sub = this.connection();
      if (this.sharded) {
        current.slot ??= clusterKeySlot(channel);
        current.owner = this.ownerOf(current.slot);
      }
      const operation = this.sharded ? 'SSUBSCRIBE' : 'SUBSCRIBE';
      const subscribed = this.ready(sub, operation).then(async () => {
        await bounded(operation, this.send(sub, channel, 'subscribe'), this.timeoutMs);
      });
      entry.subscribed = subscribed;
      subscribed.then(
        () => (current.active = current.subscribed === subscribed),
        () => (current.subscribed = undefined),
      );
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
   * Whether `channel` is subscribed now (a listener has it, or it lingers after the last one left):
   * a `listen` on it then resolves without a round trip.
   */
  isSubscribed(channel: string): boolean {
    return this.channels.get(channel)?.active === true;
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

  /**
   * Cluster: the command client found the slot map changed (it follows `MOVED` and refreshes its
   * map, e.g. when a waiter renews its place after a failover): the subscriber refreshes its own
   * map too (at most every 500 ms), so ioredis moves its sharded subscriptions and the hub
   * re-subscribes the channels whose master changed. This replaces a periodic refresh of the
   * subscriber's map: each one costs milliseconds of CPU (ioredis rebuilds and compares maps of
   * 16,384 slots), which, every second, was most of an idle module's CPU.
   */
  refreshTopology(): void {
    this.followUps = REFRESH_FOLLOW_UPS;
    this.scheduleRefresh();
  }

  /**
   * The subscriber's map refreshed: channels whose master changed are subscribed again; while it
   * still disagrees with the command client's map on a subscribed channel (it asked a node that
   * had not heard of the failover yet), it is refreshed again, a bounded number of times.
   */
  private onSubscriberRefresh(): void {
    this.checkOwners();
    if (this.followUps > 0 && this.behindCommandClient()) {
      this.followUps--;
      this.scheduleRefresh();
    }
  }

  private behindCommandClient(): boolean {
    if (!this.commandOwnerOf) return false;
    for (const entry of this.channels.values()) {
      if (entry.slot === undefined || !entry.subscribed) continue;
      const expected = this.commandOwnerOf(entry.slot);
      if (expected !== undefined && expected !== this.ownerOf(entry.slot)) return true;
    }
    return false;
  }

  private scheduleRefresh(): void {
    const sub = this.subscriber as Cluster | undefined;
    if (!this.sharded || !sub || this.closed || this.refreshTimer) return;
    const wait = this.lastRefresh + REFRESH_MIN_INTERVAL_MS - Date.now();
    this.refreshTimer = setTimeout(
      () => {
        this.refreshTimer = undefined;
        this.lastRefresh = Date.now();
        if (!this.closed && sub.status === 'ready') sub.refreshSlotsCache();
      },
      Math.max(0, wait),
    );
    this.refreshTimer.unref();
  }

  /** Closes the subscriber connection. */
  close(): void {
    this.closed = true;
    clearTimeout(this.resyncTimer);
    clearTimeout(this.refreshTimer);
    for (const entry of this.channels.values()) clearTimeout(entry.linger);
    this.channels.clear();
    this.stale.clear();
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
        if (entry) for (const listener of entry.listeners) listener.onMessage(message);
      });
      // Errors surface as failed SUBSCRIBEs; waiters then fall back to polling.
      sub.on('error', () => undefined);
      if (this.sharded) {
        // A master gone, ioredis' sharded subscribers re-made after a topology change: every
        // channel is subscribed again, whatever ioredis did (its own resubscription forgets a
        // channel whose unsubscription it retried, and the order of its retries is not ours).
        for (const event of ['-node', 'subscribersReady']) sub.on(event, () => this.resyncAll());
        sub.on('refresh', () => this.onSubscriberRefresh());
      }
      // ioredis subscribes again on reconnect; what was published meanwhile is lost.
      sub.on('ready', () => {
        if (this.wasReady) this.resyncAll();
        this.wasReady = true;
      });
      this.subscriber = sub;
    }
    return this.subscriber;
  }

  /** The node serving `slot` in the subscriber's slot map (Cluster). */
  private ownerOf(slot: number): string | undefined {
    return (this.subscriber as Cluster | undefined)?.slots?.[slot]?.[0];
  }

  /** A new slot map (Cluster): the channels whose slot moved to another master are subscribed again. */
  private checkOwners(): void {
    for (const [channel, entry] of this.channels) {
      if (entry.slot === undefined || !entry.subscribed) continue;
      const owner = this.ownerOf(entry.slot);
      if (owner === entry.owner) continue;
      // Subscribed before the subscriber knew the map: its first map is no change.
      const known = entry.owner !== undefined;
      entry.owner = owner;
      if (known) this.resync(channel);
    }
  }

  private resyncAll(): void {
    for (const channel of this.channels.keys()) this.resync(channel);
  }

  /** Subscribes `channel` again at the next pass (after `delay` ms), if it still has listeners. */
  private resync(channel: string, delay = RESYNC_DELAY_MS): void {
    if (this.closed) return;
    this.stale.add(channel);
    if (this.resyncTimer) return;
    this.resyncTimer = setTimeout(() => {
      this.resyncTimer = undefined;
      this.resubscribeStale();
    }, delay);
    this.resyncTimer.unref();
  }

  private resubscribeStale(): void {
    const sub = this.subscriber;
    if (!sub || this.closed) return;
    const channels = [...this.stale];
    this.stale.clear();
    const operation = this.sharded ? 'SSUBSCRIBE (again)' : 'SUBSCRIBE (again)';
    for (const channel of channels) {
      const entry = this.channels.get(channel);
      // Not subscribed yet (the first SUBSCRIBE is under way or failed): nothing to redo.
      if (!entry?.subscribed) continue;
      if (this.sharded) entry.owner = this.ownerOf(entry.slot!);
      this.ready(sub, operation)
        .then(() => bounded(operation, this.send(sub, channel, 'subscribe'), this.timeoutMs))
        .then(
          () => {
            if (this.channels.get(channel) !== entry) return;
            for (const listener of entry.listeners) listener.onResubscribed?.();
          },
          // The new master is not reachable yet: try again while anyone listens.
          () => this.resync(channel, RESYNC_RETRY_MS),
        );
    }
  }

  /**
   * Sends SUBSCRIBE or UNSUBSCRIBE (sharded on Cluster) for `channel`. Once nothing is in flight
   * for it any more, the last command Redis carried out must match what the hub wants (a channel
   * with an entry is subscribed, one without is not); when it does not, the right one is sent.
   */
  private send(
    sub: Redis | Cluster,
    channel: string,
    kind: 'subscribe' | 'unsubscribe',
  ): Promise<unknown> {
    let state = this.states.get(channel);
    if (!state) {
      state = { inFlight: 0 };
      this.states.set(channel, state);
    }
    const s = state;
    s.inFlight++;
    const command =
      kind === 'subscribe'
        ? this.sharded
          ? sub.ssubscribe(channel)
          : sub.subscribe(channel)
        : this.sharded
          ? sub.sunsubscribe(channel)
          : sub.unsubscribe(channel);
    const settled = (ok: boolean) => {
      s.inFlight--;
      if (ok) s.last = kind;
      if (s.inFlight > 0 || this.closed) return;
      if (this.states.get(channel) === s) this.states.delete(channel);
      const entry = this.channels.get(channel);
      if (s.last === 'unsubscribe' && entry?.subscribed) {
        // An unsubscription answered after a subscription: subscribe again.
        this.resync(channel);
      } else if (s.last === 'subscribe' && !entry) {
        // A subscription answered after the channel was given up.
        this.send(sub, channel, 'unsubscribe').catch(() => undefined);
      }
    };
    command.then(
      () => settled(true),
      () => settled(false),
    );
    return command;
  }

  private unlisten(channel: string, entry: ChannelEntry, listener: Listener): void {
    entry.listeners.delete(listener);
    if (entry.listeners.size > 0 || entry.linger || this.closed) return;
    entry.linger = setTimeout(() => {
      entry.linger = undefined;
      if (entry.listeners.size > 0 || this.channels.get(channel) !== entry) return;
      this.channels.delete(channel);
      // Also when the first SUBSCRIBE timed out: it may have been carried out since.
      if (this.subscriber)
        this.send(this.subscriber, channel, 'unsubscribe').catch(() => undefined);
    }, LINGER_MS);
    entry.linger.unref();
  }
}
