// Type tests of @WithLock's key functions (run by test/types/types.spec.ts): every
// `@ts-expect-error` line must be an error, so a key function that is not checked against the
// decorated method's parameters fails. Nothing here runs.
import { applyDecorators, Body, Controller, Param, Post } from '@nestjs/common';
import { Observable } from 'rxjs';
import { WithLock, type LockKeyFunction } from 'nestjs-redis-lock';

interface PaymentDto {
  orderId: string;
  amount: number;
}

const byOrder: LockKeyFunction<[orderId: string]> = (orderId) => `order:${orderId}`;

@Controller('payments')
export class TypedKeys {
  @Post(':orderId')
  @WithLock((orderId: string, body: PaymentDto) => `payment:${orderId}:${body.amount}`)
  async pay(@Param('orderId') orderId: string, @Body() body: PaymentDto): Promise<string> {
    return `${orderId}:${body.amount}`;
  }

  // @ts-expect-error the first parameter is a string, not a number
  @WithLock((orderId: number) => `payment:${orderId}`)
  async wrongFirst(orderId: string): Promise<string> {
    return orderId;
  }

  // @ts-expect-error the body's orderId is a string, the key function reads a number
  @WithLock((_id: string, body: { orderId: number }) => `payment:${body.orderId}`)
  async wrongField(id: string, body: PaymentDto): Promise<string> {
    return id + body.orderId;
  }

  // @ts-expect-error a key function returns a string or strings
  @WithLock((orderId: string) => orderId.length)
  async wrongReturn(orderId: string): Promise<string> {
    return orderId;
  }

  // Fewer parameters than the method: the key depends on the leading arguments only.
  @WithLock((order: PaymentDto) => [`order:${order.orderId}`, `amount:${order.amount}`])
  async settle(_order: PaymentDto, _note: string): Promise<void> {}

  // Parameters inferred from nothing (`any`), as before typed keys: still accepted.
  @WithLock((...args: any[]) => `any:${args[0]}`)
  async untyped(id: number): Promise<number> {
    return id;
  }

  // A named key function type, and a method returning an Observable.
  @WithLock(byOrder)
  stream(orderId: string): Observable<string> {
    return new Observable((s) => s.next(orderId));
  }

  // Templates are not typed against the parameters (they are checked when decorated).
  @WithLock('stock:<0>')
  async template(sku: number): Promise<number> {
    return sku;
  }

  // Composed with other decorators.
  @applyDecorators(WithLock(['a:<0>', 'b:<0>']), Post('composed'))
  async composed(id: string): Promise<string> {
    return id;
  }

  @applyDecorators(WithLock((id: string) => `c:${id}`), Post('composed-fn'))
  async composedFn(id: string): Promise<string> {
    return id;
  }
}
