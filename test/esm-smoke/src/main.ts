// A Nest 12 ESM application using the CommonJS build of nestjs-redis-lock: a decorated method
// runs under a lock, a concurrent call on the same key waits its turn, the lock is released; the
// bull-board adapter loads from its subpath (nestjs-redis-lock/bull-board) and counts a queue.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockService, QueueService, RedisLockModule, WithLock } from 'nestjs-redis-lock';
import { RedisLockQueueAdapter } from 'nestjs-redis-lock/bull-board';

@Injectable()
class Orders {
  readonly log: string[] = [];
  constructor(readonly locks: LockService) {}

  @WithLock('order:<0>', { waitMs: 5_000 })
  async settle(id: string): Promise<number> {
    const lock = this.locks.currentLock(`order:${id}`);
    if (!lock || !(await lock.isHeld())) throw new Error('settle() ran without holding its lock');
    this.log.push(`start ${lock.fence}`);
    await new Promise((r) => setTimeout(r, 50));
    this.log.push(`end ${lock.fence}`);
    return lock.fence;
  }
}

@Module({
  imports: [RedisLockModule.forRoot({ redis: process.env.REDIS_URL, keyPrefix: 'esm-smoke:' })],
  providers: [Orders],
})
class AppModule {}

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
const orders = app.get(Orders);
const fences = await Promise.all([orders.settle('42'), orders.settle('42')]);
const expected = [
  `start ${fences[0]}`,
  `end ${fences[0]}`,
  `start ${fences[1]}`,
  `end ${fences[1]}`,
];
const serialized =
  JSON.stringify([...orders.log].sort()) === JSON.stringify([...expected].sort()) &&
  orders.log[0].startsWith('start') &&
  orders.log[1].startsWith('end');
const stillLocked = await app.get(LockService).isLocked('order:42');
const queues = app.get(QueueService);
await queues.enqueue('board', ['a', 'b']);
const counts = await new RedisLockQueueAdapter(queues, 'board').getJobCounts();
await app.close();
if (!serialized || stillLocked || counts.waiting !== 2) {
  console.error(
    `esm-smoke: FAILED log=${JSON.stringify(orders.log)} stillLocked=${stillLocked} board=${JSON.stringify(counts)}`,
  );
  process.exit(1);
}
console.log(
  `esm-smoke: ok (Nest ${(await import('@nestjs/core/package.json', { with: { type: 'json' } })).default.version}, fences ${fences.join(', ')})`,
);
