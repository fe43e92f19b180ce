#!/usr/bin/env node
// Builds the library to dist/: tsc for the TypeScript, then copies the Lua scripts
// next to the compiled files that load them (tsc does not copy non-TS assets), and the dashboard's
// page assets with the UI libraries it vendors from node_modules (so users install nothing more).
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

function copyNonTs(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const from = path.join(dir, entry.name);
    if (entry.isDirectory()) copyNonTs(from);
    else if (entry.name.endsWith('.lua') || from.includes(`${path.sep}assets${path.sep}`)) {
      const to = path.join(root, 'dist', path.relative(path.join(root, 'lib'), from));
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.copyFileSync(from, to);
    }
  }
}
copyNonTs(path.join(root, 'lib'));

// The dashboard's vendored UI libraries (and their licences), from lib/dashboard/assets/vendor.json.
const assets = require(path.join(root, 'dist', 'dashboard', 'dashboard-assets.js'));
const vendor = path.join(root, 'dist', 'dashboard', 'assets', 'vendor');
fs.mkdirSync(vendor, { recursive: true });
for (const name of assets.vendorNames()) {
  fs.copyFileSync(assets.vendorSource(name), path.join(vendor, name));
}
