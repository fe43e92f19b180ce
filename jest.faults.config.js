/**
 * The fault and abuse suite (test/faults/): real processes killed and frozen, a restarted
 * redis-server, a slow link, 1,000+ invalid calls. `npm run test:faults` runs the full version;
 * `npm run test:faults:ci` the short one (FAULTS_PROFILE=ci).
 * @type {import('jest').Config}
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test/faults'],
  testMatch: ['**/*.spec.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: false }],
  },
  globalSetup: '<rootDir>/test/faults/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/faults/support/global-teardown.ts',
  // Stops the redis-servers, sentinels and child processes a test file left running.
  setupFilesAfterEnv: ['<rootDir>/test/support/after-env.ts'],
  // One scenario at a time: they spawn up to 9 processes and measure unavailability, which a
  // second scenario competing for the 2 cores would distort.
  maxWorkers: 1,
  testTimeout: 600_000,
};
