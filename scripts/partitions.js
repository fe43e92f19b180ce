#!/usr/bin/env node
// Runs the partition suite (jest.partitions.config.js). `--rounds N` runs N rounds of every
// scenario (PARTITION_ROUNDS=N; without it, the CI profile); other arguments go to jest, e.g. a
// test file or `-t quorum`.
const { spawnSync } = require('node:child_process');
const { resolve } = require('node:path');

const args = process.argv.slice(2);
const env = { ...process.env };
const at = args.findIndex((a) => a === '--rounds' || a.startsWith('--rounds='));
if (at >= 0) {
  const [flag, inline] = args[at].split('=');
  const value = inline ?? args[at + 1];
  args.splice(at, inline === undefined ? 2 : 1);
  if (!/^[1-9][0-9]*$/.test(value ?? '')) {
    console.error(`${flag} needs a positive integer, got ${value}`);
    process.exit(2);
  }
  env.PARTITION_ROUNDS = value;
}
const jest = resolve(__dirname, '..', 'node_modules', 'jest', 'bin', 'jest.js');
const result = spawnSync(process.execPath, [jest, '-c', 'jest.partitions.config.js', ...args], {
  cwd: resolve(__dirname, '..'),
  env,
  stdio: 'inherit',
});
process.exit(result.status ?? 1);
