import 'reflect-metadata';
import type { ChildProcess } from 'node:child_process';
import type { INestApplicationContext } from '@nestjs/common';
import { FencedStore, LockService } from '../../lib';
import { exited, linesOf, spawnTs } from '../support/child';
import { createLockApp, testRedisUrl, uniquePrefix, waitFor } from '../support/helpers';
import { reportFaults } from './support/fault-report';
import { PROFILE, PROFILE_NAME } from './support/profile';

const { rounds, ttlMs, slackMs } = PROFILE.frozenHolder;

/**
 * The frozen holder's lock must be free again within one TTL, plus scheduling slack (more in the
 * ci profile, see profile.ts).
 */
const MAX_UNAVAILABLE_MS = ttlMs + slackMs;

describe(`Fault: frozen holder and fencing (SIGSTOP past the TTL, profile ${PROFILE_NAME})`, () => {
  const prefix = uniquePrefix('faults-frozen');
  const key = 'frozen';
  const resource = 'ledger';
  let app: INestApplicationContext;
  let locks: LockService;
  let store: FencedStore;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    app = await createLockApp({ keyPrefix: prefix });
    locks = app.get(LockService);
    store = app.get(FencedStore);
  });
  afterAll(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
    await app.close();
  });

  it("refuses the frozen holder's stale write after a newer holder wrote, and aborts its lock.signal when it resumes", async () => {
    child = spawnTs('test/faults/fixtures/frozen-holder.ts', [], {
      REDIS_URL: testRedisUrl(),
      PREFIX: prefix,
      KEY: key,
      RESOURCE: resource,
      TTL_MS: String(ttlMs),
      ROUNDS: String(rounds),
    });
    const out = linesOf(child);
    let cursor = 0;
    let longest = 0;
    let ourWrites = 0;
    let theirWrites = 0;
    let violations = 0;
    /** Counts a broken invariant (for the report) before its `expect` fails the test. */
    const holds = (ok: boolean) => {
      if (!ok) violations++;
    };

    try {
      for (let round = 1; round <= rounds; round++) {
        const holding = await out.next(new RegExp(`^holding ${round} \\d+$`), cursor, 60_000);
        const staleFence = Number(holding.text.split(' ')[2]);
        // It is working: its progress writes are accepted.
        await waitFor('a progress write of the holder', async () => {
          const now = await store.read(resource);
          return now?.fence === staleFence && now.value !== `A ${round} 0`;
        });

        const frozenAt = Date.now();
        child.kill('SIGSTOP');
        // Another process (this one) waits in line and gets the lock once the frozen one's TTL ran out.
        const lock = await locks.acquire(key, { waitMs: 30_000, ttlMs: 60_000 });
        const unavailable = Date.now() - frozenAt;
        longest = Math.max(longest, unavailable);
        holds(lock.fence > staleFence);
        expect(lock.fence).toBeGreaterThan(staleFence);
        expect(unavailable).toBeLessThanOrEqual(MAX_UNAVAILABLE_MS);
        expect(await store.write(resource, lock.fence, `B ${round}`)).toBe(true);
        ourWrites++;

        child.kill('SIGCONT');
        // It resumes believing it still holds the lock and writes with its old fence: refused.
        await out
          .next(new RegExp(`^refused ${round} ${staleFence} \\d+$`), cursor)
          .catch(async (err: unknown) => {
            // Never refused: count it when a stale write did overwrite ours.
            holds((await store.read(resource))?.fence === lock.fence);
            throw err;
          });
        const aborted = (await out.next(new RegExp(`^aborted ${round} `), cursor)).text;
        holds(aborted === `aborted ${round} LockLostError`);
        expect(aborted).toBe(`aborted ${round} LockLostError`);
        const end = await out.next(new RegExp(`^round ${round} `), cursor);
        // Its release found someone else's token and left the lock alone.
        holds(end.text === `round ${round} released=false`);
        expect(end.text).toBe(`round ${round} released=false`);
        const after = await store.read(resource);
        holds(after?.value === `B ${round}` && after.fence === lock.fence);
        expect(after).toEqual({ value: `B ${round}`, fence: lock.fence });
        const stillHeld = await lock.isHeld();
        holds(stillHeld);
        expect(stillHeld).toBe(true);
        cursor = out.lines.indexOf(end) + 1;
        // The next round: it is in line again and gets the lock from this release.
        expect(await lock.release()).toBe(true);
      }

      const done = await out.next(/^done \d+$/, cursor);
      expect(await exited(child)).toBe(0);
      theirWrites = Number(done.text.split(' ')[1]);
    } finally {
      // Also when a check failed: the report then shows what was found up to there.
      reportFaults({
        scenario: '2 frozen holder',
        operations: theirWrites + ourWrites + 2 * rounds,
        faults: rounds,
        violations,
        longestUnavailabilityMs: longest,
        note:
          `TTL ${ttlMs} ms; SIGSTOP to the next holder's grant (bound ${MAX_UNAVAILABLE_MS} ms); ` +
          `${rounds} stale writes refused, ${rounds} lock.signal aborts with LockLostError`,
      });
    }
  }, 300_000);
});
