import { Cluster, Redis, type ClusterOptions } from 'ioredis';
import { RedactingLogger } from '../redaction/redacting-logger';
import type { ResolvedModuleOptions } from '../options/resolve-options';
import type {
  EvictionPolicyMode,
  RedisClusterConnectionOptions,
} from '../interfaces/redis-lock-module-options.interface';
import { RedisCommandError } from '../errors/redis-command.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { rememberSecrets } from '../redaction/redact-credentials';
import { bounded } from './bounded';
import {
  EVICTION_POLICY_FIX,
  evictionWarning,
  readEvictionPolicy,
  SAFE_EVICTION_POLICY,
  uncheckedWarning,
} from './eviction-policy';
import { clusterMasterOf } from './cluster-slot';
import { coalesceWrites } from './coalesce-writes';
import type { LuaScript } from './lua-script';
import { PubSubHub } from './pubsub-hub';
import { isSentinelClient, ReplicaWatch } from './replica-watch';
import { ThrottledWarning } from './throttled-warning';
import { reviveAfterFailedConnect } from './revive-ended';
import { setImmediateUnfaked, unfakedNowMs } from './unfaked-ticks';

type Client = Redis | Cluster;

/**
 * The subscriber of a Cluster: SSUBSCRIBE needs a connection to the master of each channel's
 * slot (`shardedSubscribers`). After a failover ioredis moves the subscriptions to the new
 * masters only when it refreshes its slot map: when a subscriber connection ends (a killed
 * master), and when the command client refreshed its own map (`PubSubHub.refreshTopology`). No
 * periodic refresh (`slotsRefreshInterval: 0`): each costs milliseconds of CPU.
 */
const CLUSTER_SUBSCRIBER_OPTIONS = { shardedSubscribers: true, slotsRefreshInterval: 0 };

/** The database `client` is in: the one it was last switched to with `SELECT`, else its option. */
function selectedDb(client: Redis): number | undefined {
  // ioredis keeps the database it selects (and selects again after a reconnect) here.
  const selected = (client as unknown as { condition?: { select?: unknown } }).condition?.select;
  return typeof selected === 'number' ? selected : client.options.db;
}

function isClient(value: unknown): value is Client {
  // Duck-typed so that an instance from another copy of ioredis is still recognised.
  const v = value as Partial<Redis> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.evalsha === 'function' &&
    typeof v.duplicate === 'function'
  );
}

function isClusterOptions(value: unknown): value is RedisClusterConnectionOptions {
  return typeof value === 'object' && value !== null && Array.isArray((value as any).cluster);
}

/**
 * The module's Redis: the command client (created from the options, or the instance the user
 * passed in), a lazily created subscriber connection for lock wake-ups, and bounded calls.
 * Closes only what it created.
 */
export class RedisLockConnection {
  readonly client: Client;
  /** True when the module created the client and must close it. */
  readonly owned: boolean;
  readonly isCluster: boolean;
  readonly hub: PubSubHub;
  /** Quorum mode: one connection per independent master of the `nodes` option (else empty). */
  readonly nodes: readonly RedisLockConnection[];
  /**
   * Sentinel with `waitForReplicas` unset only: how many replicas the current master has (locks
   * wait for one by default when it has any, or when they cannot be counted; see
   * `waitForReplicas`). Unset for a plain Redis or a Cluster.
   */
  readonly replicaWatch?: ReplicaWatch;
  private readonly logger = new RedactingLogger('RedisLockModule');
  private readonly errors = new ThrottledWarning(this.logger);
  private readonly extra = new Set<Client>();
  /** The connection of replica-confirmed writes (`replicaWaitClient`), once used. */
  private waitClient?: Client;
  private wasReady: boolean;
  /** `close()` was called: an ended connection stays ended. */
  private closing = false;
  /** Cluster: the client refreshed its slot map; so does the subscriber. */
  private readonly onRefresh = () => this.hub.refreshTopology();
  /** Unregisters this connection's credentials from the redaction of errors and logs. */
  private readonly forgetSecrets: () => void;

