import { hostname } from 'node:os';
import type {
  LockOptions,
  WaitForReplicasOptions,
  WithLockOptions,
} from '../interfaces/lock-options.interface';
import type {
  EvictionPolicyMode,
  RedisConnectionOption,
  RedisLockModuleOptions,
} from '../interfaces/redis-lock-module-options.interface';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { redactMalformedUrl } from '../redaction/redact-credentials';
import {
  MAX_ATTEMPTS,
  MAX_CONCURRENCY,
  MAX_QUEUE_BATCH,
  MAX_QUEUE_NAME_BYTES,
} from './queue-limits';
import { checkQueueName } from './queue-limits';
import type {
  BackoffFunction,
  BatchOptions,
  KeepBounds,
  NamedHandlerConfig,
  QueueDefaults,
  QueueOwnOptions,
  QueueWorkerOptions,
  QueueWorkersConfig,
  RetryLogLevel,
  WorkerRateLimit,
} from '../interfaces/queue-options.interface';
import type { BackoffOptions } from '../interfaces/queue-task.interface';
import {
  checkBoolean,
  checkInt,
  checkKnownKeys,
  checkMs,
  checkOneOf,
  checkPrefix,
  invalidOption,
  LONE_SURROGATE,
  utf8BytesOver,
  type InvalidValue,
} from './validate';

/** Lock options with every default applied. */
export interface ResolvedLockOptions {
  ttlMs: number;
  waitMs: number;
  retryIntervalMs: number;
  fair: boolean;
  fencing: boolean;
  keyPrefix: string;
  autoExtend: boolean;
  /** `'shared'`: a read lock (see lib/lock/shared-locks.ts); unset: exclusive. */
  mode?: 'shared' | 'exclusive';
  /** `withLock` only: resolve `undefined` instead of throwing on timeout (unset: false). */
  skipIfLocked?: boolean;
  /** The `lock` attribute of its metrics (unset: `(unlabelled)`). */
  label?: string;
  signal?: AbortSignal;
  /** Unset: Sentinel's default (`DEFAULT_REPLICA_WAIT` when the master has replicas); `false`: none. */
  waitForReplicas?: WaitForReplicasOptions | false;
}

/** Module options with every default applied. */
export interface ResolvedModuleOptions {
  redis: RedisConnectionOption;
  keyPrefix: string;
  commandTimeoutMs: number;
  lock: ResolvedLockOptions;
  queue: ResolvedQueueDefaults;
  /** Quorum mode's independent masters; empty when locks use `redis`. */
  nodes: RedisConnectionOption[];
  clockDriftFactor: number;
  maxLocalHandoffs: number;
  fenceTtlMs: number;
  instanceId: string;
  /** Unset: start without checking Redis. */
  connectTimeoutMs?: number;
  evictionPolicy: EvictionPolicyMode;
}

const MODULE_KEYS = [
  'redis',
  'keyPrefix',
  'commandTimeoutMs',
  'ttlMs',
  'waitMs',
  'retryIntervalMs',
  'fair',
  'fencing',
  'waitForReplicas',
  'queue',
  'nodes',
  'clockDriftFactor',
  'maxLocalHandoffs',
  'fenceTtlMs',
  'instanceId',
  'connectTimeoutMs',
  'evictionPolicy',
] as const;
const QUEUE_KEYS = [
  'leaseMs',
  'maxAttempts',
  'backoffMs',
  'concurrency',
  'drainTimeoutMs',
  'groupConcurrency',
  'keepCompleted',
  'keepDead',
  'retryLogLevel',
] as const;
/** The module's `queue` options: the worker defaults, and the queue-wide ones. */
const MODULE_QUEUE_KEYS = [
  ...QUEUE_KEYS,
  'eventsMaxLen',
  'maxResultBytes',
  'maxPayloadBytes',
  'queues',
  'workers',
  'maxSize',
  'waitForReplicas',
] as const;
const QUEUE_OWN_KEYS = ['maxPayloadBytes'] as const;
/** What `queue.workers[queue]` may set: a worker's options but `batch` and `name`, and `names`. */
const WORKER_CONFIG_KEYS = [
  ...QUEUE_KEYS,
  'limiter',
  'groupLimiter',
  'timeoutMs',
  'backoff',
  'names',
] as const;
const NAMED_CONFIG_KEYS = ['concurrency', 'timeoutMs'] as const;
const WORKER_KEYS = [
  ...QUEUE_KEYS,
  'limiter',
  'groupLimiter',
  'timeoutMs',
  'backoff',
  'batch',
  'name',
] as const;
const BATCH_KEYS = ['size', 'maxWaitMs'] as const;
const BACKOFF_KEYS = ['type', 'delayMs', 'maxDelayMs', 'jitter'] as const;
const RATE_LIMIT_KEYS = ['max', 'durationMs'] as const;
const KEEP_KEYS = ['ageMs', 'count'] as const;

/** Longest rate-limit window and keep age: a day, and a year. */
const MAX_WINDOW_MS = 86_400_000;
const MAX_KEEP_MS = 31_536_000_000;
/** Largest rate-limit `max` and keep `count`. */
const MAX_LIMIT = 1_000_000;
const LOCK_KEYS = [
  'ttlMs',
  'waitMs',
  'retryIntervalMs',
  'fair',
  'fencing',
  'keyPrefix',
  'signal',
  'autoExtend',
  'waitForReplicas',
  'skipIfLocked',
  'mode',
  'label',
] as const;
const WAIT_FOR_REPLICAS_KEYS = ['replicas', 'timeoutMs'] as const;

