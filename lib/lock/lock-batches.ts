import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import type { BatchLockOptions, WithLockOptions } from '../interfaces/lock-options.interface';
import { checkInt } from '../options/validate';
import type { Lock } from './lock';

/** `withLockBatch`: default and largest `maxBatch`. */
const DEFAULT_MAX_BATCH = 100;
const MAX_BATCH = 10_000;

/**
 * What `withLockBatch` runs under the lock: the items of one batch, in the order they were
 * submitted, and the lock; returns one result per item, in the same order (an `Error` rejects
 * that item's caller only).
 */
export type LockBatchFn<T, R> = (
  items: T[],
  lock: Lock,
) => ReadonlyArray<R | Error> | Promise<ReadonlyArray<R | Error>>;

/** Runs the items of one batch under the lock (the service's `withLock` with the call's options). */
export type RunBatch<T, R> = (items: T[]) => Promise<ReadonlyArray<R | Error>>;

/**
 * Splits `withLockBatch`'s options into `maxBatch` (checked, defaulted) and the lock options.
 * @throws RedisLockOptionsError for a bad `maxBatch`, or for `signal` or `skipIfLocked` (a batch
 *   serves several callers)
 */
export function checkBatchOptions(options: BatchLockOptions | undefined): {
  maxBatch: number;
  lockOptions: Omit<BatchLockOptions, 'maxBatch'>;
} {
  const { maxBatch = DEFAULT_MAX_BATCH, ...lockOptions } = options ?? {};
  checkInt('maxBatch', maxBatch, 1, MAX_BATCH);
  for (const shared of ['signal', 'skipIfLocked'] as const) {
    if ((lockOptions as WithLockOptions)[shared] !== undefined) {
      throw new RedisLockOptionsError(
        shared,
        (lockOptions as WithLockOptions)[shared],
        'nothing: a batch serves several callers (see withLockBatch)',
      );
    }
  }
  return { maxBatch, lockOptions };
}

interface Submitted<T, R> {
  item: T;
  resolve(result: R): void;
  reject(err: unknown): void;
}

/** The items waiting for one lock and one function, and how their batches run. */
interface Batch<T, R> {
  readonly waiting: Submitted<T, R>[];
  readonly maxBatch: number;
  readonly run: RunBatch<T, R>;
}

/**
 * Combining for a hot lock (`LockService.withLockBatch`): the callers of this process that
 * submit items for the same lock and the same function while a batch runs are served by the next
 * batch, under one acquisition, instead of one acquisition each. One batch per lock and function
 * runs at a time; a batch takes the oldest `maxBatch` waiting items.
 */
export class LockBatches {
  /** By lock value key, then by function (its identity: only the same function combines). */
  private readonly batches = new Map<string, Map<LockBatchFn<any, any>, Batch<any, any>>>();

  submit<T, R>(
    lockId: string,
    fn: LockBatchFn<T, R>,
    item: T,
    maxBatch: number,
    run: RunBatch<T, R>,
  ): Promise<R> {
    let byFn = this.batches.get(lockId);
    if (!byFn) this.batches.set(lockId, (byFn = new Map()));
    let batch = byFn.get(fn) as Batch<T, R> | undefined;
    const started = batch === undefined;
    if (!batch) byFn.set(fn, (batch = { waiting: [], maxBatch, run }));
    const result = new Promise<R>((resolve, reject) =>
      batch.waiting.push({ item, resolve, reject }),
    );
    if (started) void this.drain(lockId, fn, batch);
    return result;
  }

  private async drain<T, R>(lockId: string, fn: LockBatchFn<T, R>, batch: Batch<T, R>) {
    try {
      while (batch.waiting.length > 0) {
        const taken = batch.waiting.splice(0, batch.maxBatch);
        let results: ReadonlyArray<R | Error>;
        try {
          results = await batch.run(taken.map((s) => s.item));
        } catch (err) {
          for (const s of taken) s.reject(err);
          continue;
        }
        if (!Array.isArray(results) || results.length !== taken.length) {
          const err = new RedisLockOptionsError(
            'fn',
            results,
            `an array of ${taken.length} results, one per item of the batch`,
          );
          for (const s of taken) s.reject(err);
          continue;
        }
        taken.forEach((s, i) => {
          const r = results[i];
          if (r instanceof Error) s.reject(r);
          else s.resolve(r);
        });
      }
    } finally {
      const byFn = this.batches.get(lockId);
      byFn?.delete(fn);
      if (byFn?.size === 0) this.batches.delete(lockId);
    }
  }
}
