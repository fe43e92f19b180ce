// Minimal sample (the full flash-sale app replaces it): acquires and releases a lock, and shows a
// second caller waiting for it. Uses REDIS_URL, or a private redis-server it starts itself.
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockService, LockTimeoutError, RedisLockModule } from '../lib';
import { startRedisServer, type RedisServer } from '../scripts/redis-server';

async function main(): Promise<void> {
  let server: RedisServer | undefined;
  let url = process.env.REDIS_URL;
  if (!url) {
    server = await startRedisServer();
    url = server.url;
    console.log(`started a private redis-server at ${url} (set REDIS_URL to use yours)`);
  }

  @Module({ imports: [RedisLockModule.forRoot({ redis: url, keyPrefix: 'sample:' })] })
  class SampleModule {}

  const app = await NestFactory.createApplicationContext(SampleModule, {
    logger: ['warn', 'error'],
  });
  const locks = app.get(LockService);

  const lock = await locks.acquire('stock:phone', { ttlMs: 5_000 });
  console.log(
    `acquired 'stock:phone': fence ${lock.fence}, expires in ${lock.expiresAt - Date.now()} ms`,
  );
  try {
    await locks.acquire('stock:phone');
  } catch (err) {
    if (err instanceof LockTimeoutError) console.log(`a second buyer is refused: ${err.message}`);
    else throw err;
  }
  const waiting = locks.acquire('stock:phone', { waitMs: 2_000 });
  const released = Date.now();
  await lock.release();
  const next = await waiting;
  console.log(
    `released; the waiting buyer got it ${Date.now() - released} ms later with fence ${next.fence}`,
  );
  await next.release();

  await app.close();
  await server?.stop();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