/**
 * Default bound of consecutive local handoffs while other processes wait (see
 * `RedisLockModuleOptions.maxLocalHandoffs`; the figure comes from bench/, crowd shape).
 */
export const DEFAULT_MAX_LOCAL_HANDOFFS = 16;

/** Upper bound of a lock TTL and a wait: one day. */
const MAX_LOCK_MS = 86_400_000;

/** Fewest nodes of quorum mode: with fewer, a majority is not worth having. */
const MIN_QUORUM_NODES = 3;

/** Throws unless `value` can be a Redis connection option (URL, options object or instance). */
function checkRedisOption(option: string, value: unknown): RedisConnectionOption {
  if (typeof value !== 'string' && (value === null || typeof value !== 'object')) {
    throw new RedisLockOptionsError(
      option,
      value,
      'a URL string, ioredis options, a Redis or Cluster instance, or { cluster: nodes }',
    );
  }
  if (typeof value === 'string' && !/^rediss?:\/\//.test(value)) {
    throw new RedisLockOptionsError(
      option,
      redactMalformedUrl(value),
      "a URL starting with 'redis://' or 'rediss://'",
    );
  }
  if (typeof value === 'string') checkUrl(option, value, value);
  else checkNoUrlKey(option, value);
  checkClusterNodes(option, value);
  checkNoClientKeyPrefix(option, value);
  checkDatabaseIndex(option, value);
  if (typeof value === 'object') checkClientUsable(option, value);
  return value as RedisConnectionOption;
}

/**
 * Throws when ioredis options carry a `url` (node-redis's form): ioredis has no such option and
 * connected to 127.0.0.1:6379 without a word, whichever server the URL named.
 */
function checkNoUrlKey(option: string, value: object): void {
  const v = value as { url?: unknown; evalsha?: unknown; cluster?: unknown };
  if (v.url === undefined || typeof v.evalsha === 'function' || v.cluster !== undefined) return;
  throw new RedisLockOptionsError(
    `${option}.url`,
    v.url,
    `no 'url' in ioredis options (ioredis ignores it and connects to 127.0.0.1:6379): give the URL ` +
      `itself as '${option}' (e.g. ${option}: process.env.REDIS_URL)`,
  );
}

/**
 * Throws when a client passed in cannot send the library's commands: one already quit or
 * disconnected (ioredis status `'end'`: it does not reconnect by itself), or one in subscriber or
 * monitor mode (ioredis refuses every other command there). Such a client was accepted, and
 * every call of the module then failed.
 */
function checkClientUsable(option: string, value: object): void {
  const v = value as { evalsha?: unknown; duplicate?: unknown; status?: unknown; mode?: unknown };
  // A client passed in (duck-typed as RedisLockConnection does).
  if (typeof v.evalsha !== 'function' || typeof v.duplicate !== 'function') return;
  const state =
    v.status === 'end'
      ? "closed (ioredis status 'end')"
      : v.mode === 'subscriber' || v.mode === 'monitor'
        ? `in ${v.mode} mode`
        : undefined;
  if (state === undefined) return;
  throw new RedisLockOptionsError(
    option,
    `a client ${state}`,
    'a client that can send commands (not quit or disconnected, not in subscriber or monitor ' +
      'mode): give the module a client of its own, or connection options',
  );
}

/**
 * Throws unless the database index that a URL (its path or `?db=`) or an options object (`db`)
 * selects is a whole number: ioredis sends `SELECT` with what it parsed (`NaN` for `/abc`), and
 * Redis's refusal came as an unhandled rejection that ended the process. (An index past the
 * server's `databases` is found at boot: `RedisLockConnection.checkDatabase`.)
 */
function checkDatabaseIndex(option: string, value: string | object): void {
  let db: unknown;
  let path = option;
  let shown: unknown;
  if (typeof value === 'string') {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      return; // checkUrl refused it already
    }
    // Read as ioredis reads it: the path wins over the query.
    db =
      url.pathname.length > 1 ? url.pathname.slice(1) : (url.searchParams.get('db') ?? undefined);
    // The URL itself is shown (the error redacts its password).
    shown = value;
  } else {
    const v = value as { evalsha?: unknown; cluster?: unknown; db?: unknown };
    // A client passed in was created by its owner; a Cluster has one database.
    if (typeof v.evalsha === 'function' || 'cluster' in v) return;
    db = v.db;
    path = `${option}.db`;
    shown = db;
  }
  if (db === undefined || db === null) return;
  const whole =
    typeof db === 'number'
      ? Number.isSafeInteger(db) && db >= 0
      : typeof db === 'string' && /^\d+$/.test(db);
  if (!whole) {
    throw new RedisLockOptionsError(
      path,
      shown,
      typeof value === 'string'
        ? "a database index (a whole number) as the URL's path or ?db="
        : 'a database index (a whole number)',
    );
  }
}

