import { AsyncResource } from 'node:async_hooks';
import {
  from,
  isObservable,
  mergeMap,
  Observable,
  of,
  type Observer,
  type Subscriber,
  type Subscription,
} from 'rxjs';
import { LockLostError } from '../errors/lock-lost.error';

/** What a stream holds: a lock, or a semaphore's permits (named by `keys` in errors). */
export interface StreamGrant {
  readonly keys: readonly string[];
  readonly ttlMs: number;
}

/**
 * Runs `fn` while holding the grant (`LockService.withLock`, `SemaphoreService.withPermit`), which
 * is released when `fn` settles; with `signal`, waiting stops when it aborts. Resolves without
 * calling `fn` when the grant is skipped (`skipIfLocked`).
 */
export type HoldGrant<G> = (
  fn: (grant: G) => Promise<unknown> | undefined,
  signal?: AbortSignal,
) => Promise<unknown>;

/**
 * A decorated method returning a Promise (or a plain value): runs it while holding the grant; the
 * result arrives after the release. An Observable result (e.g. from an async handler) is handed
 * out at once and keeps the grant until it completes, errors or is unsubscribed.
 */
export function heldCall<G extends StreamGrant>(
  hold: HoldGrant<G>,
  where: string,
  run: () => unknown,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let streamed = false;
    const released = settledSignal();
    hold(async (grant) => {
      const result = await run();
      if (!isObservable(result)) return result;
      streamed = true;
      const held = holdWhileSubscribed(result, grant, where, released.promise);
      resolve(held.observable);
      await held.ended;
      return undefined;
    }).then(
      (value) => {
        released.done();
        if (!streamed) resolve(value);
      },
      (err: unknown) => {
        released.done();
        reject(err);
      },
    );
  });
}

/** A promise resolved by `done()`: "the hold has settled, so the grant is released". */
function settledSignal(): { promise: Promise<void>; done: () => void } {
  let done!: () => void;
  const promise = new Promise<void>((r) => (done = r));
  return { promise, done };
}

/** An Observable that holds a lock, and a promise that settles when the lock may be released. */
export interface HeldStream {
  readonly observable: Observable<unknown>;
  readonly ended: Promise<void>;
}

/**
 * Keeps `lock` while `source` runs: for its first subscription, until it completes, errors or is
 * unsubscribed (`ended` then resolves, and the caller's `withLock` releases the lock). The
 * subscription runs in the lock's async context, so nested `@WithLock` calls join the lock.
 * Completion and errors reach the subscriber once `released` has resolved. Not subscribed within
 * the lock's TTL, it lets the lock go; a later (or a second) subscription errors with
 * `LockLostError`.
 */
export function holdWhileSubscribed(
  source: Observable<unknown>,
  lock: StreamGrant,
  where: string,
  released: Promise<void>,
): HeldStream {
  const inLockContext = AsyncResource.bind(<T>(fn: () => T): T => fn());
  let end!: () => void;
  const ended = new Promise<void>((r) => (end = r));
  let state: 'waiting' | 'subscribed' | 'abandoned' = 'waiting';
  // Nobody subscribed (e.g. a service dropped the Observable): don't extend the lock for ever.
  const timer = setTimeout(() => {
    state = 'abandoned';
    end();
  }, lock.ttlMs);
  timer.unref();
  const observable = new Observable<unknown>((subscriber) => {
    if (state !== 'waiting') {
      subscriber.error(
        new LockLostError(
          lock.keys,
          state === 'subscribed'
            ? `the Observable returned by ${where} holds it for one subscription only; call ${where} again`
            : `it was released because the Observable returned by ${where} was not subscribed within ${lock.ttlMs} ms`,
        ),
      );
      return undefined;
    }
    state = 'subscribed';
    clearTimeout(timer);
    const inner = inLockContext(() => source.subscribe(relay(subscriber, () => (end(), released))));
    return () => {
      inner.unsubscribe();
      end();
    };
  });
  return { observable, ended };
}

/**
 * For a method declared to return an Observable: on each subscription, takes the lock (through
 * `withLock`), calls `run` inside it and relays what it returns (an Observable, or a value or a
 * Promise, emitted once), keeping the lock until that completes, errors or is unsubscribed.
 * Unsubscribing while waiting for the lock stops the wait. With `skipIfLocked`, a lock that
 * cannot be had in time completes the stream without a value (the method is not called).
 */
export function runLockedStream(hold: HoldGrant<unknown>, run: () => unknown): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    const abort = new AbortController();
    let inner: Subscription | undefined;
    let end!: () => void;
    const ended = new Promise<void>((r) => (end = r));
    let markReleased!: () => void;
    const released = new Promise<void>((r) => (markReleased = r));
    let ran = false;
    hold(() => {
      ran = true;
      if (subscriber.closed) return undefined;
      inner = toObservable(run()).subscribe(relay(subscriber, () => (end(), released)));
      return ended;
    }, abort.signal).then(
      () => {
        markReleased();
        // skipIfLocked: the method did not run, so the stream ends without a value.
        if (!ran) subscriber.complete();
      },
      (err: unknown) => {
        markReleased();
        subscriber.error(err);
      },
    );
    return () => {
      abort.abort();
      inner?.unsubscribe();
      end();
    };
  });
}

/**
 * Passes values through at once; completion and errors once `finish()` (which lets the lock go)
 * has resolved, so that whoever sees the end can take the lock again straight away.
 */
function relay(subscriber: Subscriber<unknown>, finish: () => Promise<void>): Observer<unknown> {
  return {
    next: (value) => subscriber.next(value),
    error: (err: unknown) => void finish().then(() => subscriber.error(err)),
    complete: () => void finish().then(() => subscriber.complete()),
  };
}

function toObservable(result: unknown): Observable<unknown> {
  if (isObservable(result)) return result;
  return from(Promise.resolve(result)).pipe(
    mergeMap((value) => (isObservable(value) ? value : of(value))),
  );
}
