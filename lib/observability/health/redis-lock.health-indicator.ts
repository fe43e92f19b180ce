import { Injectable } from '@nestjs/common';
import { QueueService } from '../../queue/queue.service';
import { RedisLockConnection } from '../../redis/redis-connection';
import { queueBacklog } from '../queue-backlog';
import { bounded } from '../../redis/bounded';
import { RedisLockOptionsError } from '../../errors/redis-lock-options.error';
import { checkKnownKeys, checkMs, checkInt } from '../../options/validate';
import { checkQueueName } from '../../options/queue-limits';

/** What `RedisLockHealthIndicator.isHealthy` checks besides the connections. */
export interface RedisLockHealthOptions {
  /**
   * Bound of each PING, and of the queue checks together, in ms.
   * @default 1000
   */
  timeoutMs?: number;
  /** Queues whose workers, dead letters and oldest ready task are checked. */
  queues?: readonly string[];
  /**
   * Each queue of `queues` needs at least this many workers running in this instance.
   * @default 0 (not checked)
   */
  minWorkers?: number;
  /** Down when a queue of `queues` holds more dead tasks than this. Unset: not checked. */
  maxDead?: number;
  /**
   * Down when the oldest ready task of a queue of `queues` has been due for longer than this, in
   * ms (the queue is falling behind). Unset: not checked.
   */
  maxOldestReadyMs?: number;
}

/** The result shape of a `@nestjs/terminus` health indicator: `{ [key]: { status, ...data } }`. */
export type RedisLockHealthResult<Key extends string = string> = Record<
  Key,
  { status: 'up' | 'down'; [detail: string]: unknown }
>;

const OPTION_KEYS = ['timeoutMs', 'queues', 'minWorkers', 'maxDead', 'maxOldestReadyMs'] as const;

/**
 * A health indicator for `@nestjs/terminus` that checks the module's own connections (PING on the
 * command connection and, once it exists, the subscriber; in quorum mode each of the `nodes`,
 * down when fewer than a majority answer; no new client) and, optionally, queue
 * workers, dead letters and backlog age. It returns terminus's result shape without importing
 * terminus, so it is exported from the package root and costs nothing to apps without it.
 * @example
 * @Get('health') @HealthCheck()
 * check() {
 *   return this.health.check([() => this.redisLock.isHealthy('redis', { queues: ['orders'], maxDead: 100 })]);
 * }
 */
@Injectable()
export class RedisLockHealthIndicator {
  constructor(
    private readonly connection: RedisLockConnection,
    private readonly queues: QueueService,
  ) {}

  /**
   * Resolves `{ [key]: { status: 'up' | 'down', ... } }`; never rejects for an unhealthy Redis
   * (the reason is in `message`), so terminus answers 503 within `timeoutMs` per PING (and once
   * more for the queue checks).
   * @param key the name of the check in terminus's report
   * @default key 'redis-lock'
   */
  async isHealthy<const Key extends string = 'redis-lock'>(
    key: Key = 'redis-lock' as Key,
    options?: RedisLockHealthOptions,
  ): Promise<RedisLockHealthResult<Key>> {
    const o = checkKnownKeys('', options, OPTION_KEYS) as RedisLockHealthOptions;
    const ms = o.timeoutMs === undefined ? 1_000 : checkMs('timeoutMs', o.timeoutMs, 1);
    const minWorkers =
      o.minWorkers === undefined ? 0 : checkInt('minWorkers', o.minWorkers, 0, 1e6);
    if (o.maxDead !== undefined) checkInt('maxDead', o.maxDead, 0, Number.MAX_SAFE_INTEGER);
    if (o.maxOldestReadyMs !== undefined) checkMs('maxOldestReadyMs', o.maxOldestReadyMs, 0);
    if (o.queues !== undefined && !Array.isArray(o.queues)) {
      throw new RedisLockOptionsError('queues', o.queues, 'an array of queue names');
    }
    const names: readonly string[] = (o.queues ?? []).map((queue) => checkQueueName(queue));
    const result = (status: 'up' | 'down', data: Record<string, unknown>) =>
      ({ [key]: { status, ...data } }) as RedisLockHealthResult<Key>;
    try {
      await this.connection.call('PING (health)', (c) => c.ping(), ms);
      const subscriber = (await this.connection.hub.ping(ms)) ? 'up' : 'idle';
      const problems: string[] = [];
      const quorum = await this.quorumNodesUp(ms);
      if (quorum && quorum.up < quorum.needed) {
        problems.push(
          `quorum: ${quorum.up} of ${quorum.nodes} nodes answer, locks need ${quorum.needed}`,
        );
      }
      const queues: Record<string, unknown> = {};
      // Within `timeoutMs` too (each call alone is bounded by the longer commandTimeoutMs): a
      // Redis that answers PING but is slow to read queues must not keep the probe waiting.
      const backlogs = await bounded(
        'queue checks (health)',
        Promise.all(names.map((queue) => queueBacklog(this.queues, queue))),
        ms,
      );
      for (const [i, queue] of names.entries()) {
        const workers = this.queues.workerCount(queue);
        const { stats, oldestReadyMs } = backlogs[i];
        queues[queue] = { workers, ready: stats.ready, dead: stats.dead, oldestReadyMs };
        if (workers < minWorkers) problems.push(`${queue}: ${workers} workers < ${minWorkers}`);
        if (o.maxDead !== undefined && stats.dead > o.maxDead) {
          problems.push(`${queue}: ${stats.dead} dead > ${o.maxDead}`);
        }
        if (o.maxOldestReadyMs !== undefined && oldestReadyMs > o.maxOldestReadyMs) {
          problems.push(`${queue}: oldest ready ${oldestReadyMs} ms > ${o.maxOldestReadyMs} ms`);
        }
      }
      const data = {
        redis: 'up',
        subscriber,
        ...(quorum && { nodes: `${quorum.up}/${quorum.nodes}` }),
        ...(o.queues && { queues }),
      };
      return problems.length === 0
        ? result('up', data)
        : result('down', { ...data, message: problems.join('; ') });
    } catch (err) {
      return result('down', {
        message: `Redis unavailable: ${err instanceof Error ? err.message : String(err)}`,
      });
    }
  }

  /**
   * Quorum mode (`nodes`): how many nodes answer a PING within `ms`, and how many locks need (a
   * majority); `undefined` without quorum nodes.
   */
  private async quorumNodesUp(
    ms: number,
  ): Promise<{ up: number; nodes: number; needed: number } | undefined> {
    const nodes = this.connection.nodes;
    if (nodes.length === 0) return undefined;
    const answers = await Promise.allSettled(
      nodes.map((node) => node.call('PING (health)', (c) => c.ping(), ms)),
    );
    const up = answers.filter((a) => a.status === 'fulfilled').length;
    return { up, nodes: nodes.length, needed: Math.floor(nodes.length / 2) + 1 };
  }
}