/**
 * Throws unless `parsed` (the option's URL, or a Cluster node's string with a scheme added) is a
 * URL, as ioredis reads it (WHATWG `URL`): ioredis's own TypeError names no option and carries
 * the whole URL, password included, in its `input`.
 */
function checkUrl(option: string, value: string, parsed: string): void {
  try {
    new URL(parsed);
  } catch {
    throw new RedisLockOptionsError(
      option,
      redactMalformedUrl(value),
      'a valid URL (redis://[[user]:password@]host[:port][/db])',
    );
  }
}

/**
 * `{ cluster: nodes }`: at least one startup node, each a URL, a 'host:port' string, a port or
 * `{ host?, port? }` (an empty list started a client that never connected: every call timed out).
 */
function checkClusterNodes(option: string, value: object | string): void {
  if (typeof value !== 'object' || !('cluster' in value) || 'isCluster' in value) return;
  const nodes = (value as { cluster: unknown }).cluster;
  if (!Array.isArray(nodes) || nodes.length === 0) {
    throw new RedisLockOptionsError(
      `${option}.cluster`,
      nodes,
      'a non-empty array of startup nodes',
    );
  }
  nodes.forEach((node: unknown, i) => {
    const path = `${option}.cluster[${i}]`;
    if (typeof node === 'string') {
      checkUrl(path, node, /^[a-z][a-z0-9+.-]*:\/\//i.test(node) ? node : `redis://${node}`);
    } else if (typeof node !== 'number' && (typeof node !== 'object' || node === null)) {
      throw new RedisLockOptionsError(path, node, "a URL, 'host:port', a port or { host, port }");
    }
  });
}

/**
 * Where a quorum node connects, as `host:port/db` (a Unix socket as `path/db`), read as ioredis
 * reads it (its defaults `localhost`, 6379, database 0); undefined for Sentinel and Cluster,
 * whose options do not name the master.
 */
function nodeAddress(node: RedisConnectionOption): string | undefined {
  let o: { host?: unknown; port?: unknown; path?: unknown; db?: unknown };
  if (typeof node === 'string') {
    const url = new URL(node);
    const db =
      url.pathname.length > 1 ? url.pathname.slice(1) : (url.searchParams.get('db') ?? undefined);
    o = { host: url.hostname, port: url.port, db };
  } else {
    const v = node as { evalsha?: unknown; options?: unknown; isCluster?: unknown };
    // A client passed in: what it was created with.
    o = (typeof v.evalsha === 'function' ? v.options : node) as typeof o;
    if (typeof o !== 'object' || o === null || v.isCluster || 'cluster' in o) return undefined;
    if ('sentinels' in o && o.sentinels) return undefined;
  }
  const db = Number(o.db ?? 0);
  if (typeof o.path === 'string' && o.path !== '') return `${o.path}/${db}`;
  const host = typeof o.host === 'string' && o.host !== '' ? o.host.toLowerCase() : 'localhost';
  return `${host}:${Number(o.port || 6379)}/${db}`;
}

/**
 * Throws when two quorum nodes are given the same address (`nodeAddress`): they are one server,
 * so one failure takes two votes, and they share each lock's fence counter, so every fence
 * write-back after the first is refused and each acquisition retried until its TTL ran out.
 * Other names of one server (`localhost` and `127.0.0.1`) are found at boot by `run_id`
 * (`checkDistinctServers`).
 */
function checkDistinctNodes(nodes: readonly RedisConnectionOption[]): void {
  const seen = new Map<string, number>();
  nodes.forEach((node, i) => {
    const address = nodeAddress(node);
    if (address === undefined) return;
    const first = seen.get(address);
    if (first !== undefined) {
      throw new RedisLockOptionsError(
        'nodes',
        `nodes[${first}] and nodes[${i}] both ${address}`,
        `${MIN_QUORUM_NODES} or more independent Redis masters (quorum mode), each a server of its own`,
      );
    }
    seen.set(address, i);
  });
}

const NO_CLIENT_KEY_PREFIX =
  "no ioredis keyPrefix: use the module's own 'keyPrefix' option instead (ioredis prefixes the " +
  'keys of the scripts but not the pub/sub channels they publish on, so no release would wake ' +
  'a waiter)';

/**
 * Throws when the connection option sets ioredis's own `keyPrefix`, wherever ioredis reads it
 * from: a URL's `?keyPrefix=`, an options object (Sentinel's too), the options of a client
 * passed in (a `Redis`, or a `Cluster` with `keyPrefix` or `redisOptions.keyPrefix`), or those
 * of `{ cluster, options }` and its startup nodes.
 */
function checkNoClientKeyPrefix(option: string, value: string | object): void {
  const refuse = (path: string, prefix: unknown, shown: unknown = prefix) => {
    // An empty prefix is ioredis's default: nothing is prefixed.
    if (prefix !== undefined && prefix !== null && prefix !== '') {
      throw new RedisLockOptionsError(`${option}${path}`, shown, NO_CLIENT_KEY_PREFIX);
    }
  };
  const fromUrl = (path: string, url: string) => {
    let prefixes: string[] = [];
    try {
      prefixes = new URL(url).searchParams.getAll('keyPrefix');
    } catch {
      // Not a URL that this check can read (a host:port string of a Cluster node): nothing to find.
    }
    // The URL itself is shown (the error redacts its password).
    refuse(
      path,
      prefixes.find((prefix) => prefix !== ''),
      url,
    );
  };
  const fromOptions = (path: string, o: unknown) => {
    if (typeof o !== 'object' || o === null) return;
    const v = o as { keyPrefix?: unknown; redisOptions?: { keyPrefix?: unknown } };
    refuse(`${path}.keyPrefix`, v.keyPrefix);
    if (typeof v.redisOptions === 'object' && v.redisOptions !== null) {
      refuse(`${path}.redisOptions.keyPrefix`, v.redisOptions.keyPrefix);
    }
  };
  if (typeof value === 'string') return fromUrl('', value);
  const v = value as {
    evalsha?: unknown;
    duplicate?: unknown;
    options?: unknown;
    cluster?: unknown;
  };
  if (typeof v.evalsha === 'function' && typeof v.duplicate === 'function') {
    // A client passed in (duck-typed as RedisLockConnection does): what it was created with.
    return fromOptions('.options', v.options);
  }
  if (Array.isArray(v.cluster)) {
    fromOptions('.options', v.options);
    v.cluster.forEach((node: unknown, i) => {
      if (typeof node === 'string') fromUrl(`.cluster[${i}]`, node);
      else fromOptions(`.cluster[${i}]`, node);
    });
    return;
  }
  fromOptions('', value);
}

/**
 * What locks wait for on Sentinel when `waitForReplicas` is not set and the master has replicas:
 * one replica, for at most 500 ms (docs/scaling.md, "Safe by default").
 */
export const DEFAULT_REPLICA_WAIT: Readonly<WaitForReplicasOptions> = Object.freeze({
  replicas: 1,
  timeoutMs: 500,
});

/**
 * Validates a `{ replicas, timeoutMs }` or `false` named `option`; `invalid` makes the error (a
 * queue call's: `QueueError.invalid`).
 */
export function checkWaitForReplicas(
  option: string,
  value: unknown,
  invalid?: InvalidValue,
): WaitForReplicasOptions | false | undefined {
  if (value === undefined || value === false) return value;
  checkKnownKeys(option, value, WAIT_FOR_REPLICAS_KEYS, invalid);
  const w = value as Partial<WaitForReplicasOptions>;
  return {
    replicas: checkInt(`${option}.replicas`, w.replicas, 1, 1_000, invalid),
    timeoutMs: checkInt(`${option}.timeoutMs`, w.timeoutMs, 1, MAX_LOCK_MS, invalid),
  };
}

function checkMode(value: unknown): 'shared' | 'exclusive' {
  if (value !== 'shared' && value !== 'exclusive') {
    throw new RedisLockOptionsError('mode', value, "'shared' or 'exclusive'");
  }
  return value;
}

/** Validates the module options and applies defaults; throws `RedisLockOptionsError`. */
export function resolveModuleOptions(
  raw: RedisLockModuleOptions | undefined,
): ResolvedModuleOptions {
  const options = raw ?? {};
  checkKnownKeys('', options, MODULE_KEYS);
  const redis = checkRedisOption('redis', options.redis ?? 'redis://127.0.0.1:6379');
  const nodes: RedisConnectionOption[] = options.nodes ?? [];
  if (
    options.nodes !== undefined &&
    (!Array.isArray(options.nodes) || options.nodes.length < MIN_QUORUM_NODES)
  ) {
    throw new RedisLockOptionsError(
      'nodes',
      options.nodes,
      `an array of at least ${MIN_QUORUM_NODES} independent Redis masters (quorum mode)`,
    );
  }
  nodes.forEach((node, i) => checkRedisOption(`nodes[${i}]`, node));
  checkDistinctNodes(nodes);
  const clockDriftFactor = options.clockDriftFactor ?? 0.01;
  if (typeof clockDriftFactor !== 'number' || !(clockDriftFactor >= 0 && clockDriftFactor < 0.5)) {
    throw new RedisLockOptionsError(
      'clockDriftFactor',
      clockDriftFactor,
      'a number from 0 to less than 0.5',
    );
  }
  if (
    nodes.length > 0 &&
    options.waitForReplicas !== undefined &&
    options.waitForReplicas !== false
  ) {
    throw new RedisLockOptionsError(
      'waitForReplicas',
      options.waitForReplicas,
      'no value with nodes (in quorum mode every node is an independent master)',
    );
  }
  const keyPrefix = checkPrefix('keyPrefix', options.keyPrefix ?? '');
  const lockDefaults: ResolvedLockOptions = {
    ttlMs: 30_000,
    waitMs: 0,
    retryIntervalMs: 100,
    fair: true,
    fencing: true,
    keyPrefix,
    autoExtend: true,
  };
  const lock = resolveLockOptions(lockDefaults, {
    ttlMs: options.ttlMs,
    waitMs: options.waitMs,
    retryIntervalMs: options.retryIntervalMs,
    fair: options.fair,
    fencing: options.fencing,
    waitForReplicas: options.waitForReplicas,
  });
  return {
    redis,
    keyPrefix,
    commandTimeoutMs: checkMs('commandTimeoutMs', options.commandTimeoutMs ?? 5_000, 1),
    lock,
    queue: resolveQueueOptions(QUEUE_DEFAULTS, options.queue, 'queue'),
    nodes,
    clockDriftFactor,
    maxLocalHandoffs: checkInt(
      'maxLocalHandoffs',
      options.maxLocalHandoffs ?? DEFAULT_MAX_LOCAL_HANDOFFS,
      0,
      1_000_000,
    ),
    fenceTtlMs: checkInt('fenceTtlMs', options.fenceTtlMs ?? 3_600_000, 1_000, 365 * MAX_LOCK_MS),
    connectTimeoutMs:
      options.connectTimeoutMs === undefined
        ? undefined
        : checkMs('connectTimeoutMs', options.connectTimeoutMs, 1),
    instanceId: checkInstanceId(options.instanceId ?? `${hostname()}:${process.pid}`),
    evictionPolicy: checkOneOf('evictionPolicy', options.evictionPolicy ?? 'warn', EVICTION_MODES),
  };
}

/**
 * Validates per-call lock options and fills unset ones from `defaults`; throws
 * `RedisLockOptionsError` naming the option.
 */
export function resolveLockOptions(
  defaults: ResolvedLockOptions,
  options: LockOptions | WithLockOptions | undefined,
): ResolvedLockOptions {
  if (options === undefined) return defaults;
  checkKnownKeys('', options, LOCK_KEYS);
  const o = options as WithLockOptions;
  const signal = o.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new RedisLockOptionsError('signal', signal, 'an AbortSignal');
  }
  return {
    ttlMs: o.ttlMs === undefined ? defaults.ttlMs : checkInt('ttlMs', o.ttlMs, 1, MAX_LOCK_MS),
    waitMs: o.waitMs === undefined ? defaults.waitMs : checkInt('waitMs', o.waitMs, 0, MAX_LOCK_MS),
    retryIntervalMs:
      o.retryIntervalMs === undefined
        ? defaults.retryIntervalMs
        : checkInt('retryIntervalMs', o.retryIntervalMs, 1, MAX_LOCK_MS),
    fair: o.fair === undefined ? defaults.fair : checkBoolean('fair', o.fair),
    fencing: o.fencing === undefined ? defaults.fencing : checkBoolean('fencing', o.fencing),
    keyPrefix:
      o.keyPrefix === undefined ? defaults.keyPrefix : checkPrefix('keyPrefix', o.keyPrefix),
    autoExtend:
      o.autoExtend === undefined ? defaults.autoExtend : checkBoolean('autoExtend', o.autoExtend),
    skipIfLocked:
      o.skipIfLocked === undefined
        ? defaults.skipIfLocked
        : checkBoolean('skipIfLocked', o.skipIfLocked),
    label: o.label === undefined ? defaults.label : checkLabel(o.label),
    signal,
    mode: o.mode === undefined ? defaults.mode : checkMode(o.mode),
    // Shared holds cannot wait for replicas (shared-locks.ts refuses the call's own option): the
    // module's default is for exclusive locks and must not make every read lock fail.
    waitForReplicas:
      o.waitForReplicas !== undefined
        ? checkWaitForReplicas('waitForReplicas', o.waitForReplicas)
        : (o.mode ?? defaults.mode) === 'shared'
          ? undefined
          : defaults.waitForReplicas,
  };
}

