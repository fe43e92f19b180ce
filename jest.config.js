/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  testPathIgnorePatterns: [
    '/node_modules/',
    '/test/faults/',
    '/test/partitions/',
    '/test/esm-smoke/',
  ],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: false }],
  },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // Stops the redis-servers, sentinels and child processes a test file left running.
  setupFilesAfterEnv: ['<rootDir>/test/support/after-env.ts'],
  // Two cores: two workers; tests of the same server use distinct key prefixes.
  maxWorkers: 2,
  testTimeout: 30_000,
};
