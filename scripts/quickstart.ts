import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tsBlocks } from './doc-snippets';

/** The README section whose code is the users' quick start (and what `smoke:quickstart` builds). */
export const QUICKSTART_HEADING = '## Use it in your app';

/**
 * The files of the README's "Use it in your app" section: every ```ts block in it whose first line
 * is `// src/<path>.ts`, by that path, in order. Throws when the section is missing, names no
 * file, or names one twice: the smoke check must never pass on an empty app.
 * @example
 * extractQuickstart(readFileSync('README.md', 'utf8')).get('src/main.ts')
 */
export function extractQuickstart(readme: string): Map<string, string> {
  const start = readme.indexOf(`\n${QUICKSTART_HEADING}\n`);
  if (start < 0) throw new Error(`README: no '${QUICKSTART_HEADING}' section`);
  const rest = readme.slice(start + QUICKSTART_HEADING.length + 2);
  const end = rest.search(/^## /m);
  const section = end < 0 ? rest : rest.slice(0, end);
  const files = new Map<string, string>();
  for (const { code } of tsBlocks(section)) {
    const path = /^\/\/ (src\/[\w./-]+\.ts)\n/.exec(code)?.[1];
    if (!path) continue;
    if (files.has(path)) throw new Error(`README: '${QUICKSTART_HEADING}' shows ${path} twice`);
    files.set(path, code);
  }
  if (files.size === 0) throw new Error(`README: '${QUICKSTART_HEADING}' has no // src/… block`);
  return files;
}

/** The quick start of this repository's README. */
export function readmeQuickstart(): Map<string, string> {
  return extractQuickstart(readFileSync(join(__dirname, '..', 'README.md'), 'utf8'));
}
