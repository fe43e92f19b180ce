import type { ChildProcess } from 'node:child_process';
import type { Redis } from 'ioredis';
import { exited, lineFrom, spawnTs } from '../support/child';
import { redisClient, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';
import { reportFaults } from './support/fault-report';
import { PROFILE, PROFILE_NAME } from './support/profile';

const { processes, holderKills, sections, ttlMs, slackMs } = PROFILE.crashingHolders;

/**
 * Longest time the lock may stay unused, in ms: one TTL (a holder killed just after it took the
 * lock, or a waiter killed just before the lock was handed to it) plus what a waiter needs to
 * notice the expiry (its retry interval, 100 ms) and scheduling slack for a loaded machine (more
 * in the ci profile, see profile.ts).
 */
const MAX_GAP_MS = ttlMs + slackMs;

describe(`Fault: crashing holders (${processes} processes, SIGKILL of the holder, profile ${PROFILE_NAME})`, () => {
  const prefix = uniquePrefix('faults-crash');
  const key = 'crash';
  const k = (name: string) => `${prefix}${name}`;
  const alive = new Map<string, ChildProcess>();
  const finished: Array<Promise<{ code: number | string; line: string }>> = [];
  let redis: Redis;

  const spawnHolder = async (): Promise<void> => {
    const child = spawnTs('test/faults/fixtures/crashing-holder.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      KEY: key,
      TTL_MS: String(ttlMs),
    });
    const done = lineFrom(child, /^done \d+$/, 600_000).catch((e: Error) => e.message);
    const pid = (await lineFrom(child, /^started \d+$/, 60_000)).split(' ')[1];
    alive.set(pid, child);
    child.once('exit', () => alive.delete(pid));
    finished.push(done.then(async (line) => ({ line, code: await exited(child) })));
  };

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(async () => {
    // After a failure: tell every holder to stop (one still starting stops at its first look),
    // and kill those running. Those still starting are killed after the file (support/after-env).
    await redis.set(k('stop'), '1');
    for (const child of alive.values()) child.kill('SIGKILL');
    redis.disconnect();
  });

  it('never has two holders, loses no update, and every kill costs at most one TTL of unavailability', async () => {
    await Promise.all(Array.from({ length: processes }, () => spawnHolder()));
    const completed = async () => Number(await redis.get(k('completed')));
    const kills: Array<{ at: number; fence: number; heldAtKill: boolean }> = [];
    const respawns: Promise<void>[] = [];

    while (kills.filter((kill) => kill.heldAtKill).length < holderKills) {
      // Every kill meets the full set of processes: the one killed before is replaced (and its
      // replacement started) first. Killing faster than replacements start would empty the set,
      // and the time nobody runs would be measured as the lock's unavailability.
      await Promise.all(respawns);
      // Let the others make progress first, so that every kill is its own fault.
      const target = (await completed()) + 20 + Math.floor(Math.random() * 40);
      await waitFor('progress between kills', async () => (await completed()) >= target, 60_000);
      const holder = await redis.hgetall(k('holder'));
      const victim = alive.get(holder.pid);
      if (!victim) continue;
      // Recorded before the kill: a section it never leaves is not a second holder.
      await redis.sadd(k('killed'), holder.pid);
      const at = Date.now();
      victim.kill('SIGKILL');
      await exited(victim);
      // Still its token after death: it died holding the lock (else it had just released it).
      // (A held value carries a trailing '*' while others wait: see docs/locks.md.)
      const value = await redis.get(`${prefix}lock:{${key}}`);
      const heldAtKill = value?.replace(/\*$/, '') === holder.token;
      kills.push({ at, fence: Number(holder.fence), heldAtKill });
      // Restarted once the survivors went on: a child's start (ts-node compiling the library)
      // takes both cores for seconds, which would be measured as the lock's unavailability.
      const doneAtKill = await completed();
      await waitFor(
        'a section after the kill',
        async () => (await completed()) > doneAtKill,
        60_000,
        20,
      );
      respawns.push(spawnHolder());
    }
    await Promise.all(respawns);
    await waitFor(
      'the minimum number of sections',
      async () => (await completed()) >= sections,
      300_000,
      50,
    );
    await redis.set(k('stop'), '1');
    const results = await Promise.all(finished);

    const violations = await redis.lrange(k('violations'), 0, -1);
    const total = await completed();
    const counter = Number(await redis.get(k('counter')));

    // Unavailability: the gaps in which nobody was inside a section, in fence (= grant) order.
    // A section that never exited (its process was killed) counts from its entry.
    const entries = await redis.zrange(k('entries'), 0, -1, 'WITHSCORES');
    const exits = await redis.hgetall(k('exits'));
    const timeline: Array<{ fence: number; entered: number; left: number }> = [];
    for (let i = 0; i < entries.length; i += 2) {
      const fence = Number(entries[i]);
      const entered = Number(entries[i + 1]);
      timeline.push({ fence, entered, left: exits[fence] ? Number(exits[fence]) : entered });
    }
    timeline.sort((a, b) => a.fence - b.fence);
    let longestGap = 0;
    let gapAt = 0;
    for (let i = 1; i < timeline.length; i++) {
      const gap = timeline[i].entered - timeline[i - 1].left;
      if (gap > longestGap) [longestGap, gapAt] = [gap, i];
    }
    // Where the longest gap was (reported, for a failure's diagnosis): the fences around it, and
    // how long after the last kill before its end it began.
    const before = gapAt > 0 ? timeline[gapAt - 1] : undefined;
    const lastKill = kills.filter((kill) => kill.at <= (timeline[gapAt]?.entered ?? 0)).pop();
    const gapWhere = before
      ? `longest gap after fence ${before.fence}${exits[before.fence] ? '' : ' (never left)'}, ` +
        (lastKill
          ? `began ${before.left - lastKill.at} ms after the ${lastKill.heldAtKill ? 'holder' : 'waiter'} kill before it`
          : 'before any kill')
      : 'no gap';
    // Each kill's own cost: from the kill to the next section entered after it.
    const costOf = (kill: (typeof kills)[number]) => {
      const next = timeline.find((s) => s.fence > kill.fence && s.entered >= kill.at);
      return next ? next.entered - kill.at : Infinity;
    };
    const costs = kills.filter((kill) => kill.heldAtKill).map(costOf);
    const waiterCosts = kills.filter((kill) => !kill.heldAtKill).map(costOf);

    // Reported before the checks, so that a failing run reports what it found too.
    reportFaults({
      scenario: '1 crashing holders',
      operations: total,
      faults: kills.length,
      violations: violations.length + (counter === total ? 0 : 1),
      longestUnavailabilityMs: longestGap,
      note:
        `${processes} processes, TTL ${ttlMs} ms; ${kills.filter((x) => x.heldAtKill).length} ` +
        `SIGKILLs of the holder + ${kills.filter((x) => !x.heldAtKill).length} of a process that ` +
        `had just released (a waiter in line); longest kill-to-next-section ` +
        `${Math.max(...costs)} ms for a holder, ` +
        `${waiterCosts.length ? Math.max(...waiterCosts) : 0} ms for a waiter (bound ${MAX_GAP_MS} ms); ` +
        gapWhere,
    });

    // Every process ran until it was killed or told to stop.
    const stopped = results.filter((r) => r.code !== 'SIGKILL');
    expect(stopped).toHaveLength(processes);
    for (const r of stopped) {
      expect(r.line).toMatch(/^done \d+$/);
      expect(r.code).toBe(0);
    }
    expect(results.filter((r) => r.code === 'SIGKILL')).toHaveLength(kills.length);

    expect(violations).toEqual([]);
    expect(counter).toBe(total);
    expect(Math.max(...costs, ...waiterCosts)).toBeLessThanOrEqual(MAX_GAP_MS);
    expect(longestGap).toBeLessThanOrEqual(MAX_GAP_MS);
  }, 900_000);
});
