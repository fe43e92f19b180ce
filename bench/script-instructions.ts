/**
 * Where the uncontended pair's script time goes, in a figure the machine's load does not move:
 * instructions the redis-server executes (user space, valgrind's callgrind) per acquire + release
 * pair, for the library's two scripts and for trimmed variants of them, one change at a time.
 * `INFO commandstats` (bench/serial-cost.ts) measures the same thing in µs, but on a shared,
 * loaded machine its medians move by more than the changes measured here.
 *
 * Each variant gets its own redis-server under `valgrind --tool=callgrind` (`--hz 1`, so that
 * background work stays out of the count), 200 unmeasured pairs, then the counters are zeroed,
 * `--pairs` pairs run (one loop, one key, awaited as the library does) and the counters dumped.
 * Needs `valgrind` (Debian: `apt-get install valgrind`).
 *
 *   node -r ts-node/register/transpile-only bench/script-instructions.ts [--pairs 1000]
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Redis from 'ioredis';
import { LOCK_SCRIPTS } from '../lib/lock/lock-scripts';
import { FENCE_COUNTER_PRELUDES, LINE_PRELUDES } from '../lib/waiting/waiting-scripts';
import { callgrindServer } from './support/callgrind-server';
import { numberArg } from './support/script-args';

const PAIRS = numberArg('pairs', 1_000);

/** One acquire + release pair: two scripts (or a plain `SET NX PX` acquire) and their arguments. */
interface Variant {
  name: string;
  /** Acquire script, or `'SET'` for a plain `SET key token NX PX 10000`. */
  acquire: string;
  release: string;
  acquireKeys: (key: string) => string[];
  acquireArgs: string[];
  releaseKeys: (key: string) => string[];
  releaseArgs: string[];
}

const lua = (file: string) => readFileSync(file, 'utf8');
const lockLua = (name: string) =>
  lua(join(__dirname, '..', 'lib', 'lock', 'scripts', `${name}.lua`));
const HELPERS = [...new Set([...FENCE_COUNTER_PRELUDES, ...LINE_PRELUDES])]
  .map(lua)
  .concat(lockLua('hand-over'));
const RELEASE_IF_OWNER =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end return 0";
/** A minimal acquire: `SET NX PX`, then `extra` (Lua), granted with fence 0. */
const minimalAcquire = (extra: string) =>
  `if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0} end ${extra} ` +
  'return {1, 0, 0}';

const lockKeys = (k: string) => [k, 'lock-fence'];
const library = {
  acquireKeys: lockKeys,
  acquireArgs: ['10000', '110h', '3600000'],
  releaseKeys: lockKeys,
  releaseArgs: ['0', '3600000'],
};
const minimal = {
  acquireKeys: (k: string) => [k, 'lock-fence'],
  acquireArgs: ['10000'],
  releaseKeys: (k: string) => [k],
  releaseArgs: [],
  release: RELEASE_IF_OWNER,
};

const VARIANTS: Variant[] = [
  {
    name: 'the library: acquire.lua + release.lua',
    acquire: LOCK_SCRIPTS.acquire.source,
    release: LOCK_SCRIPTS.release.source,
    ...library,
  },
  {
    name: 'the same, helpers set up before the fast paths',
    acquire: [lockLua('lock-keys'), ...HELPERS, lockLua('acquire-fast'), lockLua('acquire')].join(
      '\n',
    ),
    release: [lockLua('lock-keys'), ...HELPERS, lockLua('release-fast'), lockLua('release')].join(
      '\n',
    ),
    ...library,
  },
  {
    name: 'minimal, all of the library arguments',
    acquire: minimalAcquire(''),
    ...library,
    release: RELEASE_IF_OWNER,
  },
  { name: 'minimal: SET NX PX / GET + DEL', acquire: minimalAcquire(''), ...minimal },
  {
    name: 'minimal + EXISTS',
    acquire: minimalAcquire("redis.call('EXISTS', KEYS[2])"),
    ...minimal,
  },
  { name: 'minimal + TIME', acquire: minimalAcquire("redis.call('TIME')"), ...minimal },
  {
    name: 'minimal + SET … GET of the counter',
    acquire: minimalAcquire("redis.call('SET', KEYS[2], '1795768079166334', 'GET')"),
    ...minimal,
  },
  { name: 'minimal + INCR', acquire: minimalAcquire("redis.call('INCR', KEYS[2])"), ...minimal },
  {
    name: 'minimal + fence (TIME, SET … GET)',
    acquire: minimalAcquire(
      "local t = redis.call('TIME') " +
        "redis.call('SET', KEYS[2], t[1] .. string.sub('00000' .. t[2], -6), 'GET')",
    ),
    ...minimal,
  },
  {
    name: 'SET NX PX + release script (redis-semaphore)',
    acquire: 'SET',
    ...minimal,
    acquireKeys: (k) => [k],
  },
];

/** Instructions per pair of `variant`, on a fresh redis-server under callgrind. */
async function instructionsPerPair(variant: Variant): Promise<number> {
  const server = await callgrindServer();
  const client = new Redis(server.port, { retryStrategy: () => 200, maxRetriesPerRequest: null });
  client.on('error', () => undefined);
  try {
    const release = (await client.script('LOAD', variant.release)) as string;
    const acquire =
      variant.acquire === 'SET' ? '' : ((await client.script('LOAD', variant.acquire)) as string);
    const pairs = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const token = `token-${i}`;
        const keys = variant.acquireKeys('lock:{k}');
        const granted =
          variant.acquire === 'SET'
            ? (await client.set(keys[0], token, 'PX', 10_000, 'NX')) === 'OK'
            : (
                (await client.evalsha(
                  acquire,
                  keys.length,
                  ...keys,
                  token,
                  ...variant.acquireArgs,
                )) as number[]
              )[0] === 1;
        if (!granted) throw new Error(`${variant.name}: a free key was not granted`);
        const rk = variant.releaseKeys('lock:{k}');
        if ((await client.evalsha(release, rk.length, ...rk, token, ...variant.releaseArgs)) !== 1)
          throw new Error(`${variant.name}: the holder's release did not release`);
      }
    };
    await pairs(200);
    server.zero();
    await pairs(PAIRS);
    return server.instructions() / PAIRS;
  } finally {
    client.disconnect();
    await server.stop();
  }
}

async function main(): Promise<void> {
  console.log(`redis-server instructions (user space, callgrind) per pair, ${PAIRS} pairs each:`);
  for (const variant of VARIANTS) {
    const n = await instructionsPerPair(variant);
    console.log(
      `  ${variant.name.padEnd(48)} ${Math.round(n).toLocaleString('en-US').padStart(8)}`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
