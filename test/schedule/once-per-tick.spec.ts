import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import type { Redis } from 'ioredis';
import { exited, lineFrom, spawnTs } from '../support/child';
import { redisClient, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';

const FIXTURE = 'test/fixtures/once-per-tick-child.ts';

/** Everything a child wrote to stderr. */
function stderrOf(child: ChildProcess): () => string {
  let text = '';
  child.stderr!.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return () => text;
}

describe('@OncePerTick on several application instances', () => {
  const prefix = uniquePrefix('once-per-tick');
  let redis: Redis;

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(() => redis.disconnect());

  /** tick -> runs of `job` across all instances. */
  async function runs(job: string): Promise<Map<number, number>> {
    const hash = await redis.hgetall(`${prefix}obs:runs:${job}`);
    return new Map(Object.entries(hash).map(([tick, n]) => [Number(tick), Number(n)]));
  }

  async function distinctTicks(job: string): Promise<number> {
    return (await runs(job)).size;
  }

  /** Asserts every tick from the first to the last ran exactly once (`step` apart). */
  async function expectEveryTickOnce(job: string, step: number, atLeast: number): Promise<void> {
    const ran = await runs(job);
    const ticks = [...ran.keys()].sort((a, b) => a - b);
    expect(ticks.length).toBeGreaterThanOrEqual(atLeast);
    const twice = [...ran].filter(([, n]) => n !== 1);
    expect({ job, twice }).toEqual({ job, twice: [] });
    const missed: number[] = [];
    for (let t = ticks[0]; t <= ticks[ticks.length - 1]; t += step) if (!ran.has(t)) missed.push(t);
    expect({ job, missed }).toEqual({ job, missed: [] });
  }

  it('@Interval(300) and @Cron(every second, both decorator orders): every tick runs exactly once on 4 instances with skewed clocks, through a SIGKILL before start and a graceful shutdown', async () => {
    const env = { REDIS_URL: testRedisUrl(), PREFIX: prefix };
    // `fast` runs 500 ms ahead, `slow` 300 ms behind; `doomed` (800 ms ahead, so it claims the
    // cron-above ticks first) kills itself between a claim and its start once armed.
    const fast = spawnTs(FIXTURE, [], { ...env, CLOCK_OFFSET_MS: '500' });
    const steady = spawnTs(FIXTURE, [], env);
    const slow = spawnTs(FIXTURE, [], { ...env, CLOCK_OFFSET_MS: '-300' });
    const doomed = spawnTs(FIXTURE, [], {
      ...env,
      CLOCK_OFFSET_MS: '800',
      JOBS: 'cron-above',
      DIE_BEFORE_START: '1',
    });
    const all = [fast, steady, slow, doomed];
    const errors = all.map(stderrOf);
    await Promise.all(all.map((c) => lineFrom(c, /^ready$/, 60_000)));

    const progress = async (job: string, more: number) => {
      const target = (await distinctTicks(job)) + more;
      await waitFor(
        `${more} more ticks of ${job}`,
        async () => (await distinctTicks(job)) >= target,
        20_000,
        20,
      );
    };
    await progress('cron-above', 3);
    expect(Number(await redis.hget(`${prefix}obs:by:${doomed.pid}`, 'cron-above'))).toBeGreaterThan(
      0,
    );

    // The doomed instance dies holding the claim of its next tick, never started.
    const died = exited(doomed);
    await redis.rpush(`${prefix}arm`, 'now');
    expect(await died).toBe('SIGKILL');
    await progress('cron-above', 3);

    fast.kill('SIGTERM');
    await lineFrom(fast, /^closed$/, 60_000);
    await exited(fast);
    await progress('cron-above', 4);
    await progress('interval', 5);

    for (const child of [steady, slow]) child.kill('SIGTERM');
    await Promise.all([steady, slow].map(exited));

    await expectEveryTickOnce('cron-above', 1_000, 10);
    await expectEveryTickOnce('cron-below', 1_000, 10);
    await expectEveryTickOnce('interval', 1, 30);
    expect(await runs('timeout')).toEqual(new Map([[0, 1]]));
    // Nothing logged as an error. (The `cron` package of @nestjs/schedule warns on its own when a
    // loaded machine fires a tick late; that line is not ours.)
    const ours = (text: string) =>
      text
        .split('\n')
        .filter((line) => line !== '' && !line.startsWith('[Cron] Missed execution deadline'))
        .join('\n');
    for (const stderr of errors) expect(ours(stderr())).toBe('');
  }, 150_000);
});
