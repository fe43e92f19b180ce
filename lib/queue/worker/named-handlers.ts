import { describeValue } from '../../errors/describe-value';
import { RedisLockOptionsError } from '../../errors/redis-lock-options.error';
import { UnknownTaskNameError } from '../../errors/unknown-task-name.error';
import { checkInt } from '../../options/validate';
import type {
  QueueHandler,
  QueueWorkerHandle,
  QueueWorkerOptions,
} from '../interfaces/queue-options.interface';
import type { LeasedTask } from '../interfaces/task.interface';
import { MAX_CONCURRENCY } from '../queue.constants';

/** The handler of one task name, with its own concurrency (`@QueueWorker(queue, { name })`). */
export interface NamedHandler {
  readonly name: string;
  readonly handler: QueueHandler;
  /** Whether the handler gets the task's signal as its second argument (see `QueueWorkerRunner`). */
  readonly givesSignal: boolean;
  concurrency: number;
  /** Its own run timeout (`timeoutMs` of its registration or configuration), if any. */
  readonly timeoutMs?: number;
  /** Tasks of this name running now. */
  running: number;
  /**
   * Tasks of this name claimed while `running` was at `concurrency`, first come first served:
   * each is called with `true` when it takes a slot, `false` when it must not run (the loop stops,
   * or this name's handler was closed).
   */
  readonly waiting: ((run: boolean) => void)[];
}

/**
 * The claim loop of a queue's named handlers, as they need it: closed with its last handler, and
 * asked to drain the tasks of one name when that name's handler closes before.
 */
export interface NamedLoopRunner extends QueueWorkerHandle {
  /**
   * The name's handler was closed: waits up to `drainTimeoutMs` for its running tasks, then gives
   * the rest back (their signals abort), as the loop's own shutdown does.
   */
  drainName(entry: NamedHandler): Promise<void>;
}

/**
 * The named handlers of one queue on one instance, behind its one claim loop: the loop has as many
 * slots as their concurrencies add up to, and each claimed task runs in its name's handler once
 * fewer than that handler's `concurrency` run (until then it waits here, its lease renewed like a
 * running task's). Claims do not look at names: no Redis command is added per claim.
 */
export class NamedHandlers {
  private readonly byName = new Map<string, NamedHandler>();
  /** The handles `process(queue, handler, { name })` returned, by name (`localWorkers`). */
  private readonly handles = new Map<NamedHandler, QueueWorkerHandle>();
  /** The `waiting` entry of each task waiting for a slot, by the owner given to `take`. */
  private readonly waiters = new WeakMap<object, (run: boolean) => void>();
  /** Called when the loop's slots change (a handler added, removed, or its concurrency changed). */
  onSlotsChanged?: () => void;
  /**
   * Called when a name is added or removed once the loop runs; the queue service writes the
   * loop's workers registry entry at once, so that other instances do not bury the tasks of a new
   * name as unknown until the next heartbeat.
   */
  onNamesChanged?: () => void;
  /**
   * Whether a live worker of the queue elsewhere (another instance, another module's loop) runs
   * tasks of `name` (the workers registry); set by the queue service.
   */
  handledElsewhere: (name: string | undefined) => Promise<boolean> = () => Promise.resolve(false);

  constructor(readonly queue: string) {}

  /** The loop's slots: the handlers' concurrencies added up. */
  get total(): number {
    let n = 0;
    for (const h of this.byName.values()) n += h.concurrency;
    return n;
  }

  get size(): number {
    return this.byName.size;
  }

  /** The names that have a handler. */
  get names(): string[] {
    return [...this.byName.keys()];
  }

  /** Registers the handler of `name`; a second one for the same name is refused. */
  add(name: string, handler: QueueHandler, concurrency: number, timeoutMs?: number): NamedHandler {
    if (this.byName.has(name)) {
      throw new RedisLockOptionsError(
        'name',
        name,
        `a name without another handler on queue '${this.queue}' in this module`,
      );
    }
    const entry: NamedHandler = {
      name,
      handler,
      givesSignal: handler.length !== 1,
      concurrency,
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      running: 0,
      waiting: [],
    };
    this.byName.set(name, entry);
    this.onSlotsChanged?.();
    this.onNamesChanged?.();
    return entry;
  }

