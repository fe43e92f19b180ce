import { spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { freePort, spawnUntilReady, stopProcess } from './redis-server';

/** A private PostgreSQL (`initdb` + `postgres`) on a free loopback port: tests, sample:load, bench. */
export interface PostgresServer {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication, loopback only). */
  readonly url: string;
  /** Stops the server (fast shutdown: SIGINT, then SIGKILL after 3 s). */
  stop(): Promise<void>;
  /** Starts it again on the same port and data folder (after `stop`). */
  restart(): Promise<void>;
  /** Stops it and removes its data folder. */
  destroy(): Promise<void>;
}

const INSTALL_HINT =
  "PostgreSQL's initdb was not found. Run 'npm run ensure-postgres' (installs Debian's postgresql " +
  'with apt-get), install PostgreSQL yourself, or set POSTGRES_BIN_DIR to the folder of its ' +
  'initdb and postgres binaries.';

/**
 * The folder of `initdb` and `postgres`: `POSTGRES_BIN_DIR`, else the folder `initdb` on PATH
 * resolves to (Debian links /usr/bin/initdb elsewhere), else Debian's newest
 * `/usr/lib/postgresql/<n>/bin`. Throws how to get one.
 */
export function postgresBinDir(): string {
  const custom = process.env.POSTGRES_BIN_DIR;
  if (custom) return custom;
  const found = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' });
  const onPath = found.stdout.trim();
  if (found.status === 0 && onPath) {
    const dir = dirname(realpathSync(onPath));
    if (existsSync(join(dir, 'postgres'))) return dir;
  }
  const debian = spawnSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V'], {
    encoding: 'utf8',
  });
  const dirs = debian.stdout.trim().split('\n').filter(Boolean);
  if (dirs.length > 0) return dirs[dirs.length - 1];
  throw new Error(INSTALL_HINT);
}

/** Whether a PostgreSQL server can be started here (the binaries exist). */
export function postgresAvailable(): boolean {
  try {
    const dir = postgresBinDir();
    return existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'));
  } catch {
    return false;
  }
}

/**
 * PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user when it
 * exists, else as `nobody`. Returns the ids to spawn with (none when not root).
 */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ['postgres', 'nobody']) {
    const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
    if (uid.status === 0 && gid.status === 0) {
      return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
    }
  }
  throw new Error(
    'running as root and neither a postgres nor a nobody user exists to run PostgreSQL',
  );
}

/** Servers still running, killed (and their folders removed) when this process exits. */
const live = new Set<{ child: () => ChildProcess | undefined; dir: string }>();
process.once('exit', () => {
  for (const server of live) {
    server.child()?.kill('SIGKILL');
    rmSync(server.dir, { recursive: true, force: true });
  }
});

/**
 * Creates a data folder with `initdb` (user `postgres`, trust authentication) in a temporary
 * folder and starts `postgres` on a free loopback port (no fsync: a test database), resolving
 * once it accepts connections. Killed, with its folder, when this process exits.
 * @example
 * const pg = await startPostgresServer(); // pg.url: postgres://postgres@127.0.0.1:54021/postgres
 */
export async function startPostgresServer(): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const user = serverUser();
  const dir = mkdtempSync(join(tmpdir(), 'sample-pg-'));
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const init = spawnSync(
    join(bin, 'initdb'),
    ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--no-locale'],
    { encoding: 'utf8', ...user },
  );
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed (${init.status}):\n${init.stdout}${init.stderr}`);
  }
  const port = await freePort();
  let child: ChildProcess | undefined;
  const launch = async () => {
    child = await spawnUntilReady(
      join(bin, 'postgres'),
      [
        ...['-D', data, '-p', String(port), '-k', dir],
        ...['-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=200'],
        ...['-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
      ],
      'database system is ready to accept connections',
      `postgres on port ${port}`,
      user,
    );
  };
  const entry = { child: () => child, dir };
  live.add(entry);
  await launch();
  const stop = async () => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const running = child;
    // SIGINT is PostgreSQL's fast shutdown (SIGTERM waits for the clients to leave).
    await new Promise<void>((resolve) => {
      const kill = setTimeout(() => running.kill('SIGKILL'), 3_000);
      running.once('exit', () => {
        clearTimeout(kill);
        resolve();
      });
      running.kill('SIGINT');
    });
  };
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop,
    restart: launch,
    async destroy() {
      await stop();
      if (child) await stopProcess(child);
      live.delete(entry);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
