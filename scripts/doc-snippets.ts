import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** One ```ts block of a Markdown file. */
export interface DocSnippet {
  /** The Markdown file, relative to the repository root (`README.md`, `docs/queue.md`). */
  readonly file: string;
  /** The line of its opening fence (1-based). */
  readonly line: number;
  /** Its code, without the fences, dedented by the fence's indentation. */
  readonly code: string;
}

/**
 * The ```ts blocks of a Markdown text, in order (fences may be indented, as in a list item).
 * @example
 * tsBlocks('text\n```ts\nconst a = 1;\n```\n') // [{ line: 2, code: 'const a = 1;\n' }]
 */
export function tsBlocks(markdown: string): { line: number; code: string }[] {
  return [...markdown.matchAll(/^( *)```ts\n([\s\S]*?)^\1```$/gm)].map((m) => ({
    line: markdown.slice(0, m.index).split('\n').length,
    code: m[2].replace(new RegExp(`^${m[1]}`, 'gm'), ''),
  }));
}

/**
 * Every ```ts block of the README and of docs/*.md under `root`, file by file (README first).
 * @example
 * docSnippets(process.cwd()).filter((s) => s.file === 'docs/queue.md')
 */
export function docSnippets(root: string): DocSnippet[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs].flatMap((file) =>
    tsBlocks(readFileSync(join(root, file), 'utf8')).map((b) => ({ file, ...b })),
  );
}