  /** Removes the handler of `entry`'s name: its tasks waiting for a slot are told not to run. */
  remove(entry: NamedHandler): void {
    if (this.byName.get(entry.name) !== entry) return;
    this.byName.delete(entry.name);
    this.handles.delete(entry);
    this.stopWaiting(entry);
    this.onSlotsChanged?.();
    this.onNamesChanged?.();
  }

  /** The handles of the named handlers here, one per name. */
  get namedHandles(): QueueWorkerHandle[] {
    return [...this.handles.values()];
  }

  /**
   * Tells the tasks waiting for a slot of `entry` (of every name, without one) that they must not
   * run: the loop stops, or the name's handler was closed.
   */
  stopWaiting(entry?: NamedHandler): void {
    for (const e of entry ? [entry] : this.byName.values()) {
      for (const wake of e.waiting.splice(0)) wake(false);
    }
  }

  setConcurrency(entry: NamedHandler, n: number): void {
    entry.concurrency = checkInt('concurrency', n, 1, MAX_CONCURRENCY);
    this.wakeWaiting(entry);
    this.onSlotsChanged?.();
  }

  /** The handler of `task`'s name; `undefined` when there is none here. */
  route(task: LeasedTask): NamedHandler | undefined {
    return task.name === undefined ? undefined : this.byName.get(task.name);
  }

  /** What ends a task that no handler runs, here or on a live worker elsewhere. */
  unknownName(task: LeasedTask): UnknownTaskNameError {
    return new UnknownTaskNameError(this.queue, task.id, task.name, [...this.byName.keys()]);
  }

  /**
   * Takes a run slot of `entry`: at once when fewer than its `concurrency` run, else (a promise)
   * once one ends; `false` (nothing taken) when the loop stopped (`stopped`, or `stopWaiting`
   * later) or the name's handler was closed meanwhile, or `owner` withdrew (`withdraw`). One list
   * per name, no listener per task.
   */
  take(entry: NamedHandler, stopped: boolean, owner?: object): true | Promise<boolean> {
    if (stopped || this.byName.get(entry.name) !== entry) return Promise.resolve(false);
    if (entry.running < entry.concurrency) {
      entry.running++;
      return true;
    }
    return new Promise<boolean>((resolve) => {
      const wake = (run: boolean) => {
        if (run) entry.running++;
        resolve(run);
      };
      entry.waiting.push(wake);
      if (owner) this.waiters.set(owner, wake);
    });
  }

  /**
   * `owner` (as given to `take`) waits for a slot of `entry` no more (its task was cancelled): it
   * leaves the line, told `false` at once, rather than when a slot of its name frees.
   */
  withdraw(entry: NamedHandler, owner: object): void {
    const wake = this.waiters.get(owner);
    const at = wake ? entry.waiting.indexOf(wake) : -1;
    if (at < 0) return;
    entry.waiting.splice(at, 1);
    wake!(false);
  }

  /** Gives back a run slot of `entry` taken with `take`: the next waiting task of its name runs. */
  release(entry: NamedHandler): void {
    entry.running--;
    this.wakeWaiting(entry);
  }

  private wakeWaiting(entry: NamedHandler): void {
    while (entry.waiting.length > 0 && entry.running < entry.concurrency) {
      entry.waiting.shift()!(true);
    }
  }

  /**
   * The handle `process(queue, handler, { name })` returns: its `concurrency` is this name's;
   * `close()` removes the name (its waiting tasks are given back) and, like a worker's close,
   * drains its running tasks (`loop().drainName`); the loop stops with the last one
   * (`closeLoop`).
   */
  handle(
    entry: NamedHandler,
    loop: () => NamedLoopRunner | undefined,
    closeLoop: () => Promise<void>,
  ): QueueWorkerHandle {
    let closed: Promise<void> | undefined;
    const handle: QueueWorkerHandle = {
      queue: this.queue,
      get concurrency() {
        return entry.concurrency;
      },
      setConcurrency: (n: number) => this.setConcurrency(entry, n),
      close: () => {
        closed ??= (async () => {
          this.remove(entry);
          if (this.size === 0) await closeLoop();
          else await loop()?.drainName(entry);
        })();
        return closed;
      },
    };
    this.handles.set(entry, handle);
    return handle;
  }
}

/** The options a named handler has of its own; the others are its queue's claim loop's. */
const PER_NAME_OPTIONS: readonly string[] = ['name', 'concurrency', 'timeoutMs'];

