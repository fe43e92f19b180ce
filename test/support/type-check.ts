import { relative } from 'node:path';
import ts from 'typescript';

/** Parsed source files shared by the programs of one test file (parsing Nest's is the slow part). */
export type SourceFileCache = Map<string, ts.SourceFile>;

/** One diagnostic of `typeCheck`. */
export interface TypeDiagnostic {
  /** The file, relative to the root (`'(global)'` for a diagnostic of no file). */
  file: string;
  /** 1-based; 0 for a diagnostic of no file. */
  line: number;
  /** `TS<code> <message>`. */
  text: string;
}

/**
 * A program over `files` with `options` (no emit), where `virtual` files (path → source) are
 * compiled as if they were on disk at that path and `cache` keeps parsed files for the next one.
 * @example
 * checkProgram([join(root, 'lib/index.ts')], { strict: true }).getTypeChecker()
 */
export function checkProgram(
  files: readonly string[],
  options: ts.CompilerOptions,
  virtual: ReadonlyMap<string, string> = new Map(),
  cache: SourceFileCache = new Map(),
): ts.Program {
  const all: ts.CompilerOptions = { ...options, noEmit: true };
  const host = ts.createCompilerHost(all);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (f) => virtual.has(f) || fileExists(f);
  host.directoryExists = (d) =>
    [...virtual.keys()].some((f) => f.startsWith(`${d}/`)) || ts.sys.directoryExists(d);
  host.readFile = (f) => virtual.get(f) ?? readFile(f);
  host.getSourceFile = (f, language, ...rest) => {
    if (virtual.has(f)) return ts.createSourceFile(f, virtual.get(f)!, language);
    const key = `${f}\0${JSON.stringify(language)}`;
    let source = cache.get(key);
    if (!source) {
      source = getSourceFile(f, language, ...rest);
      if (source) cache.set(key, source);
    }
    return source;
  };
  return ts.createProgram([...files, ...virtual.keys()], all, host);
}

/**
 * Type-checks `files` (see `checkProgram`) and returns the diagnostics, leaving out those of
 * node_modules (third-party declarations are not ours).
 * @example
 * typeCheck(root, [join(root, 'test/types/cases/queue-worker.ts')], { strict: true })
 */
export function typeCheck(
  root: string,
  files: readonly string[],
  options: ts.CompilerOptions,
  virtual: ReadonlyMap<string, string> = new Map(),
  cache: SourceFileCache = new Map(),
): TypeDiagnostic[] {
  const program = checkProgram(files, options, virtual, cache);
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => ({
      file: d.file ? relative(root, d.file.fileName) : '(global)',
      line:
        d.file && d.start !== undefined
          ? d.file.getLineAndCharacterOfPosition(d.start).line + 1
          : 0,
      text: `TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`,
    }))
    .filter((d) => !d.file.startsWith('node_modules/'));
}
