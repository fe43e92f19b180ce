import type { CanActivate, Type } from '@nestjs/common';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { checkBoolean, checkInt, checkKnownKeys } from '../options/validate';
import { checkQueueNameOption } from '../options/queue-limits';

/** Options of `RedisLockDashboardModule.forRoot`. */
export interface RedisLockDashboardOptions {
  /**
   * Where the page is served; its data endpoints live under `<path>/api`. Any global prefix of
   * the app comes before it.
   * @default '/redis-lock'
   */
  path?: string;
  /**
   * Hides the requeue / cancel / delete / pause / resume buttons, and every mutation endpoint
   * answers `403 Forbidden` with a JSON body saying so. Read-only still shows every lock key and
   * every task's payload, result and error: only `guards` protect the data.
   * @default true without `guards`, false with them (the app opts in to actions by giving
   * guards, or by setting `readOnly: false` explicitly)
   * @example readOnly: false // with guards: [AdminGuard], or behind a proxy that authenticates
   */
  readOnly?: boolean;
  /**
   * Nest guards (classes, resolved by the module's injector, or instances) applied to the page,
   * its assets and every data endpoint, as `@UseGuards(...guards)` would. Without any, the module
   * logs a warning at start: the page is open to anyone who can reach the app.
   * @default []
   * @example guards: [AdminGuard]
   */
  guards?: Array<Type<CanActivate> | CanActivate>;
  /**
   * Queues always shown, besides those with a worker in this app and those found by the key scan.
   * Each must be a name the queue accepts (else `RedisLockOptionsError` naming `queues[i]`).
   * @default []
   */
  queues?: string[];
  /**
   * Keys examined at most by each `SCAN` of a refresh (one looks for held locks, one for queues;
   * `KEYS` is never used): beyond it, the page says the list is cut short.
   * @default 10000
   */
  maxScanKeys?: number;
  /**
   * Held locks shown at most (use the search box to find others).
   * @default 100
   */
  maxLocks?: number;
  /**
   * The overview the page polls (`GET <path>/api/overview`, two key scans) is computed at most
   * once per this many ms, whatever the number of clients: callers with the same search share
   * one computation (running, or finished less than this long ago), and computations for
   * different searches start at least this far apart. At most 8 searches hold a turn at once
   * (computed within the last interval, or waiting); a ninth answers `429 Too Many Requests`.
   * @default 500
   * @example overviewIntervalMs: 2000
   */
  overviewIntervalMs?: number;
}

/** `RedisLockDashboardOptions` with every default applied. */
export interface ResolvedDashboardOptions {
  /** The controller path, without a leading or trailing slash. */
  path: string;
  readOnly: boolean;
  guards: Array<Type<CanActivate> | CanActivate>;
  queues: string[];
  maxScanKeys: number;
  maxLocks: number;
  overviewIntervalMs: number;
}

const PATH = /^[A-Za-z0-9._~\-/]+$/;

/**
 * Validates the dashboard options and applies the defaults.
 * @throws RedisLockOptionsError naming the offending option and value
 */
export function resolveDashboardOptions(options: unknown): ResolvedDashboardOptions {
  const o = checkKnownKeys('', options, [
    'path',
    'readOnly',
    'guards',
    'queues',
    'maxScanKeys',
    'maxLocks',
    'overviewIntervalMs',
  ]) as RedisLockDashboardOptions;
  const path = o.path ?? '/redis-lock';
  const trimmed = typeof path === 'string' ? path.replace(/^\/+|\/+$/g, '') : '';
  if (typeof path !== 'string' || !PATH.test(trimmed) || trimmed.includes('//')) {
    throw new RedisLockOptionsError(
      'path',
      path,
      "a URL path such as '/redis-lock' (letters, digits, '.', '_', '~', '-', '/')",
    );
  }
  const guards = o.guards ?? [];
  if (!Array.isArray(guards)) {
    throw new RedisLockOptionsError('guards', guards, 'an array of guard classes or instances');
  }
  guards.forEach((guard, i) => {
    const ok =
      typeof guard === 'function' ||
      (typeof guard === 'object' &&
        guard !== null &&
        typeof (guard as CanActivate).canActivate === 'function');
    if (!ok) {
      throw new RedisLockOptionsError(`guards[${i}]`, guard, 'a guard class or instance');
    }
  });
  const queues = o.queues ?? [];
  if (!Array.isArray(queues)) throw new RedisLockOptionsError('queues', queues, 'an array');
  // The queue's own check (also refusing a lone surrogate): a name every queue call refuses
  // would make every overview fail, locks included.
  queues.forEach((queue, i) => checkQueueNameOption(`queues[${i}]`, queue));
  return {
    path: trimmed,
    // Actions are opt-in: guards in front of the page, or `readOnly: false` said explicitly.
    readOnly: o.readOnly === undefined ? guards.length === 0 : checkBoolean('readOnly', o.readOnly),
    guards: [...guards],
    queues: [...new Set(queues)],
    maxScanKeys:
      o.maxScanKeys === undefined ? 10_000 : checkInt('maxScanKeys', o.maxScanKeys, 100, 1_000_000),
    maxLocks: o.maxLocks === undefined ? 100 : checkInt('maxLocks', o.maxLocks, 1, 1_000),
    overviewIntervalMs:
      o.overviewIntervalMs === undefined
        ? 500
        : checkInt('overviewIntervalMs', o.overviewIntervalMs, 50, 60_000),
  };
}
