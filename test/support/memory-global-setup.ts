/**
 * Global setup of the contract suite on the in-memory backend: no redis-server, the URL only
 * names the in-memory Redis the tests' clients share (test/support/memory-ioredis.ts).
 */
export default async function globalSetup(): Promise<void> {
  process.env.REDIS_LOCK_TEST_URL = 'redis://in-memory:6379';
}
