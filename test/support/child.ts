import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { ChildLines } from './child-lines';

const ROOT = resolve(__dirname, '..', '..');

/** Children started by `spawnTs` that have not exited yet. */
const spawned = new Set<ChildProcess>();

/** Every child's output, kept from its start, and how far `lineFrom` has read it. */
const outputs = new WeakMap<ChildProcess, { lines: ChildLines; read: number }>();

/**
 * The stdout lines (and stderr) of `child`, kept from its start when `spawnTs` started it: a line
 * printed before a test asks for it, or by a child that exited since, is not lost.
 */
export function linesOf(child: ChildProcess): ChildLines {
  return outputOf(child).lines;
}

function outputOf(child: ChildProcess): { lines: ChildLines; read: number } {
  let output = outputs.get(child);
  if (!output) {
    output = { lines: new ChildLines(child), read: 0 };
    outputs.set(child, output);
  }
  return output;
}

/**
 * Starts a TypeScript file (e.g. a fixture under test/fixtures/) as a separate Node process,
 * compiled on the fly by ts-node (transpile only). `env` is added to the current environment;
 * stdout/stderr are piped so the test can read them. The child is tracked until it exits, so
 * that `killSpawnedChildren` (run after every test file) can kill whatever a test left behind.
 */
export function spawnTs(
  file: string,
  args: string[] = [],
  env: NodeJS.ProcessEnv = {},
): ChildProcess {
  const child = spawn(
    process.execPath,
    ['-r', 'ts-node/register/transpile-only', resolve(ROOT, file), ...args],
    {
      cwd: ROOT,
      env: { ...process.env, TS_NODE_PROJECT: resolve(ROOT, 'tsconfig.json'), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  spawned.add(child);
  outputOf(child);
  child.once('exit', () => spawned.delete(child));
  return child;
}

/** SIGKILLs every child started by `spawnTs` that is still running; resolves once all exited. */
export async function killSpawnedChildren(): Promise<void> {
  // Without a pid the spawn itself failed: there is no process to kill (and no 'exit' to await).
  const children = [...spawned].filter((child) => child.pid !== undefined);
  spawned.clear();
  await Promise.all(
    children.map((child) => {
      const done = exited(child);
      child.kill('SIGKILL');
      return done;
    }),
  );
}

/** Resolves with the exit code (or signal name) of `child`, collecting its stderr for errors. */
export function exited(child: ChildProcess): Promise<number | string> {
  return new Promise((resolvePromise) => {
    if (child.exitCode !== null) return resolvePromise(child.exitCode);
    if (child.signalCode !== null) return resolvePromise(child.signalCode);
    child.once('exit', (code, signal) => resolvePromise(code ?? signal ?? -1));
  });
}

/**
 * Resolves with the first stdout line of `child` after those earlier calls returned that matches
 * `pattern` (lines printed before the call count: see `linesOf`); rejects with the child's stderr
 * when it exits first or after `timeoutMs`.
 */
export async function lineFrom(
  child: ChildProcess,
  pattern: RegExp,
  timeoutMs = 15_000,
): Promise<string> {
  const output = outputOf(child);
  const from = output.read;
  const hit = await output.lines.next(pattern, from, timeoutMs);
  output.read = Math.max(output.read, output.lines.lines.indexOf(hit, from) + 1);
  return hit.text;
}