/** Queue defaults with every default applied. */
export type ResolvedQueueDefaults = Required<
  Omit<QueueDefaults, 'maxSize' | 'waitForReplicas' | 'queues' | 'workers'>
> & {
  /** The queues with options of their own (`queue.queues`), by name, each fully resolved. */
  queues: ReadonlyMap<string, ResolvedQueueOwnOptions>;
  /**
   * The worker options from configuration (`queue.workers`), by queue: checked, applied over the
   * options each worker of the queue is started with (`QueueService.process`).
   */
  workers: ReadonlyMap<string, QueueWorkersConfig>;
  /** Unset: no bound. */
  maxSize?: number;
  /** Unset: queue writes do not wait for replicas. */
  waitForReplicas?: WaitForReplicasOptions;
};

/** A queue's own options (`queue.queues[name]`), unset ones filled from the module's. */
export type ResolvedQueueOwnOptions = Required<QueueOwnOptions>;

/**
 * Worker options with every default applied (`limiter`, `groupLimiter`, `timeoutMs`, `backoff`:
 * undefined when none; then `backoffMs` applies).
 */
export interface ResolvedWorkerOptions extends ResolvedQueueDefaults {
  limiter?: WorkerRateLimit;
  groupLimiter?: WorkerRateLimit;
  timeoutMs?: number;
  backoff?: BackoffOptions | BackoffFunction;
  /** Batch worker: the handler gets up to `size` tasks at once. */
  batch?: BatchOptions;
  /** A named handler: it runs the tasks enqueued with this name. */
  name?: string;
}

