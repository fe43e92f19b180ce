/**
 * The ioredis matrix: the tests that depend on how ioredis opens a connection, once per ioredis
 * version that `scripts/ioredis-matrix.js` installed (`npm run test:ioredis-matrix`). Each version
 * is a project whose `ioredis` import resolves to that install; one run, one summary.
 * @type {import('jest').Config}
 */
const config = require('./jest.config');
/** The main config's redis-server project (its other project runs on the in-memory backend). */
const base = {
  ...config.projects.find((p) => p.displayName === 'redis'),
  maxWorkers: config.maxWorkers,
  testTimeout: config.testTimeout,
};

/** `[{ version, dir }]`: each install's version and its `node_modules/ioredis` folder. */
const installs = JSON.parse(process.env.IOREDIS_MATRIX || '[]');
if (installs.length === 0) {
  throw new Error('IOREDIS_MATRIX is not set: run `npm run test:ioredis-matrix`');
}

module.exports = {
  globalSetup: base.globalSetup,
  globalTeardown: base.globalTeardown,
  testTimeout: base.testTimeout,
  maxWorkers: base.maxWorkers,
  projects: installs.map(({ version, dir }) => ({
    displayName: `ioredis ${version}`,
    testEnvironment: base.testEnvironment,
    roots: base.roots,
    testMatch: ['**/test/redis/subscriber-ready.spec.ts'],
    transform: base.transform,
    setupFilesAfterEnv: base.setupFilesAfterEnv,
    moduleNameMapper: { '^ioredis$': dir },
    globals: { IOREDIS_MATRIX_DIR: dir },
  })),
};
