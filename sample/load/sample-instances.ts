import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import { join } from 'node:path';
import { startPostgresServer, type PostgresServer } from '../../scripts/postgres-server';
import { startRedisServer, type RedisServer } from '../../scripts/redis-server';
import { redactDatabaseUrl } from '../config/sample-config';

/** Sample instances started by `npm run sample:load -- --instances N`. */
export interface SampleInstances {
  /** Base URL of each instance. */
  readonly urls: string[];
  /** Where their orders go (password hidden). */
  readonly database: string;
  /** Stops the instances (SIGTERM), then the servers started for them. */
  stop(): Promise<void>;
}

const ROOT = join(__dirname, '..', '..');
/** How long an instance may take to start (ts-node compiles the app first). */
const START_TIMEOUT_MS = 120_000;

/**
 * Starts `count` instances of the sample (`sample/main.ts`, each its own process on a free port)
 * on one Redis — `REDIS_URL`, else a private redis-server — with their orders in one PostgreSQL
 * (`database: 'postgres'`: `DATABASE_URL`, else a private server, see `ensure-postgres`) or, for
 * one instance, the embedded one. Until `stop`, a SIGINT or SIGTERM to this process stops them
 * all (and removes the database folder) before it exits: `kill` of `npm run sample:load` leaves
 * no process behind.
 */
export async function startSampleInstances(
  count: number,
  database: 'postgres' | 'embedded',
): Promise<SampleInstances> {
  let redis: RedisServer | undefined;
  let postgres: PostgresServer | undefined;
  const children: ChildProcess[] = [];
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= stopAll();
    return stopping;
  };
  const stopAll = async () => {
    process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
            child.once('exit', () => {
              clearTimeout(kill);
              resolve();
            });
            child.kill('SIGTERM');
          }),
      ),
    );
    await postgres?.destroy();
    await redis?.stop();
  };
  // Node's default for these signals ends the process at once, 'exit' handlers unrun.
  const onSignal = (signal: NodeJS.Signals) => {
    console.error(`${signal}: stopping the sample instances and the servers started for them…`);
    void stop().finally(() => process.exit(128 + (constants.signals[signal] ?? 0)));
  };
  process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
  try {
    let redisUrl = process.env.REDIS_URL;
    if (!redisUrl) {
      redis = await startRedisServer();
      redisUrl = redis.url;
    }
    let databaseUrl = database === 'postgres' ? process.env.DATABASE_URL : '';
    if (database === 'postgres' && !databaseUrl) {
      postgres = await startPostgresServer();
      databaseUrl = postgres.url;
    }
    const env = { ...process.env, REDIS_URL: redisUrl, DATABASE_URL: databaseUrl, PORT: '0' };
    const urls = await Promise.all(
      Array.from({ length: count }, () => {
        const child = spawn(
          process.execPath,
          ['-r', 'ts-node/register/transpile-only', join(ROOT, 'sample', 'main.ts')],
          { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
        );
        children.push(child);
        return listeningUrl(child);
      }),
    );
    return {
      urls,
      database: databaseUrl ? redactDatabaseUrl(databaseUrl) : 'the embedded PostgreSQL',
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Resolves with the URL an instance prints once it listens; rejects if it exits first. */
function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(
      () => reject(new Error(`a sample instance did not start within ${START_TIMEOUT_MS} ms`)),
      START_TIMEOUT_MS,
    );
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const url = /sample listening on (http:\/\/[^\s,]+),/.exec(stdout)?.[1];
      if (url) {
        clearTimeout(timer);
        resolve(url);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`a sample instance exited (${code}) before it listened:\n${stderr}`));
    });
  });
}
