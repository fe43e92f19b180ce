import type { RedisLockModuleOptions } from '../../lib';
import type { SampleConfig } from './sample-config';

/**
 * The config factory of `RedisLockModule.forRootAsync`: the library uses the sample's Redis and
 * key prefix, so that its locks and queues sit next to the sample's data.
 * @example
 * RedisLockModule.forRootAsync({ inject: [SampleConfig], useFactory: redisLockOptionsFactory })
 */
export function redisLockOptionsFactory(config: SampleConfig): RedisLockModuleOptions {
  return {
    // A Cluster: the library's own Cluster client on those nodes (every lock's and queue's keys
    // share a hash tag).
    redis: config.redisClusterNodes
      ? { cluster: config.redisClusterNodes.map((n) => ({ ...n })) }
      : config.redisSentinels
        ? // Sentinel: the library follows the master's failovers itself.
          {
            sentinels: config.redisSentinels.map((n) => ({ ...n })),
            name: config.redisSentinelName,
          }
        : config.redisUrl,
    keyPrefix: config.keyPrefix,
    // The TTL of every lock of the sample (stock, editor): each is held for a few round trips
    // and auto-extended while its handler runs, so a short one; no default wait.
    ttlMs: 5_000,
  };
}
