import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { exited, lineFrom, spawnTs } from '../support/child';
import {
  createLockApp,
  redisClient,
  testRedisUrl,
  uniquePrefix,
  waitFor,
} from '../support/helpers';

describe('QueueService crash safety (worker processes killed with SIGKILL mid-task)', () => {
  const prefix = uniquePrefix('queue-crash');
  const queue = 'crash';
  const TASKS = 2_000;
  let app: INestApplicationContext;
  let queues: QueueService;
  let redis: Redis;
  const children = new Set<ChildProcess>();

  const spawnWorker = async (): Promise<{ child: ChildProcess; pid: string }> => {
    const child = spawnTs('test/fixtures/queue-worker-child.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      QUEUE: queue,
      LEASE_MS: '800',
      CONCURRENCY: '8',
    });
    children.add(child);
    child.once('exit', () => children.delete(child));
    const line = await lineFrom(child, /^ready \d+$/, 30_000);
    return { child, pid: line.split(' ')[1] };
  };
  const counts = async (name: string) => {
    const raw = await redis.hgetall(`${prefix}obs:${name}`);
    return new Map(Object.entries(raw).map(([id, n]) => [id, Number(n)]));
  };

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    queues = app.get(QueueService);
    redis = redisClient();
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await app.close();
    redis.disconnect();
  });

  it('loses no task and acks every task exactly once across 2,000 tasks and 4 kills; only tasks of killed workers run twice', async () => {
    const ids = Array.from({ length: TASKS }, (_, i) => `task-${i}`);
    const WAVE = TASKS / 4;
    const alive = new Set(await Promise.all([spawnWorker(), spawnWorker(), spawnWorker()]));
    const respawns: Promise<void>[] = [];
    const inFlightAtKill = new Set<string>();

    // Four waves of tasks; in each, once a fifth of it is acked, SIGKILL a worker that is running
    // tasks at that moment. Its replacement starts in the background while the others keep going.
    for (let wave = 0; wave < 4; wave++) {
      await queues.enqueue(queue, ids.slice(wave * WAVE, (wave + 1) * WAVE), { payload: { wave } });
      let victim: { child: ChildProcess; pid: string } | undefined;
      await waitFor(
        `wave ${wave + 1} under way on a live worker`,
        async () => {
          if ((await redis.hlen(`${prefix}obs:acks`)) < wave * WAVE + WAVE / 5) return false;
          for (const w of alive) {
            if ((await redis.scard(`${prefix}obs:inflight:${w.pid}`)) > 0) victim = w;
          }
          return victim !== undefined;
        },
        30_000,
        5,
      );
      alive.delete(victim!);
      victim!.child.kill('SIGKILL');
      expect(await exited(victim!.child)).toBe('SIGKILL');
      for (const id of await redis.smembers(`${prefix}obs:inflight:${victim!.pid}`)) {
        inFlightAtKill.add(id);
      }
      respawns.push(spawnWorker().then((w) => void alive.add(w)));
    }
    await Promise.all(respawns);
    const workers = [...alive];

    await waitFor(
      'every task acked',
      async () => {
        const s = await queues.stats(queue);
        return s.ready + s.delayed + s.leased === 0;
      },
      30_000,
      50,
    );
    // A clean stop (SIGTERM: enableShutdownHooks -> drain) leaves nothing behind either.
    const closed = workers.map((w) => lineFrom(w.child, /^closed$/, 20_000));
    for (const w of workers) w.child.kill('SIGTERM');
    await Promise.all(closed);
    // Nest re-raises the signal after closing the app.
    expect(await Promise.all(workers.map((w) => exited(w.child)))).toEqual(
      workers.map(() => 'SIGTERM'),
    );

    expect(await queues.stats(queue)).toEqual({ ready: 0, delayed: 0, leased: 0, dead: 0 });
    for (const part of ['payload', 'attempts', 'tokens']) {
      expect(await redis.exists(`${prefix}queue:{${queue}}:${part}`)).toBe(0);
    }
    const runs = await counts('runs');
    const completions = await counts('completions');
    const acks = await counts('acks');
    // None lost: every task's handler ran to the end.
    expect(ids.filter((id) => !(completions.get(id)! >= 1))).toEqual([]);
    // Never acked twice; an ack not seen can only be one the killed process made but did not record.
    expect([...acks.values()].filter((n) => n !== 1)).toEqual([]);
    expect(ids.filter((id) => !acks.has(id) && !inFlightAtKill.has(id))).toEqual([]);
    // Handlers ran more than once only for tasks a killed worker had in flight...
    const rerun = ids.filter((id) => runs.get(id)! > 1);
    expect(rerun.filter((id) => !inFlightAtKill.has(id))).toEqual([]);
    // ...and the killed workers' running tasks were run again by others after their leases expired.
    expect(rerun.length).toBeGreaterThan(0);
  }, 90_000);
});
