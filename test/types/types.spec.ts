import { readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { docSnippets, type DocSnippet } from '../../scripts/doc-snippets';
import {
  checkProgram,
  typeCheck,
  type SourceFileCache,
  type TypeDiagnostic,
} from '../support/type-check';
import { SNIPPET_EXCEPTIONS } from './docs/exceptions';
import { snippetModule } from './support/snippet-module';

// The type tests: test/types/cases/*.ts (with `@ts-expect-error` lines: a handler declaring the
// wrong payload type must fail) and every ```ts block of the README and docs/*.md, compiled as a
// user compiles them (importing 'nestjs-redis-lock'), under the two tsconfigs users have:
// "strict": true, and the one `nest new` writes. Nothing here runs; a diagnostic fails the test,
// and so does an unused `@ts-expect-error` (TS2578).

const root = resolve(__dirname, '../..');
const here = (...parts: string[]) => join(__dirname, ...parts);

// The tsconfigs, each with the files it includes (`nest new`'s leaves out the `*.strict.ts` cases,
// what holds only with strictFunctionTypes).
const CONFIGS = {
  'strict: true': 'tsconfig.json',
  "nest new's tsconfig": 'tsconfig.nest.json',
} as const;

function readConfig(file: string): ts.ParsedCommandLine {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    here(file),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, ' '));
      },
    },
  );
  if (!parsed || parsed.errors.length > 0) throw new Error(`${file}: cannot be read`);
  return parsed;
}

/**
 * The names each entry point of the library exports (values and types), for the snippets'
 * imports; the entry points are the tsconfig's `paths` (the package name → lib/).
 */
function libraryExports(options: ts.CompilerOptions, cache: SourceFileCache) {
  const entries = Object.entries(options.paths ?? {}).map(
    ([specifier, [file]]) => [specifier, join(options.baseUrl ?? root, file)] as const,
  );
  const program = checkProgram(
    entries.map(([, file]) => file),
    options,
    new Map(),
    cache,
  );
  const checker = program.getTypeChecker();
  return new Map(
    entries.map(([specifier, file]) => {
      const module = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
      return [specifier, checker.getExportsOfModule(module).map((s) => s.name)] as const;
    }),
  );
}

/** Whether `snippet` is one of the listed fragments, and which entry lists it. */
const exceptionOf = (snippet: DocSnippet) =>
  SNIPPET_EXCEPTIONS.find((e) => e.file === snippet.file && snippet.code.includes(e.contains));

/**
 * Where a snippet is compiled: a README quick-start file at its own `src/` path (they import each
 * other), any other at its Markdown file and line.
 */
function snippetPath(snippet: DocSnippet): string {
  const named = /^\/\/ (src\/[\w./-]+\.ts)\n/.exec(snippet.code)?.[1];
  const dir = here('docs', 'snippets', snippet.file.replace(/\.md$/, ''));
  return join(dir, named ?? `line-${snippet.line}.ts`);
}

/**
 * A snippet the check must refuse, compiled with the others: a handler of the wrong payload type,
 * a listener of the wrong event type, a number for a queue, a payload of the wrong type.
 */
const CANARY: DocSnippet = {
  file: 'docs/canary.md',
  line: 1,
  code: [
    '@QueueWorker(ORDERS)',
    'async create(task: RunningTask<{ amount: number }>) {}',
    '',
    "@OnQueueEvent(ORDERS, 'completed')",
    'notify(event: { type: number }) {}',
    '',
    'await queues.stats(42);',
    "await queues.enqueue(ORDERS, 'o-1', { payload: { amount: 1 } });",
    '',
  ].join('\n'),
};
const canaryPath = here('docs', 'snippets', 'canary.ts');

const cases = readdirSync(here('cases'))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => here('cases', f));
const snippets = docSnippets(root);
const checked = snippets.filter((s) => !exceptionOf(s));
const docFiles = [...new Set(snippets.map((s) => s.file))];

describe('type tests (test/types)', () => {
  it('find the README and docs snippets, and list no exception that matches none', () => {
    expect(cases.length).toBeGreaterThan(0);
    expect(readConfig(CONFIGS['strict: true']).fileNames).toEqual(expect.arrayContaining(cases));
    expect(docFiles).toEqual(expect.arrayContaining(['README.md', 'docs/queue.md']));
    expect(checked.length).toBeGreaterThan(40);
    const stale = SNIPPET_EXCEPTIONS.filter(
      (e) => !snippets.some((s) => s.file === e.file && s.code.includes(e.contains)),
    );
    expect(stale).toEqual([]);
  });

  it('compile against the package name, mapped to the entry points', () => {
    for (const file of Object.values(CONFIGS)) {
      expect(Object.keys(readConfig(file).options.paths ?? {}).sort()).toEqual([
        'nestjs-redis-lock',
        'nestjs-redis-lock/bull-board',
        'nestjs-redis-lock/testing',
      ]);
    }
  });

  const cache: SourceFileCache = new Map();
  describe.each(Object.entries(CONFIGS))('under %s', (_name, file) => {
    let byFile: Map<string, TypeDiagnostic[]>;
    const sources = new Map<string, DocSnippet>();
    const { options, fileNames } = readConfig(file);
    const files = fileNames.filter((f) => cases.includes(f));

    beforeAll(() => {
      const exports = libraryExports(options, cache);
      const virtual = new Map<string, string>();
      for (const snippet of checked) {
        const path = snippetPath(snippet);
        virtual.set(path, snippetModule(snippet, exports));
        sources.set(relative(root, path), snippet);
      }
      virtual.set(canaryPath, snippetModule(CANARY, exports));
      byFile = new Map();
      for (const d of typeCheck(root, fileNames, options, virtual, cache)) {
        byFile.set(d.file, [...(byFile.get(d.file) ?? []), d]);
      }
    }, 120_000);

    it('the library itself and the declarations of the docs compile', () => {
      const others = [...byFile.keys()].filter(
        (f) =>
          !f.startsWith('test/types/cases/') && !sources.has(f) && f !== relative(root, canaryPath),
      );
      expect(Object.fromEntries(others.map((f) => [f, byFile.get(f)]))).toEqual({});
    });

    it('a snippet of wrong usage fails (the check can fail)', () => {
      const found = byFile.get(relative(root, canaryPath)) ?? [];
      expect(found.map((d) => d.text.split(' ')[0])).toEqual([
        'TS1241',
        'TS1241',
        'TS2345',
        'TS2769',
      ]);
    });

    it.each(files.map((f) => relative(root, f)))(
      '%s compiles, each @ts-expect-error is an error',
      (file) => {
        expect((byFile.get(file) ?? []).map((d) => `${d.line}: ${d.text}`)).toEqual([]);
      },
    );

    it.each(docFiles)('every ts snippet of %s compiles', (doc) => {
      const errors = [...sources]
        .filter(([, s]) => s.file === doc)
        .flatMap(([path, s]) =>
          (byFile.get(path) ?? []).map((d) => `${doc}:${s.line} (${path}:${d.line}) ${d.text}`),
        );
      expect(errors).toEqual([]);
    });
  });
});
