import { Observable, throwError } from 'rxjs';
import { RedisLockError } from '../errors/redis-lock.error';
import type { WithLockOptions } from '../interfaces/lock-options.interface';
import type { LockService } from '../lock/lock.service';
import {
  MAX_LABEL_LENGTH,
  resolveLockOptions,
  type ResolvedLockOptions,
} from '../options/resolve-options';
import { lockServiceRegistry } from './lock-service.registry';
import { heldCall, runLockedStream } from './locked-stream';
import { decoratedMethod, rejectSignalOption, replaceMethod } from './method-wrapper';
import {
  compileLockKey,
  type KeyedMethodDecorator,
  type LockKeyBuilder,
  type LockKeyFunction,
  type WithLockKey,
} from './with-lock-key';

/**
 * Options of `@WithLock`; unset ones fall back to the module's defaults (`ttlMs` 30000,
 * `waitMs` 0, `retryIntervalMs` 100, `fair` and `fencing` on, the module's `keyPrefix`).
 * `autoExtend` (default on) extends the lock every `ttlMs / 3` while the method runs;
 * `skipIfLocked` (default off) skips the method instead of throwing when the lock is busy;
 * `mode: 'shared'` takes a read lock (any number of shared holders, or one exclusive).
 */
export type WithLockDecoratorOptions = Omit<WithLockOptions, 'signal'>;

/** @internal Everything a wrapped method needs on each call, fixed when it is decorated. */
export interface LockedMethod {
  readonly original: (...args: unknown[]) => unknown;
  readonly keys: LockKeyBuilder;
  readonly options: WithLockDecoratorOptions | undefined;
  /** `Class.method`, for messages. */
  readonly where: string;
  readonly className: string;
}

/** @internal Any valid lock options: only used to validate decorator options when decorated. */
export const VALIDATION_BASE: ResolvedLockOptions = {
  ttlMs: 30_000,
  waitMs: 0,
  retryIntervalMs: 100,
  fair: true,
  fencing: true,
  keyPrefix: '',
  autoExtend: true,
};

/**
 * Runs the method while holding a Redis lock whose key is built from its arguments (through
 * `LockService.withLock`: auto-extended, reentrant within one async call chain, always released).
 *
 * `key` is a template (`'stock:<0>'`: `<N>` is the N-th argument as the method receives it, after
 * pipes for a handler; `<N.a.b>` a field of it; `<<` a literal `<`), an array of templates (all
 * keys or none), or a function of the arguments returning the key or keys. Templates and options
 * are checked here, when the class is defined (`LockKeyError`, `RedisLockOptionsError`); at call
 * time a missing, empty or non-scalar value throws `LockKeyError` before any lock is taken.
 *
 * Decorate async methods: the decorated method returns a Promise of its result (or, when it is
 * declared to return an Observable, an Observable that takes the lock on each subscription). An
 * Observable result keeps the lock until it completes, errors or is unsubscribed. Contention
 * rejects with `LockTimeoutError`; over HTTP, `LockInterceptor` turns that into `423 Locked`.
 * With `skipIfLocked: true` contention is not an error: the method is not run, the call resolves
 * `undefined` (an Observable-returning method's stream completes without a value) and one debug
 * line is logged.
 * Other decorators keep working written above or below this one (or composed with it by
 * `applyDecorators`); the method keeps its `name` and `length`.
 *
 * The `LockService` is found without injection: the one of the nearest `RedisLockModule` the
 * class's module imports (a global one counts), else the application's only one, else, for an
 * instance Nest does not manage, the process's only one.
 * A key function's parameters are checked against the method's: they must accept the method's
 * leading arguments (it may declare fewer parameters than the method).
 * @param key template, templates, or `(...args) => string | string[]`
 * @param options lock options; unset ones come from the module
 * @example
 * ```ts
 * @Post(':sku/buy')
 * @WithLock('stock:<0>', { waitMs: 2000, ttlMs: 5000 })
 * async buy(@Param('sku') sku: string, @Body() dto: BuyDto) { … }
 *
 * @WithLock(['account:<0.from>', 'account:<0.to>']) // multi-key, all-or-nothing
 * async transfer(cmd: TransferCommand) { … }
 *
 * @WithLock((order: Order) => `order:${order.id}`, { autoExtend: true })
 * async settle(order: Order) { … }
 * ```
 */