  constructor(readonly options: ResolvedModuleOptions) {
    const redis = options.redis;
    if (isClient(redis)) {
      this.client = redis;
      this.owned = false;
    } else if (isClusterOptions(redis)) {
      this.client = new Cluster(redis.cluster, redis.options);
      this.owned = true;
    } else if (typeof redis === 'string') {
      this.client = new Redis(redis);
      this.owned = true;
    } else {
      // Sentinel: reconnect as soon as a sentinel announces a new master (+switch-master), not
      // only when the old master's connection breaks: a master cut off from its sentinels and
      // replicas stays reachable, and every write it answers is one the new master never sees.
      const sentinel = Array.isArray(redis.sentinels) && redis.sentinels.length > 0;
      this.client = new Redis(
        sentinel && redis.failoverDetector === undefined
          ? { ...redis, failoverDetector: true }
          : redis,
      );
      this.owned = true;
    }
    this.isCluster = (this.client as { isCluster?: boolean }).isCluster === true;
    // Errors and logs of this library never show these (`RedisLockError`, `RedactingLogger`):
    // the option as given, and what the client holds (a URL parsed into `password`, a Cluster's
    // `redisOptions` and startup nodes, a user's client's own options).
    this.forgetSecrets = rememberSecrets([
      redis,
      this.client.options,
      (this.client as unknown as { startupNodes?: unknown }).startupNodes,
    ]);
    if (this.owned) this.client.on('error', (err: Error) => this.logError('connection', err));
    if (this.owned) this.keepAlive(this.client);
    this.wasReady = this.client.status === 'ready';
    if (!this.wasReady) this.client.once('ready', () => (this.wasReady = true));
    this.hub = new PubSubHub(
      () => this.duplicate(this.isCluster ? CLUSTER_SUBSCRIBER_OPTIONS : undefined),
      this.isCluster,
      options.commandTimeoutMs,
      this.isCluster ? (slot) => (this.client as Cluster).slots?.[slot]?.[0] : undefined,
    );
    if (this.isCluster) this.client.on('refresh', this.onRefresh);
    // Only the default (`waitForReplicas` unset) depends on the count: with it set, or opted out,
    // the user need not be allowed INFO.
    if (
      !this.isCluster &&
      isSentinelClient(this.client) &&
      options.lock.waitForReplicas === undefined
    ) {
      this.replicaWatch = new ReplicaWatch(
        this.client as Redis,
        options.commandTimeoutMs,
        // Not throttled with the connection errors: the watch warns once per distinct failure.
        (what, err) => this.logger.warn(`${what}: ${(err as Error).message}`),
      );
    }
    this.nodes = options.nodes.map(
      (node) => new RedisLockConnection({ ...options, redis: node, nodes: [] }),
    );
  }

  /** True once `close()` began: nothing more is sent on the module's connections. */
  get closed(): boolean {
    return this.closing;
  }

  /**
   * True when the client was connected once and is not now (it is reconnecting): a command would
   * only wait in the offline queue. Quorum mode counts such a node as failed at once.
   */
  get disconnected(): boolean {
    return this.wasReady && this.client.status !== 'ready';
  }

  /**
   * Runs a Lua script, bounded by `commandTimeoutMs`. Scripts sent in one burst (concurrent
   * callers, one tick) share socket writes (`coalesceWrites`).
   * @param onLate called with the reply when it comes after `commandTimeoutMs` (see `bounded`)
   */
  run(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    onLate?: (reply: unknown) => void,
  ) {
    // Cluster: straight to the master of the keys' slot, whose writes are then coalesced too.
    const node = this.isCluster ? clusterMasterOf(this.client as Cluster, keys[0]) : undefined;
    coalesceWrites(node ?? this.client);
    const reply = node
      ? script.runOn(node, this.client as Cluster, keys, args)
      : script.run(this.client, keys, args);
    return bounded(script.name, reply, this.options.commandTimeoutMs, onLate);
  }

