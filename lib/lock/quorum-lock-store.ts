import { clockDriftMs } from '../waiting/grant-deadline';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import type { ResolvedLockOptions } from '../options/resolve-options';
import type { RedisLockConnection } from '../redis/redis-connection';
import { checkOneSlot, type LockRedisKeys } from './lock-keys';
import { LOCK_SCRIPTS } from './lock-scripts';
import {
  lockScriptKeys,
  type LockAttempt,
  type LockExtension,
  type LockStore,
  type QuorumShortfall,
  type WaitMode,
  type LineEntry,
  type LineStatus,
  type LockHandoff,
  type LockRejoin,
  RECHECK_MESSAGE,
} from './lock-store';
import { Quorum, type NodeOutcome } from './quorum';
import { QuorumClocks } from './quorum-clocks';

/** A reply of `quorum-acquire.lua`: `[1, nowMs, ...fences]` or `[0, nowMs, wait]`. */
type AcquireReply = number[];

/**
 * Redlock: every lock lives on N independent masters and is held when a majority
 * (`floor(N / 2) + 1`) granted it within its validity time.
 *
 * - An attempt runs `quorum-acquire.lua` on every node in parallel (not fair, no line) and counts
 *   the grants. It is decided as soon as a quorum granted or can no longer grant; a node that is
 *   known to be disconnected counts as failed at once instead of queueing the request.
 * - Validity = `ttl - elapsed - drift`, with `elapsed` from the start of the attempt
 *   (monotonic clock) and `drift = clockDriftFactor * ttl + 2 ms`; the lock is granted only when
 *   it is positive, and `expiresAt` is the attempt's start plus `ttl - drift`.
 * - With fencing, each granting node hands out its next fence; the grant's fence is one above the
 *   highest of them, and is written back to a majority (`quorum-raise-fence.lua`) before the grant
 *   is reported (see `raiseFences`): fences rise strictly from one grant to the next.
 * - A failed attempt releases the lock on every node that granted it (awaited) or may still
 *   grant it (queued behind the attempt on the same connection) before the caller retries with
 *   a fresh token.
 * - Release, extend, isHeld and isLocked go to every node and count a majority; when fewer nodes
 *   than a quorum answer, they throw `LockQuorumError`.
 * - Extending also locks again, with the same token, a node that lost the lock (restarted
 *   empty), but only before that node's own clock reaches the end of the lock's validity
 *   (`QuorumClocks`, `extend-or-relock.lua`); such a node confirms the extension.
 */
export class QuorumLockStore implements LockStore {
  readonly lines = false;
  private readonly quorum: Quorum;
  private readonly clocks: QuorumClocks;
  private readonly fenceTtlMs: number;
  /**
   * Per token of a lock granted here: until when (`performance.now()` ms) it is surely valid.
   * Dropped on release and on a lost extension; lapsed ones are swept as grants add entries.
   */
  private readonly validUntil = new Map<string, number>();
  /** The size at which `remember` next sweeps lapsed entries (amortised: doubles). */
  private sweepAt = 64;

  /**
   * @param nodes the independent masters
   * @param clockDriftFactor the module's `clockDriftFactor`
   */
  constructor(
    private readonly nodes: readonly RedisLockConnection[],
    private readonly clockDriftFactor: number,
  ) {
    this.quorum = new Quorum(nodes);
    this.clocks = new QuorumClocks(nodes.length, clockDriftFactor);
    this.fenceTtlMs = nodes[0].options.fenceTtlMs;
  }

  check(keys: readonly LockRedisKeys[], o: ResolvedLockOptions): void {
    if (this.nodes.some((n) => n.isCluster)) checkOneSlot(keys);
    if (o.ttlMs <= this.drift(o.ttlMs)) {
      throw new RedisLockOptionsError(
        'ttlMs',
        o.ttlMs,
        'a TTL longer than the clock drift (clockDriftFactor * ttlMs + 2 ms) in quorum mode',
      );
    }
    if (o.waitForReplicas) {
      throw new RedisLockOptionsError(
        'waitForReplicas',
        o.waitForReplicas,
        'no value with nodes (in quorum mode every node is an independent master)',
      );
    }
  }

