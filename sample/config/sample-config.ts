/** What the sample app is configured with (from the environment by `loadSampleConfig`). */
export interface SampleConfigValues {
  /**
   * The Redis the app uses for its locks, its queues and its own data.
   * @default 'redis://127.0.0.1:6379' (`npm run sample` starts a private server when unset)
   */
  redisUrl: string;
  /**
   * Nodes of a Redis Cluster (`REDIS_CLUSTER_NODES=host1:7000,host2:7001`, any of its nodes):
   * when set, the locks, the queues and the sample's data use a Cluster client and `redisUrl` is
   * not used.
   * @default undefined (no Cluster: `redisUrl`)
   */
  redisClusterNodes?: ReadonlyArray<{ host: string; port: number }>;
  /**
   * Redis Sentinels (`REDIS_SENTINELS=host1:26379,host2:26379`) watching the master named
   * `redisSentinelName`: when set (and no Cluster), the app asks them for the master and follows
   * its failovers, and `redisUrl` is not used.
   * @default undefined (no Sentinel)
   */
  redisSentinels?: ReadonlyArray<{ host: string; port: number }>;
  /**
   * The master's name at the sentinels (`REDIS_SENTINEL_NAME`).
   * @default 'mymaster'
   */
  redisSentinelName: string;
  /**
   * The PostgreSQL the orders are written to (`postgres://user:password@host:5432/db`); unset: an
   * embedded PostgreSQL in this process (`@electric-sql/pglite`, in memory, one instance only).
   * @default undefined (embedded)
   */
  databaseUrl?: string;
  /**
   * Bound of the `orders` queue (queued and running orders): past it a buyer gets 503 +
   * `Retry-After` and the unit goes back to the stock.
   * @default 10000
   */
  ordersMaxSize: number;
  /**
   * HTTP port (`0`: any free port).
   * @default 3000
   */
  port: number;
  /**
   * Address the HTTP server listens on (`0.0.0.0` for every interface).
   * @default '127.0.0.1'
   */
  host: string;
  /**
   * Prefix of every key of the sample: its data, and the locks and queues of the library.
   * @default 'sample:'
   */
  keyPrefix: string;
  /**
   * How long an editor of the task desk may hold a task before it returns to the pool, in ms.
   * @default 30000
   */
  deskLeaseMs: number;
  /**
   * Claims after which a task whose leases keep running out goes to the desk's dead-letter set.
   * @default 5
   */
  deskMaxAttempts: number;
  /**
   * How long a unit taken from a sale's stock may stay unsettled (neither its order row written,
   * nor an order on its way in the `orders` queue) before `SaleSettler` puts it back on sale, in
   * ms. Longer than a purchase may take after it took the unit (its replica wait and enqueue,
   * each bounded by a few seconds), so a purchase still in flight is never undone.
   * @default 10000
   */
  saleHoldMs: number;
}

/**
 * The sample's configuration, injectable by its class (`constructor(config: SampleConfig)`).
 * @example
 * new SampleConfig({ redisUrl: 'redis://127.0.0.1:6379', keyPrefix: 'shop:' })
 */
export class SampleConfig implements SampleConfigValues {
  readonly redisUrl: string;
  readonly redisClusterNodes?: ReadonlyArray<{ host: string; port: number }>;
  readonly redisSentinels?: ReadonlyArray<{ host: string; port: number }>;
  readonly redisSentinelName: string;
  readonly databaseUrl?: string;
  readonly ordersMaxSize: number;
  readonly port: number;
  readonly host: string;
  readonly keyPrefix: string;
  readonly deskLeaseMs: number;
  readonly deskMaxAttempts: number;
  readonly saleHoldMs: number;

  constructor(values: Partial<SampleConfigValues> = {}) {
    this.redisUrl = values.redisUrl ?? 'redis://127.0.0.1:6379';
    this.redisClusterNodes = checkNodes('Cluster node', values.redisClusterNodes);
    this.redisSentinels = checkNodes('Sentinel', values.redisSentinels);
    this.redisSentinelName = values.redisSentinelName ?? 'mymaster';
    this.databaseUrl = values.databaseUrl || undefined;
    this.ordersMaxSize = checkInteger('ordersMaxSize', values.ordersMaxSize ?? 10_000, 1, 1e9);
    this.port = checkInteger('port', values.port ?? 3000, 0, 65_535);
    this.host = values.host ?? '127.0.0.1';
    this.keyPrefix = values.keyPrefix ?? 'sample:';
    this.deskLeaseMs = checkInteger('deskLeaseMs', values.deskLeaseMs ?? 30_000, 1, 86_400_000);
    this.deskMaxAttempts = checkInteger('deskMaxAttempts', values.deskMaxAttempts ?? 5, 1, 1_000);
    this.saleHoldMs = checkInteger('saleHoldMs', values.saleHoldMs ?? 10_000, 1_000, 3_600_000);
    if (!/^rediss?:\/\//.test(this.redisUrl)) {
      throw new Error(
        `sample config: redisUrl must be a redis:// or rediss:// URL, got '${this.redisUrl}'`,
      );
    }
    if (this.databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(this.databaseUrl)) {
      throw new Error(
        'sample config: DATABASE_URL must be a postgres:// or postgresql:// URL, got ' +
          `'${redactDatabaseUrl(this.databaseUrl)}'`,
      );
    }
  }
}

