import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, posix, resolve } from 'node:path';

const root = resolve(__dirname, '../..');
const docs = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const read = (file: string) => readFileSync(join(root, file), 'utf8');

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a Markdown file's headings (outside code blocks). */
function anchors(file: string): Set<string> {
  const text = read(file).replace(/^```[\s\S]*?^```/gm, '');
  return new Set([...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => anchor(m[1])));
}

describe('documentation references', () => {
  it('every docs/*.md a README or doc names in its text exists', () => {
    const named = docs.flatMap((f) =>
      [...read(f).matchAll(/\bdocs\/([\w.-]+\.md)\b/g)].map((m) => `${f} -> docs/${m[1]}`),
    );
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((n) => !existsSync(join(root, n.split(' -> ')[1])))).toEqual([]);
  });

  it("every relative link to another doc's section points to a heading of that doc", () => {
    const links = docs.flatMap((f) =>
      [...read(f).matchAll(/\]\(([\w./-]+\.md)#([^)\s]+)\)/g)].map((m) => ({
        from: f,
        to: posix.normalize(posix.join(posix.dirname(f), m[1])),
        section: m[2],
      })),
    );
    expect(links.length).toBeGreaterThan(0);
    const dead = links
      .filter((l) => !existsSync(join(root, l.to)) || !anchors(l.to).has(l.section))
      .map((l) => `${l.from} -> ${l.to}#${l.section}`);
    expect(dead).toEqual([]);
  });
});
