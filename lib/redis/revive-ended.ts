import type { Redis } from 'ioredis';

/** First delay before connecting an ended client again, in ms (doubles up to `MAX_DELAY_MS`). */
const FIRST_DELAY_MS = 50;
const MAX_DELAY_MS = 2_000;
/** The error of a connection attempt that the failover detector cut short (ioredis's text). */
const CLOSED = 'Connection is closed.';

/**
 * Keeps a Sentinel client of the module's from ending for good during a failover.
 *
 * ioredis's failover detector (`failoverDetector: true`, which the module turns on for the
 * Sentinel clients it creates) disconnects the client when a sentinel announces `+switch-master`.
 * When that message arrives while the client is already reconnecting (the old master was killed,
 * and the client is asking the sentinels where the master is), the connection attempt in progress
 * fails with "Connection is closed." and ioredis sets the client's status to `end`: it never
 * reconnects, and every later command fails with "Connection is closed." (found by the partition
 * suite: 1 Sentinel failover in about 10 left a process without Redis until restarted).
 *
 * This watches `client`: when it ends from a connection attempt (not after a connection closed)
 * that failed with that error, and nobody closed it on purpose (`disconnect()`, `quit()`, or
 * `stopped()` true: the module is closing), it connects again after 50 ms, doubling up to 2 s
 * while attempts keep failing. Other ends (a `sentinelRetryStrategy` that gives up) stay ends.
 * @param onRevive called when an end is taken over
 * @param onEnd called for an end that is final
 */
export function reviveAfterFailedConnect(
  client: Redis,
  stopped: () => boolean,
  onRevive: () => void,
  onEnd?: () => void,
): void {
  let last = client.status;
  let lastError = '';
  let delay = FIRST_DELAY_MS;
  client.on('error', (err: Error) => (lastError = err.message));
  for (const status of ['connecting', 'connect', 'ready', 'close', 'reconnecting'] as const) {
    client.on(status, () => {
      last = status;
      if (status === 'ready') delay = FIRST_DELAY_MS;
    });
  }
  client.on('end', () => {
    const closedOnPurpose = (client as unknown as { manuallyClosing?: boolean }).manuallyClosing;
    const connectFailed = (last === 'connecting' || last === 'connect') && lastError === CLOSED;
    if (!connectFailed || closedOnPurpose || stopped()) {
      onEnd?.();
      return;
    }
    last = client.status;
    onRevive();
    const timer = setTimeout(() => {
      if (stopped() || client.status !== 'end') return;
      client.connect().catch(() => undefined);
    }, delay);
    timer.unref();
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  });
}