  async attempt(
    keys: readonly LockRedisKeys[],
    token: string,
    o: ResolvedLockOptions,
    wait: WaitMode,
  ): Promise<LockAttempt> {
    const sentAt = Date.now();
    const start = performance.now();
    const drift = this.drift(o.ttlMs);
    const until = start + o.ttlMs - drift;
    const redisKeys: string[] = [];
    for (const k of keys) redisKeys.push(k.value, k.fence);
    // A waiter marks the holders so that their release announces itself.
    const args = [
      token,
      o.ttlMs,
      `${o.fencing ? 1 : 0}${wait === 'none' ? 0 : 'm'}`,
      this.fenceTtlMs,
    ];
    const granted = (reply: AcquireReply) => reply[0] === 1;
    /** Set once the attempt failed: a node's grant that comes after it is released again. */
    let undone = false;
    const grantedAfterUndo = (node: RedisLockConnection) => (reply: unknown) => {
      // The undo's release was sent behind this call but may have run first: an attempt sent by
      // EVALSHA and answered NOSCRIPT (a SCRIPT FLUSH) runs again by EVAL, after it.
      if (undone && granted(reply as AcquireReply)) releaseOn(node, keys, token).catch(() => 0);
    };
    const outcomes = await this.quorum.gather(
      (node, i) => {
        const late = grantedAfterUndo(node);
        const call = node.run(LOCK_SCRIPTS.quorumAcquire, redisKeys, args, late);
        call.then(late, () => undefined);
        return this.clocked(i, call);
      },
      granted,
      Math.max(1, until - performance.now()),
    );
    const tally = this.quorum.tally(outcomes, granted);
    let shortOf = tally.answered < this.quorum.needed ? tally : undefined;
    if (tally.granted >= this.quorum.needed && performance.now() < until) {
      const fences = o.fencing ? await this.raiseFences(keys, outcomes, until) : keys.map(() => 0);
      if (Array.isArray(fences) && performance.now() < until) {
        this.remember(token, until);
        return {
          granted: true,
          fences,
          expiresAt: sentAt + o.ttlMs - drift,
          redisNow: 0,
          sentAt,
          wait: 0,
        };
      }
      if (!Array.isArray(fences)) shortOf = fences.shortOf;
    }
    undone = true;
    await this.undo(keys, token, outcomes);
    const waits: number[] = [];
    for (const out of outcomes) {
      if (out.state === 'answered' && out.value[0] !== 1 && out.value[2] >= 0) {
        waits.push(out.value[2]);
      }
    }
    return {
      granted: false,
      fences: [],
      expiresAt: 0,
      redisNow: 0,
      sentAt,
      wait: waits.length > 0 ? Math.min(...waits) : 0,
      shortOf,
    };
  }

  /** Never called: quorum mode has no line (`lines` is false). */
  handoff(): Promise<LockHandoff> {
    return Promise.reject(new Error('quorum mode has no local handoff'));
  }

  /** Never called: quorum mode has no line (`lines` is false). */
  rejoin(): Promise<LockRejoin> {
    return Promise.reject(new Error('quorum mode has no line'));
  }

  /** Never called: quorum mode has no line (`lines` is false). */
  async renew(_entries: readonly LineEntry[]): Promise<LineStatus[]> {
    return [];
  }

  /** Never called: quorum mode has no line (`lines` is false). */
  async leaveLine(_key: LockRedisKeys, _token: string): Promise<LockAttempt> {
    return { granted: false, fences: [], expiresAt: 0, redisNow: 0, sentAt: Date.now(), wait: 0 };
  }

  async release(keys: readonly LockRedisKeys[], token: string): Promise<boolean> {
    this.validUntil.delete(token);
    const released = (n: unknown) => n === keys.length;
    const outcomes = await this.quorum.gather(
      (node) => releaseOn(node, keys, token),
      released,
      undefined,
      true,
    );
    return this.quorum.decide(keys, 'release', outcomes, released);
  }

  async extend(
    keys: readonly LockRedisKeys[],
    token: string,
    ttlMs: number,
  ): Promise<LockExtension> {
    const sentAt = Date.now();
    const start = performance.now();
    const drift = this.drift(ttlMs);
    const values = keys.map((k) => k.value);
    // A node that lost the lock is locked again only before its own clock reaches the end of the
    // lock's validity, which the node checks itself when the extension runs (however long it
    // waited on the way): then the lock still holds a majority and nobody else can, so a relock
    // never revives a lock that lapsed (and may have been taken and released since).
    const validUntil = this.validUntil.get(token);
    const relockBefore = (node: number) =>
      validUntil === undefined ? 0 : this.clocks.before(node, validUntil);
    const confirms = (reply: number[]) => reply[0] === 1 || reply[0] === 2;
    const outcomes = await this.quorum.gather(
      (node, i) =>
        this.clocked(
          i,
          node.run(LOCK_SCRIPTS.extendOrRelock, values, [token, ttlMs, relockBefore(i)]),
        ),
      confirms,
      Math.max(1, ttlMs - drift),
    );
    const validity = ttlMs - (performance.now() - start) - drift;
    const held = this.quorum.decide(keys, 'extend', outcomes, confirms) && validity > 0;
    if (held) this.remember(token, start + ttlMs - drift);
    else this.validUntil.delete(token);
    return { held, expiresAt: sentAt + ttlMs - drift };
  }

