/**
 * `npm run smoke:quickstart`: the README's "Use it in your app" path, as a user would take it.
 * Packs the library (`prepack` builds it), makes a fresh NestJS 11 CommonJS app of the README's
 * `// src/….ts` blocks (test/quickstart holds only package.json and tsconfig.json), installs the
 * tarball and the peers, compiles it, runs it against a private redis-server, pays an order over
 * HTTP, waits for the queue worker's receipt in the log, and stops it with SIGTERM. Exits 1 with
 * the app's output on any failure.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { readmeQuickstart } from './quickstart';
import { freePort, startRedisServer, stopProcess, type RedisServer } from './redis-server';

const root = resolve(__dirname, '..');
/** The peers a Nest 11 app has, at the versions this repository tests with. */
const PEERS = [
  '@nestjs/common',
  '@nestjs/core',
  '@nestjs/platform-express',
  'ioredis',
  'reflect-metadata',
  'rxjs',
  '@types/node',
];
const DEADLINE_MS = 30_000;

function run(command: string, args: string[], cwd: string): string {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Resolves once `ready()` holds; rejects after `DEADLINE_MS` or when `app` exits first. */
function until(what: string, ready: () => boolean, app: ChildProcess): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const started = Date.now();
    const poll = setInterval(() => {
      if (ready()) {
        clearInterval(poll);
        resolvePromise();
      } else if (app.exitCode !== null || app.signalCode !== null) {
        clearInterval(poll);
        reject(new Error(`the app exited (${app.exitCode ?? app.signalCode}) before ${what}`));
      } else if (Date.now() - started > DEADLINE_MS) {
        clearInterval(poll);
        reject(new Error(`no ${what} within ${DEADLINE_MS} ms`));
      }
    }, 50);
  });
}

async function main(): Promise<void> {
  const started = Date.now();
  const work = mkdtempSync(join(tmpdir(), 'quickstart-smoke-'));
  let redis: RedisServer | undefined;
  let app: ChildProcess | undefined;
  let output = '';
  try {
    const tarball = run('npm', ['pack', '--silent', '--pack-destination', work], root)
      .trim()
      .split('\n')
      .pop()!;
    cpSync(join(root, 'test/quickstart/package.json'), join(work, 'package.json'));
    cpSync(join(root, 'test/quickstart/tsconfig.json'), join(work, 'tsconfig.json'));
    const files = readmeQuickstart();
    for (const [path, code] of files) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), code);
    }
    const dev = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).devDependencies;
    const peers = PEERS.map((name) => `${name}@${dev[name]}`);
    run(
      'npm',
      [
        'install',
        '--no-audit',
        '--no-fund',
        '--prefer-offline',
        '--loglevel=error',
        `./${tarball}`,
        ...peers,
      ],
      work,
    );
    run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.json'], work);

    redis = await startRedisServer();
    const port = await freePort();
    app = spawn(process.execPath, ['dist/main.js'], {
      cwd: work,
      env: { ...process.env, PORT: String(port), REDIS_URL: redis.url, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    app.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    app.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await until('start', () => output.includes('Nest application successfully started'), app);

    const res = await fetch(`http://127.0.0.1:${port}/orders/42/pay`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 5 }),
      signal: AbortSignal.timeout(DEADLINE_MS),
    });
    const body = await res.text();
    if (res.status !== 201 || body !== JSON.stringify({ id: '42', paid: 5 })) {
      throw new Error(`POST /orders/42/pay answered ${res.status} ${body}`);
    }
    await until('receipt', () => output.includes('receipt for order 42: 5 paid'), app);

    app.kill('SIGTERM');
    await until(
      'exit after SIGTERM',
      () => app!.exitCode !== null || app!.signalCode !== null,
      app,
    ).catch((err: Error) => {
      if (!/exited/.test(err.message)) throw err;
    });
    if (/\bERROR\b/.test(output)) throw new Error('the app logged an error');
    console.log(
      `smoke:quickstart: ok (${[...files.keys()].join(', ')} from the README; ` +
        `201 and the worker's receipt; stopped by SIGTERM; ${Math.round((Date.now() - started) / 1000)} s)`,
    );
  } catch (err) {
    console.error(
      `smoke:quickstart: FAILED: ${(err as Error).message}\n--- app output ---\n${output}`,
    );
    process.exitCode = 1;
  } finally {
    if (app) await stopProcess(app);
    await redis?.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

void main();
