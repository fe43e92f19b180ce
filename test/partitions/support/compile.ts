import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

// The application instances run plain JavaScript: the library and the fixture are transpiled
// once per run (no type check, like ts-node's transpile-only) into node_modules/.cache, instead
// of by ts-node in every child process, which costs seconds of CPU per instance.

const ROOT = resolve(__dirname, '..', '..', '..');
const OUT = join(ROOT, 'node_modules', '.cache', 'redis-lock-partitions');

function compilerOptions(): ts.CompilerOptions {
  const file = join(ROOT, 'tsconfig.json');
  const config = ts.readConfigFile(file, (f) => readFileSync(f, 'utf8'));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  return { ...parsed.options, sourceMap: false, declaration: false, noEmit: false };
}

function transpileTree(from: string, to: string, options: ts.CompilerOptions): void {
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) {
      transpileTree(source, target, options);
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
      const output = ts.transpileModule(readFileSync(source, 'utf8'), {
        compilerOptions: options,
        fileName: source,
      });
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target.replace(/\.ts$/, '.js'), output.outputText);
    } else {
      // Lua scripts and the dashboard's assets, read next to the code at run time.
      mkdirSync(dirname(target), { recursive: true });
      copyFileSync(source, target);
    }
  }
}

/**
 * Transpiles the library (from `libDir`, default `lib/`) and the fixtures; returns the path of
 * the compiled fixture `partition-app.js`.
 */
export function compileFixture(libDir = join(ROOT, 'lib')): string {
  rmSync(OUT, { recursive: true, force: true });
  const options = compilerOptions();
  transpileTree(libDir, join(OUT, 'lib'), options);
  const fixtures = join(ROOT, 'test', 'partitions', 'fixtures');
  const out = join(OUT, relative(ROOT, fixtures));
  transpileTree(fixtures, out, options);
  return join(out, 'partition-app.js');
}