export function WithLock<A extends unknown[]>(
  key: LockKeyFunction<A>,
  options?: WithLockDecoratorOptions,
): KeyedMethodDecorator<A>;
export function WithLock(
  key: string | readonly string[],
  options?: WithLockDecoratorOptions,
): MethodDecorator;
export function WithLock(key: WithLockKey, options?: WithLockDecoratorOptions): MethodDecorator {
  const lockOptions = checkDecoratorOptions(options);
  return <T>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<T>,
  ): TypedPropertyDescriptor<T> => {
    const { original, where, className } = decoratedMethod(
      '@WithLock',
      target,
      propertyKey,
      descriptor,
    );
    const paramtypes: unknown = Reflect.getMetadata('design:paramtypes', target, propertyKey);
    const declared = Math.max(original.length, Array.isArray(paramtypes) ? paramtypes.length : 0);
    const method: LockedMethod = {
      original,
      keys: compileLockKey(key, where, declared),
      // The template, not the key, names the lock in metrics (bounded cardinality).
      options:
        typeof key === 'function' || lockOptions?.label !== undefined
          ? lockOptions
          : { ...lockOptions, label: templateLabel(typeof key === 'string' ? key : key.join(',')) },
      where,
      className,
    };
    const wrapper = isObservableType(Reflect.getMetadata('design:returntype', target, propertyKey))
      ? function (this: unknown, ...args: unknown[]) {
          return lockedStream(method, this, args);
        }
      : function (this: unknown, ...args: unknown[]) {
          return lockedCall(method, this, args);
        };
    return replaceMethod(target, propertyKey, descriptor, original, wrapper);
  };
}

/** A method returning a Promise (or a plain value): the result arrives after the release. */
async function lockedCall(method: LockedMethod, self: unknown, args: unknown[]): Promise<unknown> {
  const names = method.keys(self, args);
  const locks = lockServiceOf(method, self);
  return heldCall(
    (fn) => locks.withLock(names, fn, method.options),
    method.where,
    () => method.original.apply(self, args),
  );
}

/** A method declared to return an Observable: the lock is taken on each subscription. */
function lockedStream(method: LockedMethod, self: unknown, args: unknown[]): Observable<unknown> {
  let names: string[];
  let locks: LockService;
  try {
    names = method.keys(self, args);
    locks = lockServiceOf(method, self);
  } catch (err) {
    return throwError(() => err);
  }
  return runLockedStream(
    (fn, signal) => locks.withLock(names, fn, { ...method.options, signal }),
    () => method.original.apply(self, args),
  );
}

function lockServiceOf(method: LockedMethod, self: unknown): LockService {
  const found = lockServiceRegistry.find(self);
  if (found) return found;
  const running = lockServiceRegistry.size;
  throw new RedisLockError(
    `@WithLock on ${method.where}: no LockService — import RedisLockModule.forRoot() in the ` +
      `module that provides ${method.className}` +
      (running > 1
        ? ` (${running} RedisLockModules are running and none is known to serve this instance)`
        : ''),
  );
}

function checkDecoratorOptions(
  options: WithLockDecoratorOptions | undefined,
): WithLockDecoratorOptions | undefined {
  rejectSignalOption('@WithLock', 'LockService.withLock', options);
  resolveLockOptions(VALIDATION_BASE, options);
  return options === undefined ? undefined : Object.freeze({ ...options });
}

/**
 * The metrics label of a template (or of templates joined with `,`): the template itself, cut to
 * `MAX_LABEL_LENGTH` characters ending in `…` when longer. A key template may be up to 512 bytes,
 * and the label is not an option the user set: refusing it would fail every call of a valid
 * lock on a name only metrics show. The cut keeps a surrogate pair whole.
 * @example templateLabel('report:' + 'x'.repeat(300)) // 'report:xxx…' (200 characters)
 */
function templateLabel(template: string): string {
  if (template.length <= MAX_LABEL_LENGTH) return template;
  const cut = template.slice(0, MAX_LABEL_LENGTH - 1);
  return `${/[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut}…`;
}

/** @internal Whether a method's declared return type is an Observable. */
export function isObservableType(type: unknown): boolean {
  return (
    typeof type === 'function' && (type === Observable || type.prototype instanceof Observable)
  );
}
