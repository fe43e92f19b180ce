import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { RedactingLogger } from '../redaction/redacting-logger';
import { LockService } from '../lock/lock.service';
import { RedisLockConnection } from '../redis/redis-connection';
import { taggedKey } from '../redis/tagged-key';
import { SCHEDULE_SCRIPTS } from './schedule-scripts';
import type { TickClaim, TickSettings } from './tick-plan';

/** The tick a running `@OncePerTick` handler claimed. */
export interface TickInfo {
  /** The job's name (`@OncePerTick({ name })`, by default `Class.method`). */
  readonly job: string;
  /**
   * The tick: for `@Cron`, its scheduled time (ms since the epoch); for `@Interval(ms)`, the
   * number of the `ms`-long window of the Redis clock; for `@Timeout`, `0`.
   */
  readonly tick: number;
}

const running = new AsyncLocalStorage<TickInfo>();
const claimsByLockService = new WeakMap<LockService, TickClaims>();

/**
 * The tick the `@OncePerTick` handler running in this async call chain claimed, e.g. to build an
 * idempotency key; `undefined` outside one.
 * @example
 * await reports.build({ id: `daily:${currentTick()!.tick}` });
 */
export function currentTick(): TickInfo | undefined {
  return running.getStore();
}

/**
 * @internal Claims ticks of `@OncePerTick` handlers in Redis (claim-tick.lua, start-tick.lua)
 * and runs a handler only for the ticks this instance claimed and started.
 */
@Injectable()
export class TickClaims implements BeforeApplicationShutdown {
  private readonly logger = new RedactingLogger('OncePerTick');
  private readonly waits = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly connection: RedisLockConnection,
    locks: LockService,
  ) {
    claimsByLockService.set(locks, this);
  }

  /** The claims of the module whose `LockService` is `locks`. */
  static of(locks: LockService): TickClaims | undefined {
    return claimsByLockService.get(locks);
  }

  /**
   * Claims the tick `claim` names for `job` and, if this instance gets it, marks it started and
   * calls `invoke`. When another instance claimed it but has not started it yet, waits for its
   * start lease and takes the tick over if it never starts. Resolves `undefined` when the tick
   * runs elsewhere (or the application shuts down meanwhile).
   */
  async runOnce(
    job: string,
    claim: TickClaim,
    s: TickSettings,
    invoke: () => unknown,
  ): Promise<unknown> {
    const key = taggedKey(this.connection.options.keyPrefix, 'tick', job);
    const token = randomUUID();
    let tick = claim.tick;
    for (;;) {
      const [claimed, claimedTick, waitMs] = (await this.connection.run(
        SCHEDULE_SCRIPTS.claimTick,
        [key],
        [
          claim.mode,
          tick,
          claim.periodMs,
          claim.earlyMs,
          token,
          s.startLeaseMs,
          claim.keepMs,
          claim.keepTicks,
        ],
      )) as [number, string, number];
      if (claimed === 1) {
        const started = await this.connection.run(
          SCHEDULE_SCRIPTS.startTick,
          [key],
          [claimedTick, token],
        );
        if (started !== 1) return undefined;
        return running.run({ job, tick: Number(claimedTick) }, invoke);
      }
      if (waitMs < 0 || this.closed) {
        this.logger.debug(`${job}: tick ${claimedTick} runs on another instance`);
        return undefined;
      }
      tick = claimedTick;
      await this.delay(waitMs + 1);
      if (this.closed) return undefined;
    }
  }

  /** @internal Stops waiting to take over ticks (the claims themselves stay). */
  beforeApplicationShutdown(): void {
    this.closed = true;
    for (const wake of this.waits) wake();
  }

  private delay(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.waits.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.waits.add(wake);
    });
  }
}
