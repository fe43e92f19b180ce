import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** A redis-server process started on a free loopback port (tests, sample, benchmarks). */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  readonly process: ChildProcess;
  /** Stops the server (SIGTERM, then SIGKILL after 3 s). */
  stop(): Promise<void>;
  /** Starts it again on the same port (after `stop`). */
  restart(): Promise<void>;
}

const INSTALL_HINT =
  "redis-server was not found. Run 'npm run ensure-redis' (installs Debian's redis-server with " +
  'apt-get), install Redis >= 6.2 yourself, or set REDIS_SERVER_BIN to a redis-server binary.';

/**
 * A Redis binary (`redis-server`, `redis-cli`, `redis-sentinel`, `redis-benchmark`): with
 * `REDIS_SERVER_BIN` set, that file for redis-server and its siblings in the same folder for the
 * others (when they exist there); else the one on PATH. Throws how to get one.
 */
export function redisServerBinary(name = 'redis-server'): string {
  const custom = process.env.REDIS_SERVER_BIN;
  if (custom) {
    if (name === 'redis-server') return custom;
    const sibling = join(dirname(custom), name);
    if (existsSync(sibling)) return sibling;
  }
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const path = found.stdout.trim();
  if (found.status !== 0 || !path)
    throw new Error(INSTALL_HINT.replace('redis-server was', `${name} was`));
  return path;
}

/** A TCP port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

/**
 * Spawns `binary args` and resolves once its output contains `readyText`; rejects (and kills it)
 * when it exits first or is not ready within 10 s. `what` names it in errors; `user` runs it as
 * that uid/gid (PostgreSQL refuses to run as root).
 */
export function spawnUntilReady(
  binary: string,
  args: readonly string[],
  readyText: string,
  what: string,
  user?: { uid: number; gid: number },
): Promise<ChildProcess> {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], ...user });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${what} did not start within 10 s:\n${output}`));
    }, 10_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(readyText)) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stderr?.off('data', onErr);
        child.stdout?.resume();
        child.stderr?.resume();
        resolve(child);
      }
    };
    // PostgreSQL logs to stderr: its ready line is looked for there too.
    const onErr = (c: Buffer) => onData(c);
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onErr);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} before it was ready:\n${output}`));
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

function launch(port: number, dir: string, args: readonly string[]): Promise<ChildProcess> {
  return spawnUntilReady(
    redisServerBinary(),
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'no',
      '--dir',
      dir,
      ...args,
    ],
    'Ready to accept connections',
    `redis-server on port ${port}`,
  );
}

/** Stops `child` (SIGTERM, then SIGKILL after 3 s); resolves once it exited. */
export function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 3_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Servers still running, killed (and their folders removed) when this process exits. */
const live = new Set<{ child: () => ChildProcess; dir: string }>();
process.once('exit', () => {
  for (const server of live) {
    server.child().kill('SIGKILL');
    rmSync(server.dir, { recursive: true, force: true });
  }
});

/**
 * Stops every server started by this module and still running (and removes their folders).
 * Inside a Jest test file the exit hook above never runs: call this in an `afterAll`.
 */
export async function stopAllRedisServers(): Promise<void> {
  const servers = [...live];
  live.clear();
  await Promise.all(
    servers.map(async (server) => {
      await stopProcess(server.child());
      rmSync(server.dir, { recursive: true, force: true });
    }),
  );
}

/** Starts a private redis-server (no persistence) on a free port; extra `args` go to its command line. */
export async function startRedisServer(args: readonly string[] = []): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'redis-lock-test-'));
  for (let tries = 0; ; tries++) {
    const port = await freePort();
    let child: ChildProcess;
    try {
      child = await launch(port, dir, args);
    } catch (err) {
      // Another process may have taken the port between freePort() and launch(): try another
      // port then, and only then.
      if (tries < 3 && String((err as Error).message).includes('Address already in use')) continue;
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    const entry = { child: () => child, dir };
    live.add(entry);
    return {
      port,
      url: `redis://127.0.0.1:${port}`,
      get process() {
        return child;
      },
      async stop() {
        await stopProcess(child);
      },
      async restart() {
        await stopProcess(child);
        child = await launch(port, dir, args);
      },
    };
  }
}
