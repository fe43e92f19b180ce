import { parseArgs } from 'node:util';

/** What `npm run sample:load` fires. */
export interface LoadOptions {
  /** The running sample. @default 'http://127.0.0.1:3000' (or `SAMPLE_URL`) */
  url: string;
  /** Units of the sale. @default 100 */
  stock: number;
  /** Distinct buyers. @default 5000 */
  buyers: number;
  /** Concurrent connections. @default 200 */
  connections: number;
  /** Times each buyer presses "buy" (the presses of one buyer go out together). @default 1 */
  presses: number;
  /**
   * Sample instances to start for the run (with a private redis-server unless `REDIS_URL`); 0:
   * fire at the sample already running at `url`. @default 0
   */
  instances: number;
  /**
   * Where the started instances write their orders: `postgres` (a private PostgreSQL, or
   * `DATABASE_URL`) or `embedded` (one instance only: each would have its own). @default
   * 'postgres' with more than one instance, else 'embedded'
   */
  database: 'postgres' | 'embedded';
}

const FLAGS = {
  url: 'SAMPLE_URL',
  stock: 'LOAD_STOCK',
  buyers: 'LOAD_BUYERS',
  connections: 'LOAD_CONNECTIONS',
  presses: 'LOAD_PRESSES',
  instances: 'LOAD_INSTANCES',
  database: 'LOAD_DATABASE',
} as const;

/**
 * Reads the options from the command line (`--stock 100 --buyers 5000 --connections 200
 * --presses 1 --url http://127.0.0.1:3000 --instances 3 --database postgres`), else from
 * `LOAD_STOCK`, `LOAD_BUYERS`, `LOAD_CONNECTIONS`, `LOAD_PRESSES`, `SAMPLE_URL`,
 * `LOAD_INSTANCES`, `LOAD_DATABASE`, else the defaults.
 * @throws Error naming the option when a value is not a positive integer (stock and instances
 *   may be 0), or `--database` is neither `postgres` nor `embedded` (nor `embedded` with several
 *   instances)
 */
export function loadOptions(argv: string[], env: NodeJS.ProcessEnv): LoadOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      url: { type: 'string' },
      stock: { type: 'string' },
      buyers: { type: 'string' },
      connections: { type: 'string' },
      presses: { type: 'string' },
      instances: { type: 'string' },
      database: { type: 'string' },
    },
    strict: true,
  });
  const raw = (name: keyof typeof FLAGS) => values[name] ?? (env[FLAGS[name]] || undefined);
  const integer = (
    name: Exclude<keyof typeof FLAGS, 'url' | 'database'>,
    fallback: number,
    min: number,
  ) => {
    const text = raw(name);
    if (text === undefined) return fallback;
    if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > 10_000_000) {
      throw new Error(
        `--${name} (${FLAGS[name]}) must be an integer from ${min} to 10000000, got '${text}'`,
      );
    }
    return Number(text);
  };
  const url = (raw('url') ?? 'http://127.0.0.1:3000').replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+$/.test(url)) {
    throw new Error(`--url (SAMPLE_URL) must be http(s)://host:port, got '${url}'`);
  }
  const instances = integer('instances', 0, 0);
  const database = raw('database') ?? (instances > 1 ? 'postgres' : 'embedded');
  if (database !== 'postgres' && database !== 'embedded') {
    throw new Error(`--database (LOAD_DATABASE) must be postgres or embedded, got '${database}'`);
  }
  if (database === 'embedded' && instances > 1) {
    throw new Error(
      `--database embedded runs one instance only (each would have its own database): ` +
        `use --database postgres with --instances ${instances}`,
    );
  }
  return {
    url,
    stock: integer('stock', 100, 0),
    buyers: integer('buyers', 5_000, 1),
    connections: integer('connections', 200, 1),
    presses: integer('presses', 1, 1),
    instances,
    database,
  };
}