/** Defaults of the queue and its workers (module `queue` option). */
export const QUEUE_DEFAULTS: ResolvedQueueDefaults = {
  leaseMs: 30_000,
  maxAttempts: 5,
  backoffMs: 1_000,
  concurrency: 1,
  drainTimeoutMs: 10_000,
  groupConcurrency: 1,
  keepCompleted: { ageMs: 86_400_000, count: 1_000 },
  keepDead: { ageMs: 604_800_000, count: 10_000 },
  retryLogLevel: 'warn',
  eventsMaxLen: 10_000,
  maxResultBytes: 65_536,
  maxPayloadBytes: 1_048_576,
  queues: new Map(),
  workers: new Map(),
};

/** Largest `maxPayloadBytes`: 512 MiB, the longest string Redis stores. */
const MAX_PAYLOAD_BYTES = 536_870_912;

/** Longest run timeout and backoff delay: a day. */
const MAX_TASK_MS = 86_400_000;

/**
 * Validates a `{ type, delayMs, maxDelayMs?, jitter? }` backoff named `option` (a worker's may
 * also be a function); throws what `invalid` makes (`RedisLockOptionsError` by default).
 */
export function checkBackoff(
  option: string,
  value: unknown,
  invalid?: InvalidValue,
  allowFunction = false,
): BackoffOptions | BackoffFunction | undefined {
  if (value === undefined) return undefined;
  if (allowFunction && typeof value === 'function') return value as BackoffFunction;
  const o = checkKnownKeys(option, value, BACKOFF_KEYS, invalid) as Partial<BackoffOptions>;
  if (o.type !== 'fixed' && o.type !== 'exponential') {
    throw (invalid ?? invalidOption)(`${option}.type`, o.type, "'fixed' or 'exponential'");
  }
  const delayMs = checkInt(`${option}.delayMs`, o.delayMs, 0, MAX_TASK_MS, invalid);
  const maxDelayMs =
    o.maxDelayMs === undefined
      ? undefined
      : checkInt(`${option}.maxDelayMs`, o.maxDelayMs, delayMs, MAX_TASK_MS, invalid);
  if (o.jitter !== undefined && typeof o.jitter !== 'boolean') {
    throw (invalid ?? invalidOption)(`${option}.jitter`, o.jitter, 'true or false');
  }
  return {
    type: o.type,
    delayMs,
    ...(maxDelayMs === undefined ? {} : { maxDelayMs }),
    ...(o.jitter === undefined ? {} : { jitter: o.jitter }),
  };
}

