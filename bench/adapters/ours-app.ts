import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { RedisLockModule, type RedisLockModuleOptions } from '../../lib';

/**
 * A Nest application context with `RedisLockModule.forRoot(options)` and nothing else, logger
 * off: how every adapter of ours reaches the library (its public API only). Closing the context
 * closes the connections the module opened.
 * @example
 * const app = await oursApp({ redis: url }); const locks = app.get(LockService);
 */
export function oursApp(options: RedisLockModuleOptions): Promise<INestApplicationContext> {
  return NestFactory.createApplicationContext(RedisLockModule.forRoot(options), { logger: false });
}
