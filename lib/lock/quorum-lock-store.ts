import { performance } from 'node:perf_hooks';
import { LockQuorumError } from '../errors/lock-quorum.error';
import { RedisLockOptionsError } from '../errors/redis-lock-options.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { ResolvedLockOptions } from '../options/resolve-options';
import type { RedisLockConnection } from '../redis/redis-connection';
import { checkOneSlot, type LockRedisKeys } from './lock-keys';
import { LOCK_SCRIPTS } from './lock-scripts';
import {
  acquireKeys,
  releaseKeys,
  type LockAttempt,
  type LockExtension,
  type LockStore,
  type QuorumShortfall,
  acquireFlags,
  type WaitMode,
  type LineEntry,
  type LineStatus,
  type LockHandoff,
  type LockRejoin,
} from './lock-store';

/** What one node did with a request sent to all of them. */
type NodeOutcome<T> =
  | { node: number; state: 'answered'; value: T }
  | { node: number; state: 'failed'; sent: boolean }
  | { node: number; state: 'pending' };

/**
 * Redlock: every lock lives on N independent masters and is held when a majority
 * (`floor(N / 2) + 1`) granted it within its validity time.
 *
 * - An attempt runs `acquire.lua` on every node in parallel (not fair, no line, no fence) and
 *   counts the grants. It is decided as soon as a quorum granted or can no longer grant; a node
 *   that is known to be disconnected counts as failed at once instead of queueing the request.
 * - Validity = `ttl - elapsed - drift`, with `elapsed` from the start of the attempt
 *   (monotonic clock) and `drift = clockDriftFactor * ttl + 2 ms`; the lock is granted only when
 *   it is positive, and `expiresAt` is the attempt's start plus `ttl - drift`.
 * - A failed attempt releases the lock on every node that granted it (awaited) or may still
 *   grant it (queued behind the attempt on the same connection) before the caller retries with
 *   a fresh token.
 * - Release, extend, isHeld and isLocked go to every node and count a majority; when fewer nodes
 *   than a quorum answer, they throw `LockQuorumError`.
 * - Extending also locks again, with the same token, a node that lost the lock (restarted
 *   empty), while the lock is surely valid; such a node confirms the extension.
 */
export class QuorumLockStore implements LockStore {
  readonly lines = false;
  private readonly needed: number;
  /**
   * Per token of a lock granted here: until when (`performance.now()` ms) it is surely valid.
   * Dropped on release and on a lost extension; lapsed ones are swept as grants add entries.
   */
  private readonly validUntil = new Map<string, number>();
  /** The size at which `remember` next sweeps lapsed entries (amortised: doubles). */
  private sweepAt = 64;

  constructor(
    private readonly nodes: readonly RedisLockConnection[],
    private readonly clockDriftFactor: number,
  ) {
    this.needed = Math.floor(nodes.length / 2) + 1;
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
    const redisKeys = acquireKeys(keys);
    // Not fair (lines of independent masters do not compose), no line, no fence; a waiter marks
    // the holders so that their release announces itself.
    const args = [token, o.ttlMs, acquireFlags(false, false, wait === 'none' ? 'none' : 'mark')];
    const outcomes = await this.gather(
      (node) => node.run(LOCK_SCRIPTS.acquire, redisKeys, args) as Promise<number[]>,
      (reply) => reply[0] === 1,
      Math.max(1, o.ttlMs - drift),
    );
    const validity = o.ttlMs - (performance.now() - start) - drift;
    const tally = this.tally(outcomes, (reply) => reply[0] === 1);
    if (tally.granted >= this.needed && validity > 0) {
      this.remember(token, start + o.ttlMs - drift);
      return {
        granted: true,
        fences: keys.map(() => 0),
        expiresAt: sentAt + o.ttlMs - drift,
        redisNow: 0,
        sentAt,
        wait: 0,
      };
    }
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
      shortOf: tally.answered < this.needed ? tally : undefined,
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
    const outcomes = await this.gather(
      (node) => releaseOn(node, keys, token),
      (released) => released === keys.length,
      undefined,
      true,
    );
    return this.decide(keys, 'release', outcomes, (released) => released === keys.length);
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
    // A node that lost the lock is locked again only while the lock is surely valid: then no one
    // else can hold a majority, so the relock cannot revive a lock that lapsed (and may have been
    // taken and released since). It confirms when its reply arrived within that time too.
    const validUntil = this.validUntil.get(token) ?? -Infinity;
    const relock = start < validUntil ? 1 : 0;
    const confirms = (r: { reply: unknown; at: number }) =>
      r.reply === 1 || (r.reply === 2 && r.at < validUntil);
    const outcomes = await this.gather(
      async (node) => ({
        reply: await node.run(LOCK_SCRIPTS.extendOrRelock, values, [token, ttlMs, relock]),
        at: performance.now(),
      }),
      confirms,
      Math.max(1, ttlMs - drift),
    );
    const validity = ttlMs - (performance.now() - start) - drift;
    const held = this.decide(keys, 'extend', outcomes, confirms) && validity > 0;
    if (held) this.remember(token, start + ttlMs - drift);
    else this.validUntil.delete(token);
    return { held, expiresAt: sentAt + ttlMs - drift };
  }

