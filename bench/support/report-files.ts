import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { format, resolveConfig } from 'prettier';
import type { MachineInfo } from './machine-info';
import { withReadmeSection } from './readme-section';

/**
 * `text` formatted by the repository's Prettier settings for a file at `path`, so that generated
 * Markdown passes `npm run lint` (`prettier --check .`) as committed.
 */
export async function prettierFormatted(path: string, text: string): Promise<string> {
  const options = (await resolveConfig(path)) ?? {};
  return format(text, { ...options, filepath: path });
}

/**
 * Writes `RESULTS.md` (formatted) and `results.json` into `dir`.
 * @returns the path of RESULTS.md
 */
export async function writeReportFiles(
  dir: string,
  markdown: string,
  json: unknown,
): Promise<string> {
  mkdirSync(dir, { recursive: true });
  const resultsMd = join(dir, 'RESULTS.md');
  writeFileSync(resultsMd, await prettierFormatted(resultsMd, markdown));
  writeFileSync(join(dir, 'results.json'), `${JSON.stringify(json, null, 2)}\n`);
  return resultsMd;
}

/**
 * Rewrites the generated part of the README's "Performance" section (see `withReadmeSection`),
 * formatted. Resolves `false`, changing nothing, when the README or its markers are missing.
 */
export async function updateReadme(
  readmePath: string,
  report: string,
  machine: MachineInfo,
  command: string,
): Promise<boolean> {
  if (!existsSync(readmePath)) return false;
  const next = withReadmeSection(readFileSync(readmePath, 'utf8'), report, machine, command);
  if (next === undefined) return false;
  writeFileSync(readmePath, await prettierFormatted(readmePath, next));
  return true;
}