  async isHeld(keys: readonly LockRedisKeys[], token: string): Promise<boolean> {
    // A waiter's mark ('*', quorum-acquire.lua) does not change the holder.
    const marked = `${token}*`;
    const holds = (values: (string | null)[]) => values.every((v) => v === token || v === marked);
    const outcomes = await this.quorum.gather(
      (node) => node.call('lock MGET', (c) => c.mget(...keys.map((k) => k.value))),
      holds,
    );
    return this.quorum.decide(keys, 'isHeld', outcomes, holds);
  }

  async isLocked(key: LockRedisKeys): Promise<boolean> {
    const outcomes = await this.quorum.gather(
      (node) => node.call('lock EXISTS', (c) => c.exists(key.value)),
      (n) => n === 1,
    );
    return this.quorum.decide([key], 'isLocked', outcomes, (n) => n === 1);
  }

  /** Whether `channel` is subscribed on a majority of the nodes already. */
  isSubscribed(channel: string): boolean {
    return this.nodes.filter((n) => n.hub.isSubscribed(channel)).length >= this.quorum.needed;
  }

  /**
   * Subscribes on every node; resolves once a majority subscribed (or every node settled). A
   * release that counts ran on a majority, which shares a node with ours, so it is heard; a node
   * whose subscription is slow (cut off, until `commandTimeoutMs`) no longer delays the waiter.
   */
  listen(channel: string, onMessage: (message: string) => void): Promise<() => void> {
    const stops: Array<() => void> = [];
    let stopped = false;
    const stopAll = () => {
      stopped = true;
      stops.forEach((stop) => stop());
    };
    return new Promise((resolve, reject) => {
      let settled = 0;
      let firstError: unknown;
      const settle = () => {
        settled++;
        if (stops.length >= this.quorum.needed || settled === this.nodes.length) {
          if (stops.length > 0) resolve(stopAll);
          else reject(firstError);
        }
      };
      // Re-subscribed after a reconnect: messages may have been lost, check again.
      const recheck = () => onMessage(RECHECK_MESSAGE);
      for (const node of this.nodes) {
        node.hub.listen(channel, onMessage, recheck).then(
          (stop) => {
            if (stopped) stop();
            else stops.push(stop);
            settle();
          },
          (err: unknown) => {
            firstError ??= err;
            settle();
          },
        );
      }
    });
  }

  /**
   * The write-back of a granted attempt's fences: returns them once a majority accepted them
   * before `until` (`performance.now()` ms), or what fell short.
   *
   * Each granting node handed out its next fence (`nextFence`, floored by its Redis TIME in µs);
   * the grant's fence is one above the highest of them. A node accepts it only while its counter
   * is below it (`quorum-raise-fence.lua`), and the grant is reported only once a majority
   * accepted. Any two majorities share a node, and a grant reported later sends its write-back
   * after the earlier one's was accepted there (the later grant's keys were set after the earlier
   * holder's were gone, and the earlier holder reported only after its write-back), so that node
   * refuses the later grant any fence that is not above the earlier one: fences rise strictly,
   * also when the later grant's own increments ran first on that node (its message to another
   * node was slow). A node that refused reports its counters; the write-back is sent again above
   * them while the lock is valid. `+ 1` keeps a node's own increment below the fence it accepts.
   */
  private async raiseFences(
    keys: readonly LockRedisKeys[],
    outcomes: NodeOutcome<AcquireReply>[],
    until: number,
  ): Promise<number[] | { shortOf?: QuorumShortfall }> {
    const fences = keys.map(() => 0);
    for (const o of outcomes) {
      if (o.state !== 'answered' || o.value[0] !== 1) continue;
      keys.forEach((_, k) => (fences[k] = Math.max(fences[k], o.value[k + 2] + 1)));
    }
    const counters = keys.map((k) => k.fence);
    const accepted = (reply: number[]) => reply[0] === 1;
    for (;;) {
      const left = until - performance.now();
      if (left <= 0) return {};
      const args = [this.fenceTtlMs, ...fences];
      const replies = await this.quorum.gather(
        (node) => node.run(LOCK_SCRIPTS.quorumRaiseFence, counters, args) as Promise<number[]>,
        accepted,
        left,
      );
      const tally = this.quorum.tally(replies, accepted);
      if (tally.granted >= this.quorum.needed) return fences;
      if (tally.answered < this.quorum.needed) return { shortOf: tally };
      for (const r of replies) {
        if (r.state !== 'answered' || r.value[0] === 1) continue;
        keys.forEach((_, k) => (fences[k] = Math.max(fences[k], r.value[k + 1] + 1)));
      }
    }
  }

