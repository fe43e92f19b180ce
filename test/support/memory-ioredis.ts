// Stands in for the `ioredis` module in the contract suite on the in-memory backend
// (jest.config.js, project 'memory'): the library's own `new Redis(url)` and the tests' plain
// clients all reach one in-memory Redis per URL and test file, the one `RedisLockTestingModule`
// runs on. A Cluster cannot be made here (the suite's Cluster tests stay on redis-server).
import { MemoryRedis } from '../../lib/testing/memory/memory-redis';
import { MemoryRedisServer } from '../../lib/testing/memory/memory-redis-server';

const servers = new Map<string, MemoryRedisServer>();

function serverFor(target: unknown): MemoryRedisServer {
  const o = (typeof target === 'object' && target !== null ? target : {}) as {
    host?: string;
    port?: number;
  };
  const name = typeof target === 'string' ? target : `${o.host ?? '127.0.0.1'}:${o.port ?? 6379}`;
  let server = servers.get(name);
  if (!server) servers.set(name, (server = new MemoryRedisServer()));
  return server;
}

export class Redis extends MemoryRedis {
  constructor(target?: unknown, options?: Record<string, unknown>) {
    super(serverFor(target), { ...(typeof target === 'object' ? target : {}), ...options });
  }
}

export class Cluster {
  constructor() {
    throw new Error('the in-memory backend has no Redis Cluster: run this test on redis-server');
  }
}

export default Redis;
