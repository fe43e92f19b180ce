import 'reflect-metadata';
import { Agent } from 'node:http';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import type { ChildProcess } from 'node:child_process';
import { exited, lineFrom, spawnTs } from '../support/child';
import { withTimeout } from '../../bench/support/with-timeout';
import { uniquePrefix, waitFor } from '../support/helpers';
import { createDatabase, HAVE_POSTGRES, startTestPostgres } from './support/postgres';
import { sendJson, startSample } from './support/sample-app';

/** Collects a child's stdout and stderr as they come. */
function output(child: ChildProcess): { stdout: () => string; stderr: () => string } {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return { stdout: () => stdout, stderr: () => stderr };
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The pids of every live descendant of `pid` (read from /proc). */
function descendants(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Field 4 of /proc/<pid>/stat, after the command name in parentheses, is the parent's pid.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // exited meanwhile
    }
  }
  const found: number[] = [];
  const walk = (parent: number) => {
    for (const [child, ppid] of parents) {
      if (ppid === parent) {
        found.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return found;
}

/** Whether `pid` is a live process (not a zombie). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** A printed `curl` line as a request: method, URL, JSON body. */
function parseCurl(line: string): { method: 'GET' | 'POST'; url: string; body?: unknown } {
  const url = /(http:\/\/[^\s']+)/.exec(line)![1];
  const data = /-d '([^']*)'/.exec(line);
  return {
    method: / -X POST /.test(line) ? 'POST' : 'GET',
    url,
    body: data ? JSON.parse(data[1]) : undefined,
  };
}

/**
 * `promise`, or a failure after `ms` (`withTimeout`) that also shows what the sample printed
 * last: a hang says where it hung instead of running into the test's timeout.
 */
function within<T>(
  ms: number,
  what: string,
  promise: Promise<T>,
  out: { stdout: () => string; stderr: () => string },
): Promise<T> {
  return withTimeout(promise, ms, what).catch((err: Error) => {
    throw new Error(
      `${err.message}; the sample's last output:\n${out.stdout().slice(-4_000)}\n` +
        `--- stderr ---\n${out.stderr().slice(-4_000)}`,
    );
  });
}

describe('npm run sample (sample/main.ts)', () => {
  it('starts a private redis-server when REDIS_URL is unset, prints curl commands that work, and stops both on SIGTERM', async () => {
    const child = spawnTs('sample/main.ts', [], { PORT: '0', REDIS_URL: '', KEY_PREFIX: '' });
    const out = output(child);
    const agent = new Agent({ keepAlive: false });
    try {
      await waitFor(
        'the sample to print its curl commands',
        () => /curl -s http:\/\/\S+\/tasks\n/.test(out.stdout()) || child.exitCode !== null,
        // A bound, not an expectation: the app compiles on the fly and opens the embedded
        // PostgreSQL before it prints.
        90_000,
        50,
      );
      const stdout = out.stdout();
      expect({ exitCode: child.exitCode, stderr: out.stderr() }).toEqual({
        exitCode: null,
        stderr: expect.any(String) as string,
      });
      const redisPort = Number(
        /private redis-server at redis:\/\/127\.0\.0\.1:(\d+)/.exec(stdout)![1],
      );
      const curls = stdout
        .split('\n')
        .filter((line) => line.trimStart().startsWith('curl '))
        // The event stream (`curl -N`) never ends: it is tested in flash-sale-embedded.e2e.spec.ts.
        .filter((line) => !line.includes(' -N '))
        .map(parseCurl);
      expect(curls.map((c) => `${c.method} ${new URL(c.url).pathname}`)).toEqual([
        'POST /flash-sales',
        'POST /flash-sales/phone/buy',
        'GET /orders/phone-1',
        'GET /flash-sales/phone',
        'GET /flash-sales/phone/orders',
        'POST /tasks',
        'POST /editors/ann/next',
        'POST /editors/ann/submit',
        'GET /tasks',
      ]);
      const statuses: number[] = [];
      for (const curl of curls) {
        const answer = sendJson(agent, curl.method, curl.url, curl.body);
        statuses.push((await within(30_000, `${curl.method} ${curl.url}`, answer, out)).status);
      }
      expect(statuses).toEqual([201, 202, 200, 200, 200, 201, 200, 200, 200]);
      // The dashboard's printed URL serves the page, and its data shows the task desk's queue.
      const dashboard = /dashboard \(locks and queues, live\): (http:\/\/\S+)/.exec(stdout)![1];
      expect((await sendJson(agent, 'GET', dashboard)).status).toBe(200);
      const overview = await sendJson(agent, 'GET', `${dashboard}/api/overview`);
      expect(overview.body.queues.length).toBeGreaterThan(0);
      await waitFor(
        'the order of the printed purchase',
        async () => (await sendJson(agent, 'GET', curls[3].url)).body.orders === 1,
        10_000,
        20,
      );

      // A second instance on the same Redis, with an embedded database of its own, would split
      // the orders: it refuses to start and says why.
      const second = spawnTs('sample/main.ts', [], {
        PORT: '0',
        REDIS_URL: `redis://127.0.0.1:${redisPort}`,
        KEY_PREFIX: '',
        DATABASE_URL: '',
      });
      const secondOut = output(second);
      // On a failure, what the first instance printed too: a claim it lost says so there.
      const bothOut = {
        stdout: () => `${secondOut.stdout().slice(-2_000)}\n--- the first's ---\n${out.stdout()}`,
        stderr: () => `${secondOut.stderr().slice(-2_000)}\n--- the first's ---\n${out.stderr()}`,
      };
      expect(await within(60_000, 'the second instance to exit', exited(second), bothOut)).toBe(1);
      expect(secondOut.stderr()).toContain(
        "EmbeddedDatabaseSharedError: another sample instance on this Redis (key prefix 'sample:') keeps " +
          'its orders in its own embedded PostgreSQL',
      );

      child.kill('SIGTERM');
      expect(await within(60_000, 'the sample to exit on SIGTERM', exited(child), out)).toBe(0);
      expect(out.stdout()).toContain(
        `stopped the private redis-server at redis://127.0.0.1:${redisPort}`,
      );
      await waitFor('the private redis-server to stop', async () => !(await listening(redisPort)));
      expect(out.stderr()).not.toMatch(/error/i);
    } finally {
      agent.destroy();
      // SIGTERM, not SIGKILL: the sample then stops its private redis-server too.
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    }
  }, 240_000);
});

describe('npm run sample:load (sample/load/flash-sale-load.ts)', () => {
  // The orders are rows in PostgreSQL: a real one (the embedded engine can't load inside Jest).
  (HAVE_POSTGRES ? it : it.skip)(
    'fires a flash sale with autocannon and reports sold units, orders, no oversold and no duplicate buyer',
    async () => {
      const postgres = await startTestPostgres();
      const databaseUrl = await createDatabase(postgres, 'load');
      const sample = await startSample({ keyPrefix: uniquePrefix('sample-load'), databaseUrl });
      try {
        const child = spawnTs(
          'sample/load/flash-sale-load.ts',
          ['--stock', '5', '--buyers', '200', '--connections', '20', '--presses', '2'],
          { SAMPLE_URL: sample.url },
        );
        const out = output(child);
        expect(await exited(child)).toBe(0);
        const report = out.stdout();
        expect(report).toMatch(/stock 5, 200 buyers pressing 2 times each, 20 connections/);
        expect(report).toMatch(/^requests +400 in [\d.]+ s = \d+ requests\/s$/m);
        expect(report).toMatch(/^latency +p50 \d+ ms +p99 \d+ ms/m);
        expect(report).toMatch(/^status codes +202: 5 /m);
        expect(report).toMatch(/^units sold +5 of 5 /m);
        expect(report).toMatch(/^orders created +5 /m);
        expect(report).toMatch(/^oversold +0$/m);
        expect(report).toMatch(/^duplicate buyers +0$/m);
        expect(report).toMatch(/^ +\d+–\d+ ms \| █+ \d+$/m);
        expect(report).toMatch(/^OK$/m);
      } finally {
        await sample.app.close();
        await postgres.destroy();
      }
    },
  );

  (HAVE_POSTGRES ? it : it.skip)(
    'stops the instances and servers it started, and removes their database folder, when killed with SIGTERM',
    async () => {
      const child = spawnTs('sample/load/flash-sale-load.ts', [
        ...['--instances', '1', '--database', 'postgres'],
        // Enough buyers that the load is still running when the signal comes.
        ...['--stock', '100', '--buyers', '1000000', '--connections', '10'],
      ]);
      const out = output(child);
      await lineFrom(child, /^flash sale 'load-/, 120_000);
      const started = descendants(child.pid!);
      const folders = started
        .map((pid) => /-D\0([^\0]+)/.exec(readFileSync(`/proc/${pid}/cmdline`, 'utf8'))?.[1])
        .filter((dir): dir is string => dir !== undefined);
      // redis-server, postgres (and its workers), the sample instance.
      expect(started.length).toBeGreaterThanOrEqual(3);
      expect(folders).toHaveLength(1);

      child.kill('SIGTERM');
      expect(await exited(child)).toBe(128 + 15);
      expect(out.stderr()).toContain('SIGTERM: stopping the sample instances');
      await waitFor('the processes it started to exit', () => !started.some(alive), 20_000);
      expect(existsSync(folders[0])).toBe(false);
    },
    180_000,
  );

  it('exits 1 with a hint when no sample is running at SAMPLE_URL', async () => {
    const child = spawnTs('sample/load/flash-sale-load.ts', [], {
      SAMPLE_URL: 'http://127.0.0.1:9',
    });
    const out = output(child);
    expect(await exited(child)).toBe(1);
    expect(out.stderr()).toContain('cannot reach the sample at http://127.0.0.1:9');
    expect(out.stderr()).toContain('npm run sample');
  }, 120_000);

  it('rejects an option that is not a positive integer, naming it', async () => {
    const child = spawnTs('sample/load/flash-sale-load.ts', ['--buyers', 'many']);
    const out = output(child);
    expect(await exited(child)).toBe(1);
    expect(out.stderr()).toContain(
      "--buyers (LOAD_BUYERS) must be an integer from 1 to 10000000, got 'many'",
    );
  });
});