  async isHeld(keys: readonly LockRedisKeys[], token: string): Promise<boolean> {
    const holds = (values: (string | null)[]) => values.every((v) => v === token);
    const outcomes = await this.gather(
      (node) => node.call('lock MGET', (c) => c.mget(...keys.map((k) => k.value))),
      holds,
    );
    return this.decide(keys, 'isHeld', outcomes, holds);
  }

  async isLocked(key: LockRedisKeys): Promise<boolean> {
    const outcomes = await this.gather(
      (node) => node.call('lock EXISTS', (c) => c.exists(key.value)),
      (n) => n === 1,
    );
    return this.decide([key], 'isLocked', outcomes, (n) => n === 1);
  }

  async listen(channel: string, onMessage: (message: string) => void): Promise<() => void> {
    const results = await Promise.allSettled(
      this.nodes.map((node) => node.hub.listen(channel, onMessage)),
    );
    const stops: Array<() => void> = [];
    for (const r of results) if (r.status === 'fulfilled') stops.push(r.value);
    if (stops.length === 0) throw (results[0] as PromiseRejectedResult).reason;
    return () => stops.forEach((stop) => stop());
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
    return this.clockDriftFactor * ttlMs + 2;
  }

  /**
   * Sends `call` to every node in parallel and resolves as soon as the outcome is decided — a
   * quorum said yes, or a quorum answered and yes can no longer win — when every node settled, or
   * when `withinMs` has passed; calls still running then are reported `pending`.
   *
   * A node known to be disconnected counts as failed at once; the call is then not sent, unless
   * `evenIfDisconnected`: a release must still be queued there, because a command that was in
   * flight when the connection broke (e.g. an acquisition) is sent again on reconnect, and the
   * release has to run after it.
   */
  private gather<T>(
    call: (node: RedisLockConnection) => Promise<T>,
    yes: (value: T) => boolean,
    withinMs?: number,
    evenIfDisconnected = false,
  ): Promise<NodeOutcome<T>[]> {
    const outcomes: NodeOutcome<T>[] = this.nodes.map((_, node) => ({ node, state: 'pending' }));
    return new Promise((resolve) => {
      let settled = 0;
      let answered = 0;
      let yeses = 0;
      let timer: NodeJS.Timeout | undefined;
      const finish = () => {
        clearTimeout(timer);
        resolve(outcomes.map((o) => ({ ...o })));
      };
      const record = (outcome: NodeOutcome<T>) => {
        outcomes[outcome.node] = outcome;
        settled++;
        if (outcome.state === 'answered') {
          answered++;
          if (yes(outcome.value)) yeses++;
        }
        const noes = settled - yeses;
        if (
          yeses >= this.needed ||
          (noes > this.nodes.length - this.needed && answered >= this.needed) ||
          settled === this.nodes.length
        ) {
          finish();
        }
      };
      if (withinMs !== undefined) timer = setTimeout(finish, withinMs);
      this.nodes.forEach((node, i) => {
        if (node.disconnected) {
          if (evenIfDisconnected) call(node).catch(() => undefined);
          record({ node: i, state: 'failed', sent: evenIfDisconnected });
          return;
        }
        call(node).then(
          (value) => record({ node: i, state: 'answered', value }),
          (err: unknown) =>
            // A timeout leaves the request on its way; a refusal means it never ran.
            record({ node: i, state: 'failed', sent: err instanceof RedisUnavailableError }),
        );
      });
    });
  }

  private tally<T>(outcomes: NodeOutcome<T>[], yes: (value: T) => boolean): QuorumShortfall {
    let answered = 0;
    let granted = 0;
    for (const o of outcomes) {
      if (o.state !== 'answered') continue;
      answered++;
      if (yes(o.value)) granted++;
    }
    return { nodes: this.nodes.length, answered, granted, needed: this.needed };
  }

  /** True when a quorum said yes, false when a quorum answered otherwise; else throws. */
  private decide<T>(
    keys: readonly LockRedisKeys[],
    operation: string,
    outcomes: NodeOutcome<T>[],
    yes: (value: T) => boolean,
  ): boolean {
    const t = this.tally(outcomes, yes);
    if (t.granted >= this.needed) return true;
    if (t.answered >= this.needed) return false;
    throw new LockQuorumError(
      keys.map((k) => k.name),
      operation,
      t.nodes,
      t.answered,
      t.granted,
      t.needed,
    );
  }

  /**
   * After a failed attempt: releases the lock where it was granted (awaited) and where the
   * attempt may still run (queued behind it on that node's connection, not awaited). A node the
   * attempt skipped as disconnected never received it.
   */
  private async undo(
    keys: readonly LockRedisKeys[],
    token: string,
    outcomes: NodeOutcome<number[]>[],
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
  return node.run(LOCK_SCRIPTS.release, releaseKeys(keys), [token, node.isCluster ? 1 : 0]);
}
