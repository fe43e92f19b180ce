import 'reflect-metadata';
import {
  applyDecorators,
  CanActivate,
  Controller,
  ExecutionContext,
  Header,
  HttpCode,
  Inject,
  Injectable,
  type INestApplication,
  NestInterceptor,
  Param,
  PipeTransform,
  Post,
  SetMetadata,
  UseGuards,
  UseInterceptors,
  UsePipes,
  type CallHandler,
} from '@nestjs/common';
import { APP_GUARD, Reflector } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { map } from 'rxjs';
import request, { type Response } from 'supertest';
import { LockService, RedisLockModule, WithLock } from '../../lib';
import { testRedisUrl, uniquePrefix } from '../support/helpers';

@Injectable()
class DenyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return !context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers[
      'x-deny'
    ];
  }
}

/** Global guard: copies the handler's 'tag' metadata (if any) into a response header. */
@Injectable()
class TagGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}
  canActivate(context: ExecutionContext): boolean {
    const tag = this.reflector.get<string | undefined>('tag', context.getHandler());
    if (tag)
      context
        .switchToHttp()
        .getResponse<{ setHeader: (name: string, value: string) => void }>()
        .setHeader('x-tag', tag);
    return true;
  }
}

@Injectable()
class WrapInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(map((body: unknown) => ({ wrapped: body })));
  }
}

@Injectable()
class UpperCasePipe implements PipeTransform {
  transform(value: unknown): unknown {
    return typeof value === 'string' ? value.toUpperCase() : value;
  }
}

/** One common Nest decorator, and what a response shows when it took effect. */
interface DecoratorCase {
  name: string;
  decorator: MethodDecorator;
  send?: (req: request.Test) => request.Test;
  check: (res: Response) => void;
}

/** The handler ran under the lock named from its (piped) argument. */
const lockedAs = (key: string) => (res: Response) => {
  expect(res.status).toBe(201);
  expect(res.body).toEqual({ lockedKey: key });
};

const cases: DecoratorCase[] = [
  { name: '@Post (route)', decorator: () => undefined, check: lockedAs('item:abc') },
  {
    name: '@HttpCode',
    decorator: HttpCode(202),
    check: (res) => {
      expect(res.status).toBe(202);
      expect(res.body).toEqual({ lockedKey: 'item:abc' });
    },
  },
  {
    name: '@Header',
    decorator: Header('x-custom', 'yes'),
    check: (res) => {
      lockedAs('item:abc')(res);
      expect(res.headers['x-custom']).toBe('yes');
    },
  },
  {
    name: '@UseGuards',
    decorator: UseGuards(DenyGuard),
    send: (req) => req.set('x-deny', '1'),
    check: (res) => expect(res.status).toBe(403),
  },
  {
    name: '@UseInterceptors',
    decorator: UseInterceptors(WrapInterceptor),
    check: (res) => {
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ wrapped: { lockedKey: 'item:abc' } });
    },
  },
  {
    name: '@SetMetadata',
    decorator: SetMetadata('tag', 'blue'),
    check: (res) => {
      lockedAs('item:abc')(res);
      expect(res.headers['x-tag']).toBe('blue');
    },
  },
  { name: '@UsePipes', decorator: UsePipes(UpperCasePipe), check: lockedAs('item:ABC') },
];

type Position =
  | 'written above @WithLock'
  | 'written below @WithLock'
  | 'composed with @WithLock by applyDecorators';

/**
 * A controller whose handler has `@Post(':id')` and `decorator` above or below `@WithLock`, or
 * all three composed into one decorator.
 */
function controllerFor(path: string, decorator: MethodDecorator, position: Position) {
  class TableController {
    constructor(@Inject(LockService) private readonly locks: LockService) {}

    async handle(@Param('id') id: string): Promise<{ lockedKey: string | null }> {
      void id;
      return { lockedKey: this.locks.currentLock()?.keys[0] ?? null };
    }
  }
  const lock = WithLock('item:<0>') as MethodDecorator;
  // Reflect.decorate applies the list bottom-up, exactly like decorators written in that order.
  const decorators = {
    'written above @WithLock': [Post(':id'), decorator, lock],
    'written below @WithLock': [lock, Post(':id'), decorator],
    'composed with @WithLock by applyDecorators': [applyDecorators(Post(':id'), decorator, lock)],
  }[position];
  const proto = TableController.prototype;
  const descriptor = Object.getOwnPropertyDescriptor(proto, 'handle')!;
  Object.defineProperty(
    proto,
    'handle',
    Reflect.decorate(decorators, proto, 'handle', descriptor) as PropertyDescriptor,
  );
  Controller(path)(TableController);
  return TableController;
}

describe('@WithLock with other decorators', () => {
  const positions: Position[] = [
    'written above @WithLock',
    'written below @WithLock',
    'composed with @WithLock by applyDecorators',
  ];
  const table = cases.flatMap((c, i) =>
    positions.map((position, j) => ({
      ...c,
      position,
      path: `case-${i}-${j}`,
      controller: controllerFor(`case-${i}-${j}`, c.decorator, position),
    })),
  );
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        RedisLockModule.forRoot({ redis: testRedisUrl(), keyPrefix: uniquePrefix('metadata') }),
      ],
      controllers: table.map((row) => row.controller),
      providers: [{ provide: APP_GUARD, useClass: TagGuard }, DenyGuard, WrapInterceptor],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
  });
  afterAll(() => app.close());

  it.each(table)('$name works $position', async (row) => {
    const req = request(app.getHttpServer()).post(`/${row.path}/abc`);
    row.check(await (row.send ? row.send(req) : req));
  });

  it.each(table)('$name $position: the handler keeps its name and length', (row) => {
    expect(row.controller.prototype.handle.name).toBe('handle');
    expect(row.controller.prototype.handle.length).toBe(1);
  });
});
