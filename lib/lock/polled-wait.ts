// Acquiring outside any line (multi-key locks, quorum mode): one attempt, then a wait woken by
// release messages, the holder's PTTL or a jittered poll, and the error when the wait is over.
import { LockQuorumError } from '../errors/lock-quorum.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import type { ResolvedLockOptions } from '../options/resolve-options';
import { WakeSignal } from '../waiting/wake-signal';
import type { Lock } from './lock';
import { holderRemainingMs } from './lock-cohort';
import type { LockRedisKeys } from './lock-keys';
import type { LockAttempt, LockStore } from './lock-store';

/** Makes the Lock handle of a grant to `token` and registers it as held. */
export type GrantFn = (token: string, fences: number[], expiresAt: number) => Lock;

/**
 * Acquires `keys` without standing in a line: tries once, then (unless `waitMs` is `0`) waits
 * until a release message for one of the keys (the blocking lock is marked so that its release
 * announces itself), the holder's PTTL or the jittered `retryIntervalMs` poll, and tries again
 * with a fresh token, so that an attempt that failed (or timed out and may still run) is never
 * confused with the one that succeeds.
 * @returns the lock, or the timeout error (returned, not thrown)
 * @throws LockQuorumError in quorum mode, when fewer nodes than a majority answered
 */
export async function acquirePolled(
  store: LockStore,
  keys: LockRedisKeys[],
  o: ResolvedLockOptions,
  started: number,
  newToken: () => string,
  grant: GrantFn,
): Promise<Lock | LockTimeoutError> {
  const firstToken = newToken();
  const first = await store.attempt(keys, firstToken, o, 'none');
  if (first.granted) return grant(firstToken, first.fences, first.expiresAt);
  if (o.waitMs === 0) return gaveUp(keys, first, 0);
  const deadline = started + o.waitMs;
  const wake = new WakeSignal();
  const unlisten: Array<() => void> = [];
  let last: LockAttempt | undefined;
  try {
    for (const k of keys) {
      try {
        unlisten.push(await store.listen(k.channel, wake.push));
      } catch {
        // No subscription: the poll timer alone paces this waiter (at most one interval late).
      }
    }
    for (;;) {
      wake.clear();
      const token = newToken();
      last = await store.attempt(keys, token, o, 'mark');
      if (last.granted) return grant(token, last.fences, last.expiresAt);
      const left = deadline - Date.now();
      if (left <= 0) break;
      const poll = o.retryIntervalMs * (0.5 + Math.random() / 2);
      await wake.wait(Math.min(left, poll, last.wait > 0 ? last.wait + 1 : Infinity), o.signal);
    }
    return gaveUp(keys, last, Date.now() - started);
  } finally {
    for (const stop of unlisten) stop();
  }
}

/** The wait is over without the lock: contention (returned) or too few nodes (thrown). */
function gaveUp(keys: LockRedisKeys[], last: LockAttempt, waited: number): LockTimeoutError {
  const names = keys.map((k) => k.name);
  const short = last.shortOf;
  if (short) {
    throw new LockQuorumError(
      names,
      'acquire',
      short.nodes,
      short.answered,
      short.granted,
      short.needed,
      waited,
    );
  }
  const remaining = holderRemainingMs(last);
  return new LockTimeoutError(names, waited, remaining >= 0 ? remaining : undefined);
}