/** One queue's named handlers, and the claim loop they share once it started. */
interface NamedLoop {
  readonly handlers: NamedHandlers;
  /** The loop options given by its handlers so far (each key by one, or the same by several). */
  readonly given: Record<string, unknown>;
  runner?: NamedLoopRunner;
  closed: boolean;
}

/**
 * The named handlers of every queue of one `QueueService`: one `NamedHandlers` and one claim loop
 * per queue. Handlers registered in the same tick (every `@QueueWorker` at bootstrap) are
 * gathered before the loop starts, so the loop options any of them gives apply from its first
 * claim; a handler added once the loop runs may only repeat them.
 */
export class NamedWorkerLoops {
  private readonly loops = new Map<string, NamedLoop>();

  constructor(
    /** Starts the claim loop of `handlers` with the loop options its handlers gave. */
    private readonly startLoop: (
      handlers: NamedHandlers,
      given: QueueWorkerOptions,
      onClosed: () => void,
    ) => NamedLoopRunner,
  ) {}

  /** The handles of `queue`'s named handlers (its loop started or about to). */
  handles(queue: string): QueueWorkerHandle[] {
    return this.loops.get(queue)?.handlers.namedHandles ?? [];
  }

  /**
   * The service shuts down: a loop whose handlers were added but whose start is still due (the
   * same tick) never starts. Started loops are closed with the service's other workers.
   */
  stop(): void {
    for (const loop of this.loops.values()) if (!loop.runner) loop.closed = true;
    this.loops.clear();
  }

  /**
   * Adds the handler of `name` to `queue`'s loop (`options`: as given to `process`; `concurrency`
   * and `timeoutMs`: resolved, configuration applied).
   * @throws RedisLockOptionsError for a name with a handler already, or a loop option that
   *   differs from another handler's (or comes once the loop runs)
   */
  add(
    queue: string,
    name: string,
    handler: QueueHandler,
    options: QueueWorkerOptions,
    concurrency: number,
    timeoutMs: number | undefined,
  ): QueueWorkerHandle {
    let loop = this.loops.get(queue);
    if (!loop || loop.closed) {
      const created: NamedLoop = { handlers: new NamedHandlers(queue), given: {}, closed: false };
      loop = created;
      this.loops.set(queue, created);
      queueMicrotask(() => {
        if (created.closed) return;
        created.runner = this.startLoop(created.handlers, created.given, () => {
          created.closed = true;
          if (this.loops.get(queue) === created) this.loops.delete(queue);
        });
      });
    }
    mergeLoopOptions(queue, loop, options);
    const entry = loop.handlers.add(name, handler, concurrency, timeoutMs);
    const current = loop;
    return loop.handlers.handle(
      entry,
      () => current.runner,
      async () => {
        current.closed = true;
        await current.runner?.close();
      },
    );
  }
}

/** Adds the loop options of one handler's `options` to `loop.given`, or refuses a conflict. */
function mergeLoopOptions(queue: string, loop: NamedLoop, options: QueueWorkerOptions): void {
  for (const [key, value] of Object.entries(options)) {
    if (PER_NAME_OPTIONS.includes(key) || value === undefined) continue;
    if (key in loop.given) {
      if (!sameOption(loop.given[key], value)) {
        // Both values as JSON text (the error's `value` too): an object shows as "an object
        // (Object)" otherwise, and the user could not tell which key differs.
        const shown = (v: unknown) => (isObject(v) ? canonicalJson(v) : v);
        throw new RedisLockOptionsError(
          key,
          shown(value),
          `the same value as the other named handlers of queue '${queue}', ${describeValue(shown(loop.given[key]))} (they share one claim loop; give it on one of them)`,
        );
      }
    } else if (loop.runner) {
      throw new RedisLockOptionsError(
        key,
        value,
        `no loop option on a handler added to queue '${queue}' after its claim loop started (give it on the first handlers)`,
      );
    } else {
      loop.given[key] = value;
    }
  }
}

/**
 * Whether two handlers give the same loop option: the same value, or objects of the same keys
 * and values in any order (`{ max, durationMs }` and `{ durationMs, max }` are one limit). Both
 * were validated (`resolveWorkerOptions`): plain data, no unknown key.
 */
function sameOption(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  return isObject(a) && isObject(b) && canonicalJson(a) === canonicalJson(b);
}

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

/** `value` as JSON with the keys of each object sorted: equal options give equal text. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    isObject(v) && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
      : v,
  );
}
