import { bounded, deadlineQueueCount } from '../../lib/redis/bounded';
import { RedisUnavailableError } from '../../lib/errors/redis-unavailable.error';

/**
 * `bounded()` keeps one deadline queue (one timer) per bound. Its bookkeeping needs no Redis: the
 * calls here are promises of the test's own. A queue must leave the Map once nothing is left to
 * time, or every distinct bound ever used stays in it (a batch worker's idle waits pass the time
 * left until their deadline, a fraction, each time another value).
 */
describe('bounded(): one deadline queue per bound in use, not per bound ever used', () => {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** Waits until the queues' timers have fired (each fires by its earliest call's bound). */
  const settledCount = async (base: number, withinMs: number) => {
    const until = Date.now() + withinMs;
    while (deadlineQueueCount() > base && Date.now() < until) await sleep(10);
    return deadlineQueueCount();
  };

  it('a bound that is a fraction is rounded up to whole ms: calls a fraction apart share a queue', async () => {
    const base = deadlineQueueCount();
    const calls: Promise<number>[] = [];
    // 2,000 calls in flight at once, bounds 40.0001 … 40.2: all 41 ms once rounded up.
    for (let i = 1; i <= 2_000; i++) calls.push(bounded('op', Promise.resolve(i), 40 + i / 10_000));
    expect(deadlineQueueCount() - base).toBe(1);
    expect((await Promise.all(calls)).length).toBe(2_000);
    expect(await settledCount(base, 2_000)).toBe(base);
  });

  it('the Map does not grow with every distinct bound: 1,000 calls with distinct bounds, one after the other (a batch worker idling), leave no queue once their bounds passed', async () => {
    const base = deadlineQueueCount();
    let most = 0;
    for (let i = 0; i < 1_000; i++) {
      // The time left until a deadline: another fraction every time, 20–70 ms.
      await bounded('idle', Promise.resolve(i), 20 + (i % 50) + Math.random());
      most = Math.max(most, deadlineQueueCount() - base);
    }
    // At most one queue per whole-ms bound (51 of them), not one per call.
    expect(most).toBeLessThanOrEqual(51);
    expect(await settledCount(base, 2_000)).toBe(base);
  });

  it('a call that outlives its bound still rejects, and a bound whose queue left the Map gets a new one that times out too', async () => {
    const base = deadlineQueueCount();
    const never = new Promise<never>(() => undefined);
    const first = bounded('stuck', never, 30.2);
    expect(deadlineQueueCount() - base).toBe(1);
    await expect(first).rejects.toThrow(RedisUnavailableError);
    await expect(first).rejects.toThrow('no answer within 31 ms');
    expect(await settledCount(base, 2_000)).toBe(base);
    // Same bound again: a new queue with a new timer.
    const started = Date.now();
    await expect(bounded('stuck again', never, 31)).rejects.toThrow('no answer within 31 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(30);
    // A call answered in time under the same bound is still answered.
    await expect(bounded('answered', Promise.resolve('ok'), 31)).resolves.toBe('ok');
    expect(await settledCount(base, 2_000)).toBe(base);
  });

  it('a queue whose timer is armed for a call that settled keeps timing later calls of its bound', async () => {
    const base = deadlineQueueCount();
    // The first call settles at once; its queue stays (its timer is armed) and times the second.
    await bounded('quick', Promise.resolve(1), 50);
    const never = new Promise<never>(() => undefined);
    const slow = bounded('slow', never, 50);
    expect(deadlineQueueCount() - base).toBe(1);
    await expect(slow).rejects.toThrow('no answer within 50 ms');
    expect(await settledCount(base, 2_000)).toBe(base);
  });

  it("a bound past Node's largest timer (the largest commandTimeoutMs plus a block time) arms no timer Node would fire after 1 ms, and the call is not cut short", async () => {
    const timers = jest.spyOn(global, 'setTimeout');
    try {
      let answer!: (value: string) => void;
      const call = bounded(
        'idle read',
        new Promise<string>((r) => (answer = r)),
        2_147_483_647 + 5_000,
      );
      // Before, the delay overflowed: Node fired it after 1 ms, and it was armed again each time.
      await sleep(50);
      answer('late but within its bound');
      await expect(call).resolves.toBe('late but within its bound');
      const delays = timers.mock.calls.map((args) => args[1] ?? 0);
      expect(delays.filter((ms) => ms > 2_147_483_647)).toEqual([]);
      expect(delays.length).toBeLessThan(5);
    } finally {
      timers.mockRestore();
    }
  });
});