/**
 * Reads the configuration from environment variables: `REDIS_URL`, `REDIS_CLUSTER_NODES`, `REDIS_SENTINELS`,
 * `REDIS_SENTINEL_NAME`, `DATABASE_URL`,
 * `ORDERS_MAX_SIZE`, `PORT`, `HOST`, `KEY_PREFIX`, `DESK_LEASE_MS`, `DESK_MAX_ATTEMPTS`, `SALE_HOLD_MS`. An unset or empty variable takes the default.
 * @example
 * const config = loadSampleConfig(process.env);
 */
export function loadSampleConfig(env: NodeJS.ProcessEnv): SampleConfig {
  const text = (name: string) =>
    env[name] === undefined || env[name] === '' ? undefined : env[name];
  const number = (name: string) => {
    const value = text(name);
    if (value === undefined) return undefined;
    if (!/^\d+$/.test(value))
      throw new Error(`sample config: ${name} must be a whole number, got '${value}'`);
    return Number(value);
  };
  return new SampleConfig({
    redisUrl: text('REDIS_URL'),
    redisClusterNodes: hostPorts('REDIS_CLUSTER_NODES', text('REDIS_CLUSTER_NODES')),
    redisSentinels: hostPorts('REDIS_SENTINELS', text('REDIS_SENTINELS')),
    redisSentinelName: text('REDIS_SENTINEL_NAME'),
    databaseUrl: text('DATABASE_URL'),
    ordersMaxSize: number('ORDERS_MAX_SIZE'),
    port: number('PORT'),
    host: text('HOST'),
    keyPrefix: text('KEY_PREFIX'),
    deskLeaseMs: number('DESK_LEASE_MS'),
    deskMaxAttempts: number('DESK_MAX_ATTEMPTS'),
    saleHoldMs: number('SALE_HOLD_MS'),
  });
}

/** `host1:7000,host2:7001` → `[{ host, port }, …]`; throws naming the variable `name`. */
function hostPorts(
  name: string,
  value: string | undefined,
): Array<{ host: string; port: number }> | undefined {
  if (value === undefined) return undefined;
  return value.split(',').map((entry) => {
    const match = /^\s*(\[[^\]]+\]|[^:\s]+):(\d{1,5})\s*$/.exec(entry);
    if (!match) {
      throw new Error(`sample config: ${name} must be host:port[,host:port…], got '${value}'`);
    }
    return { host: match[1].replace(/^\[|\]$/g, ''), port: Number(match[2]) };
  });
}

/** A copy of `nodes` (undefined when empty), each with a host and a port (`what` in errors). */
function checkNodes(
  what: string,
  nodes: ReadonlyArray<{ host: string; port: number }> | undefined,
): Array<{ host: string; port: number }> | undefined {
  if (!nodes || nodes.length === 0) return undefined;
  return nodes.map((node) => {
    if (typeof node.host !== 'string' || node.host === '') {
      throw new Error(`sample config: a ${what} needs a host, got ${JSON.stringify(node)}`);
    }
    checkInteger(`${what} port`, node.port, 1, 65_535);
    return { ...node };
  });
}

function checkInteger(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(
      `sample config: ${name} must be an integer from ${min} to ${max}, got ${value}`,
    );
  }
  return value;
}

/**
 * The Redis URL with its password hidden, for logs.
 * @example
 * redactRedisUrl('redis://:secret@host:6379') // 'redis://:***@host:6379'
 */
export function redactRedisUrl(url: string): string {
  return url.replace(/^(rediss?:\/\/[^:@/]*:)[^@/]*@/, '$1***@');
}

/**
 * The database URL with its password hidden, for logs and errors.
 * @example
 * redactDatabaseUrl('postgres://shop:secret@db:5432/shop') // 'postgres://shop:***@db:5432/shop'
 */
export function redactDatabaseUrl(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:@/]*:)[^@/]*@/, '$1***@');
}
