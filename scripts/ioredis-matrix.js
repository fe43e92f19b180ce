// Installs the ioredis versions the peer range promises (the lowest and the newest of ^5.3, the
// newest 6) into a temporary folder and runs jest.ioredis-matrix.config.js against each.
// Usage: node scripts/ioredis-matrix.js [jest arguments...]
'use strict';
const { spawn } = require('node:child_process');
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

const SPECS = ['5.3.0', '^5.3.0', '^6.0.0'];

function run(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'inherit', ...options });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

async function main() {
  const root = mkdtempSync(join(tmpdir(), 'ioredis-matrix-'));
  try {
    const installs = await Promise.all(
      SPECS.map(async (spec, i) => {
        const prefix = join(root, String(i));
        const flags = ['--no-save', '--no-package-lock', '--no-audit', '--no-fund'];
        const code = await run(
          'npm',
          ['install', '--prefix', prefix, ...flags, `ioredis@${spec}`],
          {
            stdio: ['ignore', 'ignore', 'inherit'],
          },
        );
        if (code !== 0) throw new Error(`npm install ioredis@${spec} failed (exit ${code})`);
        const dir = join(prefix, 'node_modules', 'ioredis');
        const { version } = require(join(dir, 'package.json'));
        console.log(`ioredis@${spec}: ${version}`);
        return { version, dir };
      }),
    );
    const jest = require.resolve('jest/bin/jest');
    const args = [jest, '-c', 'jest.ioredis-matrix.config.js', ...process.argv.slice(2)];
    const env = { ...process.env, IOREDIS_MATRIX: JSON.stringify(installs) };
    process.exitCode = await run(process.execPath, args, { cwd: join(__dirname, '..'), env });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err.message);
  process.exitCode = 1;
});
