import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

/** The redis-server binary: `REDIS_SERVER_BIN`, or the one on PATH. Throws how to get one. */
export function redisServerBinary(name = 'redis-server'): string {
  if (name === 'redis-server' && process.env.REDIS_SERVER_BIN) return process.env.REDIS_SERVER_BIN;
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const path = found.stdout.trim();
  if (found.status !== 0 || !path) throw new Error(INSTALL_HINT);
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
 * when it exits first or is not ready within 10 s. `what` names it in errors.
 */
export function spawnUntilReady(
  binary: string,
  args: readonly string[],
  readyText: string,
  what: string,
): Promise<ChildProcess> {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
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
        child.stdout?.resume();
        child.stderr?.resume();
        resolve(child);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
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

function stopProcess(child: ChildProcess): Promise<void> {
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

/** Starts a private redis-server (no persistence) on a free port; extra `args` go to its command line. */
export async function startRedisServer(args: readonly string[] = []): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'redis-lock-test-'));
  for (let tries = 0; ; tries++) {
    const port = await freePort();
    try {
      let child = await launch(port, dir, args);
      const server: RedisServer = {
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
      child.once('exit', () => undefined);
      process.once('exit', () => {
        child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      });
      return server;
    } catch (err) {
      // Another process may have taken the port between freePort() and launch(): try another.
      if (tries >= 3) throw err;
    }
  }
}
