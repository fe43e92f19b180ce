const transform = {
  '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: false }],
};

/**
 * The contract suite: the library's own lock, semaphore, read-write, fencing and queue tests,
 * unchanged, run a second time on the in-memory backend of `nestjs-redis-lock/testing` (the
 * library's Lua scripts in fengari over in-memory commands), proving it behaves as Redis does.
 * Left out: tests that need what only a real server has (other processes, crashes, replicas,
 * Cluster, INFO commandstats of a server of their own). Listed in docs/testing.md.
 */
const CONTRACT = [
  'fencing/fenced-store',
  'lock/lock-batches',
  'lock/lock-cohorts',
  'lock/lock-deadline',
  'lock/lock-handoff',
  'lock/lock-shared',
  'lock/lock-timeout-message',
  'lock/lock.service',
  'semaphore/semaphore.service',
  'semaphore/with-semaphore.e2e',
  'queue/define-queue',
  'queue/queue-batch',
  'queue/queue-cancel',
  'queue/queue-dedup',
  'queue/queue-events',
  'queue/queue-features',
  'queue/queue-flows',
  'queue/queue-flow-tree',
  'queue/queue-flow-drain',
  'lock/lock-shutdown',
  'queue/queue-lifecycle',
  'queue/queue-max-size',
  'queue/queue-metrics',
  'queue/queue-rate-limit',
  'queue/queue-schedule',
  'queue/queue-sizes',
  'queue/queue-worker',
  'queue/queue.service',
  'rate-limit/rate-limiter.service',
  'waiting-room/waiting-room.service',
  'queue/queue-named',
  'queue/queue-expire',
  'queue/flow-links',
  'queue/expiries-bound',
];

/** @type {import('jest').Config} */
module.exports = {
  // Two cores: two workers; tests of the same server use distinct key prefixes.
  maxWorkers: 2,
  testTimeout: 30_000,
  projects: [
    {
      displayName: 'redis',
      testEnvironment: 'node',
      roots: ['<rootDir>/test'],
      testMatch: ['**/*.spec.ts'],
      testPathIgnorePatterns: [
        '/node_modules/',
        '/test/faults/',
        '/test/partitions/',
        '/test/esm-smoke/',
      ],
      transform,
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
      // Stops the redis-servers, sentinels and child processes a test file left running.
      setupFilesAfterEnv: ['<rootDir>/test/support/after-env.ts'],
    },
    {
      displayName: 'memory',
      testEnvironment: 'node',
      roots: ['<rootDir>/test'],
      testMatch: CONTRACT.map((file) => `<rootDir>/test/${file}.spec.ts`),
      transform,
      moduleNameMapper: { '^ioredis$': '<rootDir>/test/support/memory-ioredis.ts' },
      setupFiles: ['<rootDir>/test/support/memory-env.ts'],
      setupFilesAfterEnv: [
        '<rootDir>/test/support/after-env.ts',
        // Skips the few tests of these files that need a real redis-server, saying why.
        '<rootDir>/test/support/memory-contract.ts',
      ],
    },
  ],
};
