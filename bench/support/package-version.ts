import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');

/**
 * The installed version of a package, read from its package.json under node_modules (some
 * packages, e.g. redlock 5, do not export `./package.json`). `'?'` when it cannot be read.
 */
export function packageVersion(name: string): string {
  try {
    const json = JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8'));
    return String(json.version).replace(/^v/, '');
  } catch {
    return '?';
  }
}
