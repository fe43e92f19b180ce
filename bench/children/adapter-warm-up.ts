import type { LockAdapter } from '../adapters/lock-adapter';
import { requestCount } from '../support/request-counter';

/** How long the blocked acquisition of the warm-up may take to send its first request, in ms. */
const FIRST_REQUEST_MS = 5_000;

/** Resolves `true` once `condition()` holds, `false` when it has not within `timeoutMs`. */
async function eventually(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return true;
}

/**
 * Runs a freshly created `adapter` unmeasured on `key` (a key of its own, which nothing else
 * uses): first one acquisition that has to wait, so that whatever a library sets up lazily for
 * waiting (ours: its pub/sub subscriber connection and SUBSCRIBE) is not part of the first
 * measured wait, then `pairs` plain acquire + release pairs.
 *
 * The waiting acquisition: `holder` (another instance of the same library, as another process
 * would be: callers of one instance may wait for each other without Redis) acquires; `adapter`
 * acquires the same key; once that has sent its first request and found the key held, `holder`
 * releases; `adapter` releases when it has the lock.
 */
export async function warmUpAdapter(
  adapter: LockAdapter,
  holder: LockAdapter,
  key: string,
  pairs: number,
): Promise<void> {
  const held = await holder.acquire(key);
  const before = requestCount();
  const blocked = adapter.acquire(key);
  const sent = await eventually(() => requestCount() > before, FIRST_REQUEST_MS);
  await holder.release(held);
  await adapter.release(await blocked);
  if (!sent) throw new Error(`warm-up: the second acquire of '${key}' sent no request`);
  for (let i = 0; i < pairs; i++) await adapter.release(await adapter.acquire(key));
}
