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
    redis: config.redisUrl,
    keyPrefix: config.keyPrefix,
    // A purchase holds the stock lock for a few round trips: default TTL short, no default wait.
    ttlMs: 5_000,
  };
}
