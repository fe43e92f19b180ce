/** What `keepExtended` extends: a grant with an expiry, a TTL and a signal that aborts on loss. */
export interface Extendable {
  readonly expiresAt: number;
  readonly ttlMs: number;
  readonly signal: AbortSignal;
}

/**
 * Extends `grant` (a lock, a semaphore's permits) whenever a third of its TTL has passed, until the returned function is called.
 * Never throws: `extend` resolving `false` means lost (it aborts the signal itself); a failed
 * extension is retried until the grant would have expired, and then `lose` is called with what happened (`could not be extended: …`).
 */
export function keepExtended(
  grant: Extendable,
  extend: (ttlMs: number) => Promise<boolean>,
  lose: (detail: string) => void,
): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = (ms: number) => {
    if (stopped) return;
    timer = setTimeout(tick, Math.max(0, ms));
    timer.unref();
  };
  const tick = async () => {
    // Read here, not when scheduling: the signal is made on first read (an AbortController and
    // a timer), which most grants, released before their first extension, never need.
    if (grant.signal.aborted) return;
    try {
      if (await extend(grant.ttlMs)) {
        schedule(grant.expiresAt - Date.now() - (2 * grant.ttlMs) / 3);
      }
    } catch (err) {
      const left = grant.expiresAt - Date.now();
      if (left > 0) schedule(Math.min(left / 2, grant.ttlMs / 10));
      else lose(`could not be extended: ${(err as Error).message}`);
    }
  };
  schedule(grant.expiresAt - Date.now() - (2 * grant.ttlMs) / 3);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
