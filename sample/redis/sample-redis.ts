import { Global, Injectable, Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { type ChainableCommander, Cluster, Redis } from 'ioredis';
import { redactRedisUrl, SampleConfig } from '../config/sample-config';

/** Bound of every command of the sample's own client, in ms. */
const COMMAND_TIMEOUT_MS = 2_000;

/**
 * The sample's own Redis client, for its data (sales, buyers, orders, desk holders): a `Redis`
 * on `redisUrl` or through `redisSentinels`, or a `Cluster` on `redisClusterNodes` (each sale's keys share the hash tag
 * `{sku}`, the desk's `{desk}`, so every MULTI stays in one slot). The library keeps its own
 * connection for locks and queues; both use the same Redis and key prefix. Every command is
 * bounded (`commandTimeout`); the client is closed on application shutdown, after the queue
 * workers that use it have drained.
 */
@Injectable()
export class SampleRedis implements OnApplicationShutdown {
  readonly client: Redis | Cluster;
  /**
   * Whether a failover can promote a replica (a Cluster or Sentinel client): a sale then waits
   * for a replica to have its writes before its buyers get 202.
   */
  readonly replicated: boolean;
  /** The configured `keyPrefix`, put before every key of the sample. */
  readonly prefix: string;
  private readonly logger = new Logger('SampleRedis');
  private lastErrorLog = 0;

  constructor(config: SampleConfig) {
    this.prefix = config.keyPrefix;
    const bounded = { commandTimeout: COMMAND_TIMEOUT_MS, maxRetriesPerRequest: 1 };
    const nodes = config.redisClusterNodes;
    const sentinels = config.redisSentinels;
    this.replicated = nodes !== undefined || sentinels !== undefined;
    const list = (of: ReadonlyArray<{ host: string; port: number }>) =>
      of.map((n) => `${n.host}:${n.port}`).join(',');
    if (nodes) {
      this.client = new Cluster(
        nodes.map((n) => ({ ...n })),
        { redisOptions: bounded },
      );
    } else if (sentinels) {
      const name = config.redisSentinelName;
      this.client = new Redis({ sentinels: sentinels.map((n) => ({ ...n })), name, ...bounded });
    } else {
      this.client = new Redis(config.redisUrl, bounded);
    }
    const where = nodes
      ? `Cluster ${list(nodes)}`
      : sentinels
        ? `Sentinel ${config.redisSentinelName} at ${list(sentinels)}`
        : redactRedisUrl(config.redisUrl);
    this.client.on('error', (err: Error) => {
      // One line per 5 s at most: a Redis that is down makes ioredis report every retry.
      if (Date.now() - this.lastErrorLog < 5_000) return;
      this.lastErrorLog = Date.now();
      this.logger.warn(`Redis ${where}: ${err.message}`);
    });
  }

  /** `keyPrefix` + the given name. */
  key(name: string): string {
    return this.prefix + name;
  }

  /**
   * Sends a `multi()` or `pipeline()` and resolves with the replies in order; rejects with the
   * first command error (or when the transaction was aborted).
   * @example
   * const [stock, sold] = await redis.exec(redis.client.multi().hget(k, 'stock').hget(k, 'sold'));
   */
  async exec(chain: ChainableCommander): Promise<unknown[]> {
    const replies = await chain.exec();
    if (!replies) throw new Error('Redis transaction aborted');
    return replies.map(([err, reply]) => {
      if (err) throw err;
      return reply;
    });
  }

  /** The Redis clock, in epoch ms (the clock the queue's leases are measured with). */
  async now(): Promise<number> {
    const [seconds, micros] = await this.client.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  async onApplicationShutdown(): Promise<void> {
    const quit = this.client.quit().catch(() => undefined);
    const timeout = new Promise((resolve) => setTimeout(resolve, COMMAND_TIMEOUT_MS).unref());
    await Promise.race([quit, timeout]);
    this.client.disconnect();
  }
}

/** Provides `SampleRedis` to every module of the sample. */
@Global()
@Module({ providers: [SampleRedis], exports: [SampleRedis] })
export class SampleRedisModule {}
