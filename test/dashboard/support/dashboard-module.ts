import { Test, type TestingModule } from '@nestjs/testing';
import {
  RedisLockDashboardModule,
  RedisLockModule,
  type RedisLockDashboardOptions,
  type RedisLockModuleOptions,
} from '../../../lib';
import { testRedisUrl } from '../../support/helpers';

/**
 * A compiled testing module with the lock module (global, keys under `prefix`, named
 * `instanceId`) on the test server (or on `redis`), with `queue` options, and the dashboard
 * with `options`.
 */
export function compileDashboardModule(
  prefix: string,
  instanceId: string,
  options: RedisLockDashboardOptions = {},
  redis = testRedisUrl(),
  queue: RedisLockModuleOptions['queue'] = {},
): Promise<TestingModule> {
  return Test.createTestingModule({
    imports: [
      RedisLockModule.forRoot({
        redis,
        keyPrefix: prefix,
        instanceId,
        isGlobal: true,
        queue,
      }),
      RedisLockDashboardModule.forRoot(options),
    ],
  }).compile();
}
