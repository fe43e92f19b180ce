#!/usr/bin/env node
// Builds the library to dist/: tsc for the TypeScript, then copies the Lua scripts
// next to the compiled files that load them (tsc does not copy non-TS assets).
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true });
execFileSync(
  process.execPath,
  [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
  {
    cwd: root,
    stdio: 'inherit',
  },
);

function copyLua(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const from = path.join(dir, entry.name);
    if (entry.isDirectory()) copyLua(from);
    else if (entry.name.endsWith('.lua')) {
      const to = path.join(root, 'dist', path.relative(path.join(root, 'lib'), from));
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.copyFileSync(from, to);
    }
  }
}
copyLua(path.join(root, 'lib'));
