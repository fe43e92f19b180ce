/**
 * The contract suite's URL, set per test file of the `memory` project (Jest gives each test file
 * its own copy of `process.env`): it only names the in-memory Redis the tests' clients share
 * (test/support/memory-ioredis.ts). A global setup must not set it: both projects' global setups
 * run in Jest's one parent process, in the order of the first test file of each, so the later one
 * overwrote the redis-server URL of the other (the `redis` project's files then timed out).
 */
process.env.REDIS_LOCK_TEST_URL = 'redis://in-memory:6379';
