// What the ```ts snippets of the README and docs/*.md use of the user's own application, declared
// once for all of them (test/types/types.spec.ts): the library's services under the names the
// docs give them, an `Order`, DTOs, guards and helpers. A snippet that declares a name itself
// uses its own. Types from the library are imported as a user's code imports them.

type RunningTask<P = unknown> = import('nestjs-redis-lock').RunningTask<P>;

declare const queues: import('nestjs-redis-lock').QueueService;
declare const locks: import('nestjs-redis-lock').LockService;
declare const semaphores: import('nestjs-redis-lock').SemaphoreService;
declare const fenced: import('nestjs-redis-lock').FencedStore;
declare const waitingRoom: import('nestjs-redis-lock').WaitingRoomService;
declare const events: import('nestjs-redis-lock').RedisLockEvents;
declare const logger: import('@nestjs/common').Logger;
/** docs/bull-board.md: the Basic-auth middleware its first snippet writes. */
declare function opsBasicAuth(
  req: import('node:http').IncomingMessage,
  res: import('node:http').ServerResponse,
  next: () => void,
): void;
/** The Redis the module connects to (`RedisLockModule.forRoot({ redis })`). */
declare const redis: string;

interface Order {
  id: string;
  sku: string;
  userId: string;
  total: number;
  email: string;
}
declare const order: Order;
declare const payload: Order;
declare const ORDERS: import('nestjs-redis-lock').TypedQueue<Order>;
declare const id: string;
declare const orderId: string;
declare const importId: string;
declare const docId: string;
declare const sku: string;
declare const userId: string;
declare const to: string;
declare const rows: number;
declare const chunks: string[];

declare class BuyDto {
  userId: string;
}
declare class BuyRequest {
  userId: string;
}
declare class PaymentDto {
  orderId: string;
  amount: number;
}
declare class TransferCommand {
  from: string;
  to: string;
  amount: number;
}
declare class AdminGuard {
  canActivate(context: import('@nestjs/common').ExecutionContext): boolean;
}
declare class SoldOutGuard {
  canActivate(context: import('@nestjs/common').ExecutionContext): boolean;
}
declare class IdPipe {
  constructor(name: string);
  transform(value: unknown): string;
}
declare class ParsePipe<T> {
  constructor(parse: (body: unknown) => T);
  transform(value: unknown): T;
}
declare function parseBuy(body: unknown): BuyRequest;
/** @nestjs/config's module and service (not a dependency of this repository). */
declare class ConfigModule {}
declare class ConfigService {
  getOrThrow<T = string>(key: string): T;
}
declare class SampleConfig {
  redisUrl: string;
  keyPrefix: string;
}
declare const configModule: import('@nestjs/common').DynamicModule;
declare class CursorStore {
  get(stream: string): Promise<string | undefined>;
  set(stream: string, eventId: string): Promise<void>;
}
declare class HealthController {}
declare class OrdersService {
  create(order: { sku: string; userId: string }, options?: { signal?: AbortSignal }): Promise<void>;
}
declare const nodes: import('ioredis').ClusterNode[];
declare const clusterOptions: import('ioredis').ClusterOptions;
declare const eventEmitter: { emit(name: string, payload: unknown): boolean };
declare const mailer: {
  send(to: unknown, template?: string): Promise<void>;
  sendDigest(digest: { id: string }): Promise<void>;
};

declare function charge(order: Order, options?: { signal?: AbortSignal }): Promise<void>;
declare function write(chunk: string, options: { fence: number }): Promise<void>;
declare function handle(task: unknown): Promise<void>;
declare function handler(task: RunningTask): Promise<void>;
declare function render(task: RunningTask<{ image: string }>): Promise<void>;
declare function isRateLimit(error: unknown): boolean;
declare function pay(lock: import('nestjs-redis-lock').Lock): Promise<void>;
declare function putBackInStock(sku: string): Promise<void>;
declare function readPrices(): Promise<number[]>;
declare function rebuildPrices(): Promise<void>;
declare function sync(): Promise<void>;
declare function valid(order: Order): boolean;
