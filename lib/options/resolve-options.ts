import type {
  LockOptions,
  WaitForReplicasOptions,
  WithLockOptions,
} from '../interfaces/lock-options.interface';
import type {
  QueueDefaults,
  RedisConnectionOption,
  RedisLockModuleOptions,
} from '../interfaces/redis-lock-module-options.interface';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkBoolean, checkInt, checkKnownKeys, checkMs, checkPrefix } from './validate';

/** Lock options with every default applied. */
export interface ResolvedLockOptions {
  ttlMs: number;
  waitMs: number;
  retryIntervalMs: number;
  fair: boolean;
  fencing: boolean;
  keyPrefix: string;
  autoExtend: boolean;
  signal?: AbortSignal;
  waitForReplicas?: WaitForReplicasOptions;
}

/** Module options with every default applied. */
export interface ResolvedModuleOptions {
  redis: RedisConnectionOption;
  keyPrefix: string;
  commandTimeoutMs: number;
  lock: ResolvedLockOptions;
  queue: Required<QueueDefaults>;
  /** Quorum mode's independent masters; empty when locks use `redis`. */
  nodes: RedisConnectionOption[];
  clockDriftFactor: number;
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
] as const;
const QUEUE_KEYS = [
  'leaseMs',
  'maxAttempts',
  'backoffMs',
  'concurrency',
  'drainTimeoutMs',
] as const;
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
] as const;
const WAIT_FOR_REPLICAS_KEYS = ['replicas', 'timeoutMs'] as const;

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
    throw new RedisLockOptionsError(option, value, "a URL starting with 'redis://' or 'rediss://'");
  }
  return value as RedisConnectionOption;
}

function checkWaitForReplicas(option: string, value: unknown): WaitForReplicasOptions | undefined {
  if (value === undefined) return undefined;
  checkKnownKeys(option, value, WAIT_FOR_REPLICAS_KEYS);
  const w = value as Partial<WaitForReplicasOptions>;
  return {
    replicas: checkInt(`${option}.replicas`, w.replicas, 1, 1_000),
    timeoutMs: checkInt(`${option}.timeoutMs`, w.timeoutMs, 1, MAX_LOCK_MS),
  };
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
  const clockDriftFactor = options.clockDriftFactor ?? 0.01;
  if (typeof clockDriftFactor !== 'number' || !(clockDriftFactor >= 0 && clockDriftFactor < 0.5)) {
    throw new RedisLockOptionsError(
      'clockDriftFactor',
      clockDriftFactor,
      'a number from 0 to less than 0.5',
    );
  }
  if (nodes.length > 0 && options.waitForReplicas !== undefined) {
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
  checkKnownKeys('queue', options.queue, QUEUE_KEYS);
  const q = options.queue ?? {};
  const queue: Required<QueueDefaults> = {
    leaseMs: checkMs('queue.leaseMs', q.leaseMs ?? 30_000, 1),
    maxAttempts: checkInt('queue.maxAttempts', q.maxAttempts ?? 5, 1, 1_000_000),
    backoffMs: checkMs('queue.backoffMs', q.backoffMs ?? 1_000, 0),
    concurrency: checkInt('queue.concurrency', q.concurrency ?? 1, 1, 10_000),
    drainTimeoutMs: checkMs('queue.drainTimeoutMs', q.drainTimeoutMs ?? 10_000, 0),
  };
  return {
    redis,
    keyPrefix,
    commandTimeoutMs: checkMs('commandTimeoutMs', options.commandTimeoutMs ?? 5_000, 1),
    lock,
    queue,
    nodes,
    clockDriftFactor,
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
    signal,
    waitForReplicas:
      o.waitForReplicas === undefined
        ? defaults.waitForReplicas
        : checkWaitForReplicas('waitForReplicas', o.waitForReplicas),
  };
}