  /**
   * Runs a Lua script followed by `WAIT replicas timeoutMs` on the same connection, the module's
   * connection for replica-confirmed writes (`replicaWaitClient`); resolves with the script's
   * reply and how many replicas acknowledged. Bounded by `timeoutMs` plus `commandTimeoutMs`.
   * @param onRan called once the script's reply is in (see `LuaScript.runThenWait`)
   * @param onLate called with the script's reply when both come after the bound (see `bounded`)
   */
  runThenWait(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    replicas: number,
    timeoutMs: number,
    onRan?: () => void,
    onLate?: (reply: unknown) => void,
  ): Promise<[reply: unknown, acknowledged: number]> {
    return bounded(
      `${script.name} + WAIT`,
      script.runThenWait(this.replicaWaitClient(), keys, args, replicas, timeoutMs, onRan),
      timeoutMs + this.options.commandTimeoutMs,
      onLate && (([reply]) => onLate(reply)),
    );
  }

  /**
   * The connection of replica-confirmed writes, created on first use. `WAIT` blocks its
   * connection until the replicas acknowledge or its timeout passes: on the shared client every
   * other call of the instance would wait behind it (and fail after `commandTimeoutMs`). It
   * counts the writes of its own connection, so the script goes there too. Such writes wait for
   * each other on it, as they did on the shared client.
   */
  private replicaWaitClient(): Client {
    // After close(): the call fails as any other does then, and opens nothing.
    if (this.closing) return this.waitClient ?? this.client;
    if (this.waitClient === undefined || this.waitClient.status === 'end') {
      this.waitClient = this.duplicate();
    }
    return this.waitClient;
  }

  /** Runs any client call, bounded by `ms` (default `commandTimeoutMs`). */
  call<T>(operation: string, fn: (client: Client) => Promise<T>, ms?: number): Promise<T> {
    return bounded(operation, fn(this.client), ms ?? this.options.commandTimeoutMs);
  }

  /**
   * A new connection to the same Redis, for subscriptions and blocking commands; closed with the
   * module (it is ours even when the main client is the user's). It copies the client's options
   * but three: commands wait in its offline queue until it connected (it is used at once, and
   * with `enableOfflineQueue: false` each first call failed, so a worker's BLPOP or `waitFor`'s
   * XREAD never ran), no ioredis `commandTimeout` (the module bounds each call itself, blocking
   * ones by their block time; that timeout cut them short), and the database the client is in
   * now (a user's client switched with `SELECT` still says its first one in its options).
   * @param clusterOptions on Cluster, options that override the client's for the copy
   */
  duplicate(clusterOptions?: ClusterOptions): Client {
    const copy = this.isCluster
      ? (this.client as Cluster).duplicate([], {
          enableOfflineQueue: true,
          redisOptions: {
            ...(this.client as Cluster).options.redisOptions,
            commandTimeout: undefined,
          },
          ...clusterOptions,
        })
      : (this.client as Redis).duplicate({
          enableOfflineQueue: true,
          commandTimeout: undefined,
          db: selectedDb(this.client as Redis),
        });
    copy.on('error', (err: Error) => this.logError('extra connection', err));
    this.extra.add(copy);
    const forget = () => this.extra.delete(copy);
    if (!this.keepAlive(copy, forget)) copy.once('end', forget);
    return copy;
  }

  /**
   * A Sentinel client with ioredis's failover detector can end for good when a failover is
   * announced while it reconnects (`reviveAfterFailedConnect`): such an end is followed by a new
   * connection, and `onEnd` runs only for an end that stays. Returns false (nothing done) for
   * other clients.
   */
  private keepAlive(client: Client, onEnd?: () => void): boolean {
    if (this.isCluster || !(client as Redis).options?.failoverDetector) return false;
    reviveAfterFailedConnect(
      client as Redis,
      () => this.closing,
      () => this.errors.warn('Sentinel connection ended during a failover; connecting again'),
      onEnd,
    );
    return true;
  }

