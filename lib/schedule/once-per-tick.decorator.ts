import { RedisLockError } from '../errors/redis-lock.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { lockServiceRegistry } from '../decorators/lock-service.registry';
import { MAX_KEY_BYTES } from '../lock/lock-keys';
import { decoratedMethod, replaceMethod } from '../decorators/method-wrapper';
import { checkInt, checkKnownKeys } from '../options/validate';
import { handlerSchedule } from './schedule-metadata';
import { TickClaims } from './tick-claims';
import { tickPlan, type TickPlan, type TickSettings } from './tick-plan';

/** Options of `@OncePerTick`. */
export interface OncePerTickOptions {
  /**
   * The job's name: instances share ticks by it (keys `<keyPrefix>tick:{<name>}`; a name with
   * braces is encoded like a lock name, see docs/locks.md).
   * @default 'Class.method'
   */
  name?: string;
  /**
   * `@Cron`: how far apart the clocks of two instances may be, in ms, and never both run a tick.
   * The tick's claim lives about twice as long. (`@Interval` windows use the Redis clock.)
   * @default 2000
   */
  skewMs?: number;
  /**
   * How long a claimed tick may wait to be started, in ms: when its claimer has not started it
   * by then (it was killed), another instance takes the tick over.
   * @default 1000
   */
  startLeaseMs?: number;
  /**
   * `@Timeout`: after one instance ran the handler, instances whose timeout fires within this
   * many ms skip it (one run per deploy).
   * @default 60000
   */
  windowMs?: number;
}

const OPTION_KEYS = ['name', 'skewMs', 'startLeaseMs', 'windowMs'] as const;
const MAX_MS = 86_400_000;

/** @internal A decorated handler: what each call needs, the tick plan read on first call. */
interface TickedMethod {
  readonly original: (...args: unknown[]) => unknown;
  readonly job: string;
  readonly where: string;
  readonly settings: TickSettings;
  plan?: TickPlan;
}

/**
 * Runs a `@nestjs/schedule` handler (`@Cron`, `@Interval`, `@Timeout`) on exactly one instance
 * per scheduled tick, however many instances run it. Written above or below the schedule
 * decorator. Every instance's scheduler still calls the handler; the first to claim the tick in
 * Redis runs it, the others resolve `undefined` at once (one debug line).
 *
 * - `@Cron`: the tick is the scheduled time (computed by croner from the expression, `timeZone`
 *   or `utcOffset`, on the local clock). Instances whose clocks differ by up to `skewMs` never
 *   both run a tick.
 * - `@Interval(ms)`: the tick is an `ms` window of the Redis clock (instances' intervals start
 *   at their boot, so they are not aligned): each window runs on the first instance whose
 *   interval fires in it.
 * - `@Timeout`: runs on the first instance whose timeout fires, and on none within `windowMs`
 *   after it.
 *
 * A claim is never released (not when the handler returns, not on shutdown): it lapses once the
 * tick is over. An instance killed after claiming a tick but before starting it loses it to
 * another instance after `startLeaseMs`; one that dies while running it does not run it again
 * (at most once per tick; use queue schedules for at-least-once). `currentTick()` tells the
 * running handler which tick it has. `@nestjs/schedule` is not loaded by this library.
 * @param options job name, tolerated clock skew, start lease, timeout window
 * @example
 * ```ts
 * @Cron('0 * * * * *')
 * @OncePerTick()
 * async sendDigest() { … }          // once a minute across all instances
 *
 * @OncePerTick({ name: 'cleanup' })
 * @Interval(30_000)
 * async cleanup() { … }
 * ```
 */
export function OncePerTick(options?: OncePerTickOptions): MethodDecorator {
  const settings = checkOptions(options);
  return <T>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<T>,
  ): TypedPropertyDescriptor<T> => {
    const { original, where } = decoratedMethod('@OncePerTick', target, propertyKey, descriptor);
    const method: TickedMethod = {
      original,
      job: options?.name ?? where,
      where,
      settings,
    };
    const wrapper = function (this: unknown, ...args: unknown[]) {
      return runTick(method, wrapper, this, args);
    };
    // The schedule decorator's metadata: below this one it is on the original, copied to the
    // wrapper; above it lands on the wrapper. @nestjs/schedule and runTick read the wrapper's. The
    // explorer binds the instance to its module's LockService, whose TickClaims the wrapper uses.
    return replaceMethod(target, propertyKey, descriptor, original, wrapper);
  };
}

async function runTick(
  method: TickedMethod,
  wrapper: object,
  self: unknown,
  args: unknown[],
): Promise<unknown> {
  if (!method.plan) {
    const schedule = handlerSchedule(wrapper);
    if (!schedule) {
      throw new RedisLockError(
        `@OncePerTick on ${method.where}: the method has no @Cron, @Interval or @Timeout (@nestjs/schedule)`,
      );
    }
    method.plan = tickPlan(schedule, method.settings, method.where);
  }
  const locks = lockServiceRegistry.find(self);
  const claims = locks && TickClaims.of(locks);
  if (!claims) {
    throw new RedisLockError(
      `@OncePerTick on ${method.where}: no RedisLockModule serves this instance — import RedisLockModule.forRoot() in its module`,
    );
  }
  return claims.runOnce(method.job, method.plan(Date.now()), method.settings, () =>
    method.original.apply(self, args),
  );
}

function checkOptions(options: OncePerTickOptions | undefined): TickSettings {
  const o = checkKnownKeys('', options, OPTION_KEYS) as OncePerTickOptions;
  // The name is part of a Redis key written every tick: bounded as a lock's name is.
  if (
    o.name !== undefined &&
    (typeof o.name !== 'string' || o.name.length === 0 || Buffer.byteLength(o.name) > MAX_KEY_BYTES)
  ) {
    throw new RedisLockOptionsError(
      'name',
      o.name,
      `a non-empty string of at most ${MAX_KEY_BYTES} bytes`,
    );
  }
  return {
    skewMs: o.skewMs === undefined ? 2_000 : checkInt('skewMs', o.skewMs, 0, MAX_MS),
    startLeaseMs:
      o.startLeaseMs === undefined ? 1_000 : checkInt('startLeaseMs', o.startLeaseMs, 1, MAX_MS),
    windowMs: o.windowMs === undefined ? 60_000 : checkInt('windowMs', o.windowMs, 1, MAX_MS),
  };
}
