import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The folder of the page's own files; the build copies it to dist with its `vendor/` folder. */
const ASSETS = join(__dirname, 'assets');

/** Vendored files: served name -> [devDependency it comes from, file in that package]. */
const VENDOR: Record<string, [string, string]> = JSON.parse(
  readFileSync(join(ASSETS, 'vendor.json'), 'utf8'),
);

const OWN = ['index.html', 'dashboard.js', 'dashboard.css'];

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  LICENSE: 'text/plain; charset=utf-8',
};

/** One file of the page, read once. */
export interface DashboardAsset {
  body: Buffer;
  type: string;
}

const cache = new Map<string, DashboardAsset>();

/**
 * The asset served as `name`, or `undefined` for any other name: the page's own files, and the
 * vendored UI libraries — copied into `dist/dashboard/assets/vendor` by the build, or read from
 * node_modules when running from source (ts-node: the sample and the tests).
 */
export function dashboardAsset(name: string): DashboardAsset | undefined {
  const hit = cache.get(name);
  if (hit) return hit;
  let file: string | undefined;
  if (OWN.includes(name)) file = join(ASSETS, name);
  else if (Object.hasOwn(VENDOR, name)) {
    const copied = join(ASSETS, 'vendor', name);
    file = existsSync(copied) ? copied : vendorSource(name);
  }
  if (file === undefined) return undefined;
  const asset = {
    body: readFileSync(file),
    type: TYPES[name.slice(name.lastIndexOf('.') + 1)],
  };
  cache.set(name, asset);
  return asset;
}

/**
 * Where the vendored file `name` comes from in node_modules (the build copies it from there).
 * @throws when the devDependency is not installed
 */
export function vendorSource(name: string): string {
  const [pkg, file] = VENDOR[name];
  let dir = dirname(require.resolve(pkg));
  while (!isPackageRoot(dir, pkg)) {
    if (dirname(dir) === dir) throw new Error(`no package.json of '${pkg}' above its main file`);
    dir = dirname(dir);
  }
  return join(dir, file);
}

/** The names of the vendored files. */
export function vendorNames(): string[] {
  return Object.keys(VENDOR);
}

function isPackageRoot(dir: string, pkg: string): boolean {
  const manifest = join(dir, 'package.json');
  return existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).name === pkg;
}