/** Largest queue bound (`maxSize`). */
const MAX_QUEUE_SIZE = 1_000_000_000;

/** Validates a queue bound named `option`: an integer from 1 to 1,000,000,000. */
export function checkMaxSize(option: string, value: unknown): number {
  return checkInt(option, value, 1, MAX_QUEUE_SIZE);
}

/** Longest wait to fill a batch: a minute. */
const MAX_BATCH_WAIT_MS = 60_000;

/** Validates `{ size, maxWaitMs? }` of a batch worker (size 1 to 1,000; maxWaitMs 0 to 60,000). */
function checkBatch(value: unknown, invalid?: InvalidValue): BatchOptions {
  const o = checkKnownKeys('batch', value, BATCH_KEYS, invalid) as Partial<BatchOptions>;
  return {
    size: checkInt('batch.size', o.size, 1, MAX_QUEUE_BATCH, invalid),
    maxWaitMs:
      o.maxWaitMs === undefined
        ? 0
        : checkInt('batch.maxWaitMs', o.maxWaitMs, 0, MAX_BATCH_WAIT_MS, invalid),
  };
}

/** Validates a run timeout named `option`: an integer from 1 to a day, in ms. */
export function checkTimeoutMs(option: string, value: unknown, invalid?: InvalidValue): number {
  return checkInt(option, value, 1, MAX_TASK_MS, invalid);
}

/** Validates a `{ max, durationMs }` rate limit named `option`. */
export function checkRateLimit(
  option: string,
  value: unknown,
  invalid?: InvalidValue,
): WorkerRateLimit | undefined {
  if (value === undefined) return undefined;
  const o = checkKnownKeys(option, value, RATE_LIMIT_KEYS, invalid);
  return {
    max: checkInt(`${option}.max`, o.max, 1, MAX_LIMIT, invalid),
    durationMs: checkInt(`${option}.durationMs`, o.durationMs, 1, MAX_WINDOW_MS, invalid),
  };
}

function checkKeep(option: string, value: unknown, invalid?: InvalidValue): KeepBounds {
  const o = checkKnownKeys(option, value, KEEP_KEYS, invalid);
  return {
    ageMs: checkInt(`${option}.ageMs`, o.ageMs, 0, MAX_KEEP_MS, invalid),
    count: checkInt(`${option}.count`, o.count, 0, MAX_LIMIT, invalid),
  };
}

/**
 * Validates queue or worker options (the module's `queue`, `@QueueWorker`, `process`) and fills
 * unset ones from `defaults`; throws `RedisLockOptionsError` naming the option, prefixed by
 * `option` (e.g. `queue.leaseMs`).
 */
