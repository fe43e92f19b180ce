// The three ways docs/decorator.md ("LockInterceptor") shows to apply the interceptor.
import { Controller, Module, Post, UseInterceptors, type INestApplication } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { LockInterceptor, WithLock } from 'nestjs-redis-lock';

@Module({ providers: [{ provide: APP_INTERCEPTOR, useClass: LockInterceptor }] })
export class EveryRoute {}

export function globally(app: INestApplication): void {
  app.useGlobalInterceptors(app.get(LockInterceptor));
}

@Controller('stock')
@UseInterceptors(LockInterceptor)
export class PerController {
  @Post(':sku/buy')
  @UseInterceptors(LockInterceptor)
  @WithLock('stock:<0>')
  async buy(sku: string): Promise<string> {
    return sku;
  }
}
