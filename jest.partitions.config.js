/**
 * The partition suite (test/partitions/): every Redis node, sentinel and application instance in
 * its own network namespace, partitions as iptables DROP rules, a checker over what every
 * instance reports. Needs root (network namespaces); skips loudly otherwise. `npm run
 * test:partitions` runs the CI profile; `npm run test:partitions -- --rounds N` a long run.
 * @type {import('jest').Config}
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test/partitions'],
  testMatch: ['**/*.spec.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json', diagnostics: false }],
  },
  globalSetup: '<rootDir>/test/partitions/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/partitions/support/global-teardown.ts',
  // One scenario at a time: each runs up to 8 processes and its own network.
  maxWorkers: 1,
  testTimeout: 3_600_000,
};
