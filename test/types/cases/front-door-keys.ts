// Type tests of @RateLimit's and @RequiresPass's key functions (run by test/types/types.spec.ts):
// checked against the decorated method's parameters as @WithLock's are; every
// `@ts-expect-error` line must be an error. Nothing here runs.
import { Body, Controller, Param, Post } from '@nestjs/common';
import { RateLimit, RequiresPass, WithLock } from 'nestjs-redis-lock';

interface BuyDto {
  userId: string;
  quantity: number;
}

@Controller('sales')
export class FrontDoorKeys {
  @Post(':sku/buy')
  @RateLimit((_sku: string, body: BuyDto) => `buy:${body.userId}`, { limit: 5, windowMs: 10_000 })
  @RequiresPass('sale', (_sku: string, body: BuyDto) => body.userId)
  @WithLock((sku: string) => `stock:${sku}`)
  async buy(@Param('sku') sku: string, @Body() body: BuyDto): Promise<string> {
    return `${sku}:${body.quantity}`;
  }

  // Templates: checked when the class is defined, not by the type checker.
  @RateLimit('buy:<1.userId>', { limit: 5, windowMs: 10_000 })
  @RequiresPass('sale', '<1.userId>')
  async templated(sku: string, body: BuyDto): Promise<string> {
    return sku + body.userId;
  }

  // @ts-expect-error the body's userId is a string, the key function reads a number
  @RateLimit((_sku: string, body: { userId: number }) => `buy:${body.userId}`, {
    limit: 5,
    windowMs: 10_000,
  })
  async wrongLimitKey(sku: string, body: BuyDto): Promise<string> {
    return sku + body.userId;
  }

  // @ts-expect-error the first parameter is a string, not a number
  @RequiresPass('sale', (visitor: number) => String(visitor))
  async wrongVisitor(visitor: string): Promise<string> {
    return visitor;
  }

  // @ts-expect-error a rate limit has one key: a function returning an array does not compile
  @RateLimit((sku: string) => [sku], { limit: 1, windowMs: 1_000 })
  async twoKeys(sku: string): Promise<string> {
    return sku;
  }

  // @ts-expect-error a pass is for one visitor: an array of templates does not compile
  @RequiresPass('sale', ['<0>', '<1>'])
  async twoVisitors(a: string, b: string): Promise<string> {
    return a + b;
  }
}