  /**
   * Boot check: rejects with `RedisLockOptionsError` (option `redis`, or `nodes`) when a
   * single-node connection reaches a Redis Cluster node (`INFO cluster` says `cluster_enabled:1`):
   * every command on a key of another node's slots would fail with `MOVED`. Resolves without a
   * verdict when Redis does not answer within `ms` (a Redis that is down must not hold up the
   * start; `connectTimeoutMs` decides that).
   * @param ms bound of the wait for the connection and of the `INFO` call
   * @param option the option this connection was made from, named in the error
   */
  async checkNotClusterNode(ms: number, option = 'redis'): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.checkNotClusterNode(ms, 'nodes')));
    if (this.isCluster || !(await this.clusterEnabled(ms))) return;
    const redis = this.client as Redis;
    throw new RedisLockOptionsError(
      option,
      `a single-node connection to ${redis.options.host}:${redis.options.port}, a Redis Cluster node (cluster_enabled:1)`,
      "the Cluster's nodes for a Redis Cluster: `redis: { cluster: [{ host, port }, …], options }` or an ioredis `Cluster` (docs/scaling.md)",
    );
  }

  /**
   * Boot check of the database index (`db` above 0, from the URL's path or the options): refused
   * by Redis (past its `databases`), ioredis only logs the failed `SELECT` and goes on in
   * database 0, where the module's keys would land among another application's. Rejects with
   * `RedisLockOptionsError` then; no answer within `ms` is no verdict. Not for a Cluster (one
   * database).
   * @param ms bound of the wait for the connection and of the call
   * @param option the option this connection was made from, named in the error
   */
  async checkDatabase(ms: number, option = 'redis'): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.checkDatabase(ms, 'nodes')));
    if (this.isCluster) return;
    const db = Number((this.client as Redis).options.db ?? 0);
    // The refused SELECT comes as an 'error' event before 'ready': waited for past it.
    if (!db || !(await this.reached(ms, false))) return;
    try {
      await this.call('SELECT (boot check)', (c) => (c as Redis).select(db), ms);
    } catch (err) {
      if (err instanceof RedisCommandError && /DB index is out of range/i.test(err.message)) {
        throw new RedisLockOptionsError(
          option,
          db,
          "a database index this Redis has (below its 'databases' setting)",
        );
      }
    }
  }

  /**
   * Boot check of every master this connection writes to (the node, Sentinel's current master,
   * each Cluster master, and with `nodes` each quorum node): reads its `maxmemory-policy`
   * (`readEvictionPolicy`) and, for any policy but `noeviction`, logs one warning per master
   * naming the policy, the master and the fix, or with `mode: 'fail'` rejects with
   * `RedisLockOptionsError`. A policy that cannot be read (both `CONFIG` and `INFO` refused, or
   * no answer within `ms`) is logged as not checked, in either mode.
   * @param ms bound of the wait for the connection and of each call
   * @param mode `'ignore'`: no check
   * @param option the option this connection was made from, named in the error
   */
  async checkEvictionPolicy(ms: number, mode: EvictionPolicyMode, option = 'redis'): Promise<void> {
    if (mode === 'ignore') return;
    const own = (async () => {
      if (!(await this.reached(ms))) {
        return this.logger.warn(uncheckedWarning(this.describe(), `no connection within ${ms} ms`));
      }
      const masters = this.isCluster
        ? (this.client as Cluster)
            .nodes('master')
            .map((node) => ({ node, name: nodeAddress(node) }))
        : [{ node: this.client as Redis, name: this.describe() }];
      await Promise.all(
        masters.map(async ({ node, name }) => {
          const reading = await readEvictionPolicy(node, ms);
          if (reading.policy === undefined)
            return this.logger.warn(uncheckedWarning(name, reading.why));
          if (reading.policy === SAFE_EVICTION_POLICY) return;
          if (mode === 'fail') {
            throw new RedisLockOptionsError(
              option,
              // Short, so that the error shows it whole (longer values are cut).
              `master ${name} with maxmemory-policy ${reading.policy}`,
              `masters with maxmemory-policy noeviction (evictionPolicy: 'fail'): ${EVICTION_POLICY_FIX}`,
            );
          }
          this.logger.warn(evictionWarning(name, reading.policy));
        }),
      );
    })();
    await Promise.all([
      own,
      ...this.nodes.map((node) => node.checkEvictionPolicy(ms, mode, 'nodes')),
    ]);
  }

  /** `cluster_enabled` of the node the (non-Cluster) client is connected to; undefined: no answer. */
  private async clusterEnabled(ms: number): Promise<boolean | undefined> {
    if (!(await this.reached(ms))) return undefined;
    const info = await this.call('INFO cluster', (c) => (c as Redis).info('cluster'), ms).catch(
      () => undefined,
    );
    return info === undefined ? undefined : /^cluster_enabled:1\b/m.test(info);
  }

  /**
   * Waits (at most `ms`) until the client is connected; false when it could not connect in time
   * or failed to (refused, unreachable: settled at the first error, without waiting out `ms`,
   * unless `settleOnError` is false).
   */
  async reached(ms: number, settleOnError = true): Promise<boolean> {
    const client = this.client;
    if (client.status === 'ready' || client.status === 'wait') return true;
    let settle!: (reached: boolean) => void;
    const reached = new Promise<boolean>((resolve) => (settle = resolve));
    const onReady = () => settle(true);
    const onFailure = () => settle(false);
    client.once('ready', onReady).once('end', onFailure);
    if (settleOnError) client.once('error', onFailure);
    const ok = await bounded('connecting (boot check)', reached, ms).catch(() => false);
    client.off('ready', onReady).off('error', onFailure).off('end', onFailure);
    return ok;
  }

  /**
   * The master the client is connected to, for boot messages: its address (for Sentinel, the
   * master the sentinels named, with its name).
   */
  private describe(): string {
    const client = this.client as Redis;
    const name = (client.options as { name?: string }).name;
    const address = nodeAddress(client);
    return isSentinelClient(client) && name ? `'${name}' (${address}, via Sentinel)` : address;
  }

  /**
   * Closes the subscriber and extra connections, the quorum nodes' connections, and the client if
   * the module created it. Calls made before it get their replies first (waiting at most
   * `commandTimeoutMs`): enqueues and rate-limit checks merged until the end of their tick go out,
   * and a script Redis did not know yet (`NOSCRIPT`, e.g. after a restart) is sent again.
   */
  async close(): Promise<void> {
    this.closing = true;
    await this.settleSent();
    await Promise.all(this.nodes.map((node) => node.close()));
    this.replicaWatch?.close();
    this.client.off('refresh', this.onRefresh);
    this.hub.close();
    for (const c of this.extra) c.disconnect();
    this.extra.clear();
    this.forgetSecrets();
    if (!this.owned) return;
    // Not connected (e.g. a failed start with connectTimeoutMs): QUIT would only wait its bound.
    if (this.client.status !== 'ready') return void this.client.disconnect();
    try {
      await bounded('QUIT', this.client.quit(), this.options.commandTimeoutMs);
      // Sentinel: QUIT leaves ioredis's failover detector (its subscriptions to the sentinels)
      // running; disconnect() stops it.
      if (this.replicaWatch) this.client.disconnect();
    } catch {
      this.client.disconnect();
    }
  }

  /**
   * Waits until the client's sent commands are answered, at most `commandTimeoutMs`: one turn
   * of the event loop at least (the batches opened before close() are sent on process.nextTick),
   * and more while a reply is outstanding (its handler may send another command, such as the
   * EVAL after a NOSCRIPT, before the QUIT). Unfaked ticks and clock: a test's fake timers do not
   * hold a shutdown.
   */
  private async settleSent(): Promise<void> {
    const turn = () => new Promise((resolve) => setImmediateUnfaked(resolve));
    await turn();
    if (!this.owned || this.client.status !== 'ready') return;
    const clients = this.isCluster
      ? (this.client as Cluster).nodes('master')
      : [this.client as Redis];
    const deadline = unfakedNowMs() + this.options.commandTimeoutMs;
    while (clients.some((c) => pendingReplies(c) > 0) && unfakedNowMs() < deadline) {
      await turn();
    }
  }

  private logError(what: string, err: Error): void {
    this.errors.warn(`Redis ${what} error: ${err.message}`);
  }
}

/** `host:port` of the server a client is connected to (else the one it was given). */
function nodeAddress(client: Redis): string {
  const stream = (client as { stream?: { remoteAddress?: string; remotePort?: number } }).stream;
  return stream?.remoteAddress && stream.remotePort
    ? `${stream.remoteAddress}:${stream.remotePort}`
    : `${client.options.host ?? '127.0.0.1'}:${client.options.port ?? 6379}`;
}

/** Commands a client sent and has no reply for yet (none known for a client without the queue). */
function pendingReplies(client: Redis): number {
  return (client.commandQueue as Redis['commandQueue'] | undefined)?.length ?? 0;
}