export function resolveQueueOptions(
  defaults: ResolvedQueueDefaults,
  options: QueueDefaults | undefined,
  option = '',
): ResolvedQueueDefaults {
  const o = checkKnownKeys(option, options, MODULE_QUEUE_KEYS) as QueueDefaults;
  const name = (key: string) => (option ? `${option}.${key}` : key);
  return {
    ...resolveQueueKeys(defaults, o, option),
    eventsMaxLen:
      o.eventsMaxLen === undefined
        ? defaults.eventsMaxLen
        : checkInt(name('eventsMaxLen'), o.eventsMaxLen, 0, MAX_LIMIT),
    maxResultBytes:
      o.maxResultBytes === undefined
        ? defaults.maxResultBytes
        : checkInt(name('maxResultBytes'), o.maxResultBytes, 1, 16 * 1024 * 1024),
    ...resolveQueueOwn(defaults, o, name),
    workers:
      o.workers === undefined ? defaults.workers : resolveWorkersConfig(o.workers, name('workers')),
    ...(o.maxSize === undefined ? {} : { maxSize: checkMaxSize(name('maxSize'), o.maxSize) }),
    // Only `false` opts out, as for the lock's option: `null`, `0` or `''` (an unset config
    // value) is refused, not read as "no wait".
    ...(o.waitForReplicas === undefined || o.waitForReplicas === false
      ? {}
      : {
          waitForReplicas: checkWaitForReplicas(
            name('waitForReplicas'),
            o.waitForReplicas,
          ) as WaitForReplicasOptions,
        }),
  };
}

/** `maxPayloadBytes` and `queues` of the module's `queue` options (`name` prefixes the option). */
function resolveQueueOwn(
  defaults: ResolvedQueueDefaults,
  o: QueueDefaults,
  name: (key: string) => string,
): Pick<ResolvedQueueDefaults, 'maxPayloadBytes' | 'queues'> {
  const maxPayloadBytes =
    o.maxPayloadBytes === undefined
      ? defaults.maxPayloadBytes
      : checkInt(name('maxPayloadBytes'), o.maxPayloadBytes, 1, MAX_PAYLOAD_BYTES);
  if (o.queues === undefined) return { maxPayloadBytes, queues: defaults.queues };
  const queues = perQueue(name('queues'), o.queues, (option, options) => {
    const q = checkKnownKeys(option, options, QUEUE_OWN_KEYS) as QueueOwnOptions;
    return {
      maxPayloadBytes:
        q.maxPayloadBytes === undefined
          ? maxPayloadBytes
          : checkInt(`${option}.maxPayloadBytes`, q.maxPayloadBytes, 1, MAX_PAYLOAD_BYTES),
    };
  });
  return { maxPayloadBytes, queues };
}

/**
 * `queue.workers`: each queue's worker options, checked as a worker's (an error names the queue
 * and the option: `queue.workers.orders.concurrency`) and kept as given, to be applied over the
 * options of every worker of that queue.
 */
function resolveWorkersConfig(
  workers: unknown,
  option: string,
): ReadonlyMap<string, QueueWorkersConfig> {
  return perQueue(option, workers, (prefix, value) => {
    const { names, ...worker } = checkKnownKeys(
      prefix,
      value,
      WORKER_CONFIG_KEYS,
    ) as QueueWorkersConfig;
    resolveWorkerOptions(QUEUE_DEFAULTS, worker, WORKER_KEYS, undefined, prefix);
    if (names === undefined) return worker;
    const named = checkKnownKeys(`${prefix}.names`, names, Object.keys(names ?? {}));
    const checked: Record<string, NamedHandlerConfig> = {};
    for (const [handler, options] of Object.entries(named)) {
      const at = `${prefix}.names.${handler}`;
      checkTaskName(`${prefix}.names`, handler);
      const h = checkKnownKeys(at, options, NAMED_CONFIG_KEYS) as NamedHandlerConfig;
      if (h.concurrency !== undefined) {
        checkInt(`${at}.concurrency`, h.concurrency, 1, MAX_CONCURRENCY);
      }
      if (h.timeoutMs !== undefined) checkTimeoutMs(`${at}.timeoutMs`, h.timeoutMs);
      checked[handler] = { ...h };
    }
    return { ...worker, names: checked };
  });
}

/**
 * A map of options by queue name (`queue.queues`, `queue.workers`): each key checked as a queue
 * name, each value resolved by `resolve(option, value)` (`option`: `queue.queues.<name>`).
 */
function perQueue<T>(
  option: string,
  value: unknown,
  resolve: (option: string, value: unknown) => T,
): ReadonlyMap<string, T> {
  // Any key is known here: each is checked as a queue name below.
  const own = checkKnownKeys(option, value, Object.keys(value ?? {}));
  const out = new Map<string, T>();
  for (const [queue, options] of Object.entries(own)) {
    try {
      checkQueueName(queue);
    } catch {
      throw new RedisLockOptionsError(
        option,
        queue,
        `queue names as keys (non-empty, at most ${MAX_QUEUE_NAME_BYTES} bytes)`,
      );
    }
    out.set(queue, resolve(`${option}.${queue}`, options));
  }
  return out;
}

/**
 * A task or handler name (`enqueue`'s and a worker's `name`): a non-empty string without NUL or a
 * lone surrogate, at most 512 UTF-8 bytes; throws what `invalid` makes (`RedisLockOptionsError` by default).
 */
export function checkTaskName(option: string, value: unknown, invalid?: InvalidValue): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.includes('\0') ||
    utf8BytesOver(value, MAX_QUEUE_NAME_BYTES) !== undefined ||
    // Redis's cjson refuses a lone surrogate in the task's options: the enqueue would fail raw.
    LONE_SURROGATE.test(value)
  ) {
    throw (invalid ?? invalidOption)(
      option,
      value,
      `a non-empty, well-formed string without NUL of at most ${MAX_QUEUE_NAME_BYTES} bytes`,
    );
  }
  return value;
}

