import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, resolve } from 'node:path';
import ts from 'typescript';
import { extractQuickstart, readmeQuickstart } from '../../scripts/quickstart';
import { typeCheck } from '../support/type-check';

const root = resolve(__dirname, '../..');
const fixture = (name: string) => join(__dirname, 'fixtures', name);

/** Relative link targets of a Markdown file (no URLs, no in-page anchors), as package paths. */
function relativeLinks(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]);
  return targets
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t) && !t.startsWith('#'))
    .map((t) => posix.normalize(posix.join(posix.dirname(file), t.split('#')[0])));
}

function luaFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? luaFiles(join(dir, e.name))
      : e.name.endsWith('.lua')
        ? [relative(root, join(dir, e.name))]
        : [],
  );
}

/**
 * Type-checks `files` against the built declarations, resolving the package name to dist/.
 * `virtual` files (path → source) are compiled as if they were on disk at that path.
 */
function compileAgainstDist(
  files: string[],
  virtual = new Map<string, string>(),
  extra: ts.CompilerOptions = {},
): Map<string, string[]> {
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    esModuleInterop: true,
    types: ['node'],
    // The package's own declarations are checked too: a public type naming a stripped one fails.
    skipLibCheck: false,
    baseUrl: root,
    paths: { 'nestjs-redis-lock': ['dist/index.d.ts'] },
    ...extra,
  };
  const byFile = new Map<string, string[]>();
  for (const d of typeCheck(root, files, options, virtual)) {
    byFile.set(d.file, [...(byFile.get(d.file) ?? []), d.text]);
  }
  return byFile;
}

describe('the npm package', () => {
  let files: string[];

  beforeAll(() => {
    // `npm pack` runs `prepack` (scripts/build.js) first, so dist/ is the build it would publish.
    const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--loglevel=error'], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const [pack] = JSON.parse(out.slice(out.indexOf('['))) as Array<{ files: { path: string }[] }>;
    files = pack.files.map((f) => f.path);
  }, 120_000);

  it('ships the license, the README, the entry points and every Lua script', () => {
    const expected = ['LICENSE', 'README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts'];
    expect(files).toEqual(expect.arrayContaining(expected));
    const lua = luaFiles(join(root, 'lib')).map((f) => f.replace(/^lib\//, 'dist/'));
    expect(lua.length).toBeGreaterThan(0);
    expect(files).toEqual(expect.arrayContaining(lua));
  });

  it("ships the dashboard's page and the UI libraries it vendors, with their licences", () => {
    const assets = ['index.html', 'dashboard.js', 'dashboard.css', 'vendor.json'];
    const vendor = Object.keys(
      JSON.parse(readFileSync(join(root, 'lib/dashboard/assets/vendor.json'), 'utf8')),
    );
    expect(vendor).toEqual(expect.arrayContaining(['htm-preact.mjs', 'uplot.js', 'htm.LICENSE']));
    expect(files).toEqual(
      expect.arrayContaining([
        ...assets.map((f) => `dist/dashboard/assets/${f}`),
        ...vendor.map((f) => `dist/dashboard/assets/vendor/${f}`),
      ]),
    );
  });

  it('ships every file a relative link of the README or of a shipped doc points to', () => {
    const docs = files.filter((f) => f.startsWith('docs/') && f.endsWith('.md'));
    expect(docs.length).toBeGreaterThan(0);
    const links = ['README.md', ...docs].flatMap((f) =>
      relativeLinks(f).map((to) => `${f} -> ${to}`),
    );
    expect(links.length).toBeGreaterThan(0);
    const dead = links.filter((link) => !files.includes(link.split(' -> ')[1]));
    expect(dead).toEqual([]);
  });

  it('ships no tests, benchmarks, sample, scripts, sources or CI files', () => {
    const foreign = files.filter((f) =>
      /^(test|bench|sample|scripts|lib|\.ci|coverage|dist-sample)\//.test(f),
    );
    expect(foreign).toEqual([]);
    expect(files.filter((f) => f.startsWith('.') || f.endsWith('.tsbuildinfo'))).toEqual([]);
  });

  it('names its license, repository, homepage and issue tracker', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(readFileSync(join(root, 'LICENSE'), 'utf8')).toMatch(/^MIT License\n\nCopyright \(c\) /);
    expect(pkg.license).toBe('MIT');
    const repo = 'https://github.com/nestjs-redis-lock/nestjs-redis-lock';
    expect(pkg.repository).toEqual({ type: 'git', url: `git+${repo}.git` });
    expect(pkg.homepage).toBe(`${repo}#readme`);
    expect(pkg.bugs).toEqual({ url: `${repo}/issues` });
  });

  describe("the README's 'Use it in your app'", () => {
    it('shows the module, a locked route, a worker and main.ts', () => {
      const files = readmeQuickstart();
      expect([...files.keys()].sort()).toEqual([
        'src/app.module.ts',
        'src/main.ts',
        'src/orders.controller.ts',
        'src/receipts.worker.ts',
      ]);
      expect(files.get('src/orders.controller.ts')).toContain('@WithLock(');
      expect(files.get('src/receipts.worker.ts')).toContain('@QueueWorker(');
      expect(() => extractQuickstart('# lib\n\n## Install\n')).toThrow(/no '## Use it in/);
    });

    it('compiles against the built package (smoke:quickstart also runs it)', () => {
      const app = new Map(
        [...readmeQuickstart()].map(([path, code]) => [join(root, 'test/quickstart', path), code]),
      );
      // The tsconfig `nest new` writes (decorators, metadata), made strict.
      const errors = compileAgainstDist([], app, { skipLibCheck: true });
      expect(Object.fromEntries(errors)).toEqual({});
    }, 60_000);
  });

  describe('its declarations', () => {
    it('carry no internal member', () => {
      const declarations = files.filter((f) => f.endsWith('.d.ts'));
      const tagged = declarations.filter((f) =>
        readFileSync(join(root, f), 'utf8').includes('@internal'),
      );
      expect(tagged).toEqual([]);
    });

    // Both consumers in one program (loading Nest's declarations is the slow part); each file's
    // errors are its own, and the package's declarations must have none.
    let errors: Map<string, string[]>;
    const compiled = () =>
      (errors ??= compileAgainstDist([
        fixture('consumer-public.ts'),
        fixture('consumer-internal.ts'),
      ]));

    it('compile a consumer that uses the public API and cannot reach the internals', () => {
      const { [relative(root, fixture('consumer-internal.ts'))]: _failing, ...others } =
        Object.fromEntries(compiled());
      expect(others).toEqual({});
    }, 60_000);

    it('reject a consumer that reaches an internal member (the check can fail)', () => {
      expect(compiled().get(relative(root, fixture('consumer-internal.ts')))).toEqual([
        "TS2339 Property 'releaseLock' does not exist on type 'LockService'.",
      ]);
    }, 60_000);
  });
});
