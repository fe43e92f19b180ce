import { startRedisServer, type RedisServer } from './redis-server';

/** Starts the redis-server shared by the test files (each file uses its own key prefix). */
export default async function globalSetup(): Promise<void> {
  const server = await startRedisServer();
  process.env.REDIS_LOCK_TEST_URL = server.url;
  (globalThis as { __redisServer?: RedisServer }).__redisServer = server;
}