/**
 * Validates worker options (`@QueueWorker`, `process`; `claim` with its subset `known` and
 * `QueueError`s) and fills unset ones from the module's queue defaults; throws
 * `RedisLockOptionsError` (or what `invalid` makes) naming the option.
 */
export function resolveWorkerOptions(
  defaults: ResolvedQueueDefaults,
  options: QueueWorkerOptions | undefined,
  known: readonly string[] = WORKER_KEYS,
  invalid?: InvalidValue,
  option = '',
): ResolvedWorkerOptions {
  const o = checkKnownKeys(option, options, known, invalid) as QueueWorkerOptions;
  const name = (key: string) => (option ? `${option}.${key}` : key);
  if (o.name !== undefined && o.batch !== undefined) {
    throw (invalid ?? invalidOption)(
      name('batch'),
      o.batch,
      'no batch beside a name (a named handler runs one task per call)',
    );
  }
  return {
    ...resolveQueueKeys(defaults, o, option, invalid),
    limiter: checkRateLimit(name('limiter'), o.limiter, invalid),
    groupLimiter: checkRateLimit(name('groupLimiter'), o.groupLimiter, invalid),
    timeoutMs:
      o.timeoutMs === undefined
        ? undefined
        : checkTimeoutMs(name('timeoutMs'), o.timeoutMs, invalid),
    backoff: checkBackoff(name('backoff'), o.backoff, invalid, true),
    batch: o.batch === undefined ? undefined : checkBatch(o.batch, invalid),
    ...(o.name === undefined ? {} : { name: checkTaskName(name('name'), o.name, invalid) }),
  };
}

function resolveQueueKeys(
  defaults: ResolvedQueueDefaults,
  o: QueueDefaults,
  option: string,
  invalid?: InvalidValue,
): ResolvedQueueDefaults {
  const name = (key: string) => (option ? `${option}.${key}` : key);
  return {
    eventsMaxLen: defaults.eventsMaxLen,
    maxResultBytes: defaults.maxResultBytes,
    maxPayloadBytes: defaults.maxPayloadBytes,
    queues: defaults.queues,
    workers: defaults.workers,
    ...(defaults.maxSize === undefined ? {} : { maxSize: defaults.maxSize }),
    ...(defaults.waitForReplicas ? { waitForReplicas: defaults.waitForReplicas } : {}),
    leaseMs:
      o.leaseMs === undefined ? defaults.leaseMs : checkMs(name('leaseMs'), o.leaseMs, 1, invalid),
    maxAttempts:
      o.maxAttempts === undefined
        ? defaults.maxAttempts
        : checkInt(name('maxAttempts'), o.maxAttempts, 1, MAX_ATTEMPTS, invalid),
    backoffMs:
      o.backoffMs === undefined
        ? defaults.backoffMs
        : checkMs(name('backoffMs'), o.backoffMs, 0, invalid),
    concurrency:
      o.concurrency === undefined
        ? defaults.concurrency
        : checkInt(name('concurrency'), o.concurrency, 1, MAX_CONCURRENCY, invalid),
    drainTimeoutMs:
      o.drainTimeoutMs === undefined
        ? defaults.drainTimeoutMs
        : checkMs(name('drainTimeoutMs'), o.drainTimeoutMs, 0, invalid),
    groupConcurrency:
      o.groupConcurrency === undefined
        ? defaults.groupConcurrency
        : checkInt(name('groupConcurrency'), o.groupConcurrency, 1, MAX_CONCURRENCY, invalid),
    keepCompleted:
      o.keepCompleted === undefined
        ? defaults.keepCompleted
        : checkKeep(name('keepCompleted'), o.keepCompleted, invalid),
    keepDead:
      o.keepDead === undefined
        ? defaults.keepDead
        : checkKeep(name('keepDead'), o.keepDead, invalid),
    retryLogLevel:
      o.retryLogLevel === undefined
        ? defaults.retryLogLevel
        : checkLogLevel(name('retryLogLevel'), o.retryLogLevel, invalid),
  };
}

const EVICTION_MODES: readonly EvictionPolicyMode[] = ['warn', 'fail', 'ignore'];

const LOG_LEVELS = ['error', 'warn', 'log', 'debug', 'verbose', 'off'] as const;

function checkLogLevel(option: string, value: unknown, invalid?: InvalidValue): RetryLogLevel {
  return checkOneOf(option, value, LOG_LEVELS, invalid);
}

/** An instance id: 1 to 200 printable ASCII characters (it is shown by `inspect`). */
function checkInstanceId(value: unknown): string {
  if (typeof value !== 'string' || !/^[\x21-\x7e][\x20-\x7e]{0,199}$/.test(value)) {
    throw new RedisLockOptionsError(
      'instanceId',
      value,
      'a string of 1 to 200 printable ASCII characters (not starting with a space)',
    );
  }
  return value;
}

/** A metrics label: 1 to 200 characters. */
/** Longest lock `label`, in characters (a metrics attribute). */
export const MAX_LABEL_LENGTH = 200;

function checkLabel(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_LABEL_LENGTH) {
    throw new RedisLockOptionsError(
      'label',
      value,
      `a string of 1 to ${MAX_LABEL_LENGTH} characters`,
    );
  }
  return value;
}
