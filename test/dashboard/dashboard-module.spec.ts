import 'reflect-metadata';
import { ConsoleLogger, type INestApplication, Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  LockService,
  RedisLockDashboardModule,
  RedisLockModule,
  RedisLockOptionsError,
  type DashboardOverview,
} from '../../lib';
import { testRedisUrl, uniquePrefix } from '../support/helpers';

describe('RedisLockDashboardModule wiring', () => {
  let app: INestApplication | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  /** Starts `root` as an HTTP app on a free port. */
  async function start(root: Type<unknown>): Promise<INestApplication> {
    app = await NestFactory.create(root, { logger: false, abortOnError: false });
    await app.listen(0, '127.0.0.1');
    return app;
  }

  /** The dashboard's overview, as its JSON endpoint serves it. */
  async function overview(): Promise<DashboardOverview> {
    const base = (await app!.getUrl()).replace('[::1]', '127.0.0.1');
    const res = await fetch(`${base}/redis-lock/api/overview`);
    expect(res.status).toBe(200);
    return (await res.json()) as DashboardOverview;
  }

  it('finds RedisLockModule imported beside it without isGlobal', async () => {
    const prefix = uniquePrefix('dash-wiring-root');
    @Module({
      imports: [
        RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: prefix, instanceId: 'root' }),
        RedisLockDashboardModule.forRoot(),
      ],
    })
    class AppModule {}
    const lock = await (await start(AppModule)).get(LockService).acquire('order:1');
    const held = await overview();
    expect(held.instanceId).toBe('root');
    expect(held.locks.items.map((l) => [l.key, l.owner])).toEqual([['order:1', 'root']]);
    await lock.release();
  });

  it('finds RedisLockModule imported by a feature module that does not export it', async () => {
    const prefix = uniquePrefix('dash-wiring-feature');
    @Module({
      imports: [
        RedisLockModule.forRootAsync({
          useFactory: () => ({ redis: testRedisUrl(), keyPrefix: prefix, instanceId: 'feature' }),
        }),
      ],
    })
    class OrdersModule {}
    @Module({ imports: [OrdersModule, RedisLockDashboardModule.forRoot()] })
    class AppModule {}
    await start(AppModule);
    expect(await overview()).toMatchObject({ instanceId: 'feature', locks: { items: [] } });
  });

  it('with several RedisLockModule instances, shows one and warns which at start', async () => {
    const lockModule = (name: string) =>
      RedisLockModule.forRoot({
        redis: testRedisUrl(),
        keyPrefix: uniquePrefix(`dash-wiring-${name}`),
        instanceId: name,
      });
    @Module({ imports: [lockModule('orders')] })
    class OrdersModule {}
    @Module({ imports: [lockModule('billing')] })
    class BillingModule {}
    @Module({ imports: [OrdersModule, BillingModule, RedisLockDashboardModule.forRoot()] })
    class AppModule {}
    const warnings: string[] = [];
    const logger = new ConsoleLogger();
    logger.warn = (message: unknown) => void warnings.push(String(message));
    logger.log = () => undefined;
    app = await NestFactory.create(AppModule, { logger, abortOnError: false });
    await app.listen(0, '127.0.0.1');

    const { instanceId } = await overview();
    expect(['orders', 'billing']).toContain(instanceId);
    // The other warning is that of a dashboard without guards (dashboard-hardening.spec.ts).
    expect(warnings.filter((w) => !w.includes('has no guards'))).toEqual([
      `2 RedisLockModule instances in this application: the dashboard shows the one of instanceId '${instanceId}'`,
    ]);
  });

  it('fails the start with RedisLockOptionsError saying what to import when RedisLockModule is missing', async () => {
    @Module({ imports: [RedisLockDashboardModule.forRoot()] })
    class AppModule {}
    let error: unknown;
    try {
      app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
      await app.init();
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(RedisLockOptionsError);
    expect((error as RedisLockOptionsError).option).toBe('imports');
    expect((error as Error).message).toBe(
      "invalid option 'imports': expected RedisLockModule.forRoot({ redis }) or " +
        'RedisLockModule.forRootAsync(...) imported too, in any module of the application ' +
        "(isGlobal is not needed), got 'RedisLockDashboardModule without RedisLockModule (no " +
        "RedisLockConnection)'",
    );
  });
});
