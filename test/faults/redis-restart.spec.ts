import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { QueueService } from '../../lib';
import { exited, linesOf, spawnTs } from '../support/child';
import type { ChildLines } from '../support/child-lines';
import { createLockApp, sleep, uniquePrefix, waitFor, waitForLine } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';
import { reportFaults } from './support/fault-report';
import { PROFILE, PROFILE_NAME } from './support/profile';

const { restarts, minOutageMs, commandTimeoutMs } = PROFILE.redisRestart;
const PROBES = ['tryAcquire', 'isLocked', 'enqueue', 'claim', 'stats', 'fencedWrite', 'fencedRead'];
/**
 * Longest a probe may take while Redis is down: its `commandTimeoutMs` bound, plus slack for a
 * loaded machine (timers fire late, not early). A hang would take far longer.
 */
const MAX_PROBE_MS = commandTimeoutMs + 1_500;

describe(`Fault: Redis restart under held locks and idle workers (profile ${PROFILE_NAME})`, () => {
  const prefix = uniquePrefix('faults-restart');
  const queue = 'jobs';
  let server: RedisServer;
  let admin: Redis;
  let app: INestApplicationContext;
  let queues: QueueService;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    server = await startRedisServer();
    // For looking at the server from outside; reconnects quickly after each restart.
    admin = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 100 });
    admin.on('error', () => undefined);
    app = await createLockApp({ redis: server.url, keyPrefix: prefix });
    queues = app.get(QueueService);
  });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await app.close();
    admin.disconnect();
    await server.stop();
  });

  /** True when a client is blocked in BLPOP on the queue's wake-up list: an idle worker. */
  const workerIdle = async () =>
    ((await admin.client('LIST')) as string)
      .split('\n')
      .some((c) => c.includes('cmd=blpop') && /flags=\S*b/.test(c));
  let out: ChildLines;
  /** The holder's latest news is that it holds the lock. */
  const holding = () =>
    out
      .matching(/^(holding|lost) /)
      .pop()
      ?.text.startsWith('holding') === true;
  const inLine = () => waitForLine(admin, prefix, 'held', 1, 20_000);

  it('fails fast with typed errors during the outage and resumes without a restart of the app', async () => {
    child = spawnTs('test/faults/fixtures/restart-child.ts', [], {
      REDIS_URL: server.url,
      PREFIX: prefix,
      QUEUE: queue,
      COMMAND_TIMEOUT_MS: String(commandTimeoutMs),
      HOLDER_TTL_MS: '1500',
    });
    out = linesOf(child);
    await out.next(/^ready$/, 0, 60_000);
    await queues.enqueue(queue, 'warm-up');
    await out.next(/^handled warm-up$/);

    let longestRecovery = 0;
    let longestOutage = 0;
    let longestWake = 0;
    let mark = 0;
    for (let cycle = 1; cycle <= restarts; cycle++) {
      // Locks held, a waiter in line, the worker idle: then Redis goes away.
      await waitFor('the holder holding', holding, 20_000, 20);
      await inLine();
      await waitFor('the worker idle in BLPOP', workerIdle, 20_000, 20);
      const down = out.lines.length;
      const stoppedAt = Date.now();
      await server.stop();

      // Every probe fails (typed, bounded), the holder's signal aborts, the waiter gives up.
      for (const op of PROBES) await out.next(new RegExp(`^probe ${op} (?!ok)`), down);
      await out.next(/^lost /, down);
      await out.next(/^waiter-error /, down);
      // Not a wait for a condition: the outage has a fixed minimum length (the profile's), however
      // fast the app noticed it, so that each cycle measures recovery from an outage of a known
      // size, longer than the holder's TTL and the command timeout, with reconnects backing off.
      await sleep(Math.max(0, minOutageMs - (Date.now() - stoppedAt)));

      const up = out.lines.length;
      await server.restart();
      const upAt = Date.now();
      longestOutage = Math.max(longestOutage, upAt - stoppedAt);
      let recovered = upAt;
      for (const op of PROBES) {
        recovered = Math.max(recovered, (await out.next(new RegExp(`^probe ${op} ok `), up)).at);
      }
      longestRecovery = Math.max(longestRecovery, recovered - upAt);

      // The holder takes the lock again, the waiter lines up again, the idle worker wakes again.
      await waitFor('the holder holding again', holding, 20_000, 20);
      await inLine();
      await waitFor('the worker idle in BLPOP again', workerIdle, 20_000, 20);
      // (This test's own client reconnects on its own schedule: wait for it, not for the worker.)
      await queues.stats(queue);
      const enqueuedAt = Date.now();
      await queues.enqueue(queue, `after-restart-${cycle}`);
      const handled = await out.next(new RegExp(`^handled after-restart-${cycle}$`), up);
      longestWake = Math.max(longestWake, handled.at - enqueuedAt);
      mark = out.lines.length;
    }

    // Still the same process, never restarted.
    expect(child.exitCode).toBeNull();
    const running = out.lines.map((l) => l.text);
    child.kill('SIGTERM');
    await out.next(/^closed$/, mark);
    expect(await exited(child)).toBe(0);
    // (Shutdown aborts the waiter with an AbortError: only what happened before it counts.)
    const lines = running.concat(out.matching(/^unhandled/, running.length).map((l) => l.text));
    const unhandled = lines.filter((l) => l.startsWith('unhandled'));
    const probes = lines.filter((l) => l.startsWith('probe ')).map((l) => l.split(' '));
    const failures = probes.filter(([, , outcome]) => outcome !== 'ok');
    const slowest = Math.max(...probes.map(([, , , ms]) => Number(ms)));
    const errorNames = new Set([
      ...failures.map(([, , outcome]) => outcome),
      ...lines.filter((l) => /^(waiter|holder)-error /.test(l)).map((l) => l.split(' ')[1]),
    ]);
    const lost = lines.filter((l) => l.startsWith('lost '));

    const otherErrors = [...errorNames].filter((name) => name !== 'RedisUnavailableError');
    const otherLosses = lost.filter((l) => l !== 'lost LockLostError');

    // Reported before the checks, so that a failing run reports what it found too.
    reportFaults({
      scenario: '3 redis restart',
      operations: probes.length + lines.filter((l) => /^(handled|holding|waiter-)/.test(l)).length,
      faults: restarts,
      violations:
        unhandled.length +
        otherErrors.length +
        otherLosses.length +
        (slowest > MAX_PROBE_MS ? 1 : 0),
      longestUnavailabilityMs: longestOutage + longestRecovery,
      note:
        `outages up to ${longestOutage} ms; every service answering again ${longestRecovery} ms ` +
        `after redis-server was up; ${failures.length} failed calls, all RedisUnavailableError, ` +
        `slowest ${slowest} ms (commandTimeoutMs ${commandTimeoutMs}); idle worker woke ` +
        `${longestWake} ms after an enqueue`,
    });

    expect(unhandled).toEqual([]);
    expect([...errorNames]).toEqual(['RedisUnavailableError']);
    expect(new Set(lost)).toEqual(new Set(['lost LockLostError']));
    expect(slowest).toBeLessThanOrEqual(MAX_PROBE_MS);
  }, 600_000);
});
