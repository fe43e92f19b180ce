import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');

/** Children started by `spawnTs` that have not exited yet. */
const spawned = new Set<ChildProcess>();

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

/** Resolves with the first stdout line of `child` that matches `pattern`. */
export function lineFrom(
  child: ChildProcess,
  pattern: RegExp,
  timeoutMs = 15_000,
): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    let buffer = '';
    let stderr = '';
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no line matching ${pattern} within ${timeoutMs} ms; stderr:\n${stderr}`));
    }, timeoutMs);
    const onErr = (chunk: Buffer) => (stderr += chunk.toString());
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      const hit = lines.find((l) => pattern.test(l));
      if (hit !== undefined) {
        cleanup();
        resolvePromise(hit);
      }
    };
    const onExit = (code: number | null) => {
      cleanup();
      reject(
        new Error(`process exited (${code}) before a line matching ${pattern}; stderr:\n${stderr}`),
      );
    };
    const cleanup = () => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onErr);
      child.off('exit', onExit);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onErr);
    child.once('exit', onExit);
  });
}