  /** `reply`, once it arrived, after recording the node clock it carries (`[state, nowMs, …]`). */
  private clocked(node: number, reply: Promise<unknown>): Promise<number[]> {
    return reply.then((value) => {
      const r = value as number[];
      this.clocks.observe(node, r[1], performance.now());
      return r;
    });
  }

  /** Records that the lock of `token` is surely valid until `until` (`performance.now()` ms). */
  private remember(token: string, until: number): void {
    if (this.validUntil.size >= this.sweepAt) {
      const now = performance.now();
      for (const [t, end] of this.validUntil) if (end <= now) this.validUntil.delete(t);
      this.sweepAt = Math.max(64, 2 * this.validUntil.size);
    }
    this.validUntil.set(token, until);
  }

  private drift(ttlMs: number): number {
    return clockDriftMs(ttlMs, this.clockDriftFactor);
  }

  /**
   * After a failed attempt: releases the lock where it was granted (awaited) and where the
   * attempt may still run (queued behind it on that node's connection, not awaited). A node the
   * attempt skipped as disconnected never received it.
   */
  private async undo(
    keys: readonly LockRedisKeys[],
    token: string,
    outcomes: NodeOutcome<AcquireReply>[],
  ): Promise<void> {
    const waits: Promise<unknown>[] = [];
    for (const o of outcomes) {
      const node = this.nodes[o.node];
      const granted = o.state === 'answered' && o.value[0] === 1;
      const unknown = o.state === 'pending' || (o.state === 'failed' && o.sent);
      if (!granted && !unknown) continue;
      const release = releaseOn(node, keys, token).catch(() => undefined);
      if (granted) waits.push(release);
    }
    await Promise.all(waits);
  }
}

/** Runs the release script for `token` on one node. */
function releaseOn(
  node: RedisLockConnection,
  keys: readonly LockRedisKeys[],
  token: string,
): Promise<unknown> {
  return node.run(LOCK_SCRIPTS.release, lockScriptKeys(keys), [token, node.isCluster ? 1 : 0]);
}

/**
 * Boot check of quorum mode: rejects with `RedisLockOptionsError` (option `nodes`) when two nodes
 * are one Redis server (one `run_id` in `INFO server`: `localhost` and `127.0.0.1`, a DNS alias,
 * a proxy), which the options alone do not show (`checkDistinctNodes` in resolve-options.ts). One
 * server takes several votes with it when it fails, and with one database its nodes share each
 * lock's fence counter: every fence write-back after the first is refused, and each acquisition
 * would retry until its TTL ran out. A node that does not answer within `ms`, or refuses `INFO`
 * (an ACL user without it), is not compared.
 * @param ms bound of each `INFO` call
 */
export async function checkDistinctServers(
  nodes: readonly RedisLockConnection[],
  ms: number,
): Promise<void> {
  const runIds = await Promise.all(
    nodes.map(async (node) => {
      // A Cluster's INFO answers for whichever node ioredis picks.
      if (node.isCluster || !(await node.reached(ms))) return undefined;
      return node
        .call('INFO server (boot check)', (c) => (c as Redis).info('server'), ms)
        .then(
          (info) => /^run_id:(\w+)/m.exec(info)?.[1],
          () => undefined,
        );
    }),
  );
  runIds.forEach((id, i) => {
    if (id === undefined) return;
    const first = runIds.indexOf(id);
    if (first === i) return;
    throw new RedisLockOptionsError(
      'nodes',
      `nodes[${first}] and nodes[${i}], one server (run_id ${id.slice(0, 12)}…)`,
      'independent Redis masters (quorum mode), each a server of its own',
    );
  });
}
