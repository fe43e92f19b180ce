import 'reflect-metadata';
import { inspect } from 'node:util';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { Logger, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  LockService,
  QueueService,
  RedisCommandError,
  RedisLockDashboardModule,
  RedisLockError,
  RedisLockEvents,
  RedisLockModule,
  RedisLockOptionsError,
  type RedisLockModuleOptions,
} from '../../lib';
import {
  redactCredentials,
  redactText,
  rememberSecrets,
} from '../../lib/redaction/redact-credentials';
import { createLockApp, uniquePrefix, waitFor } from '../support/helpers';
import { decodeTaskError, encodeTaskError } from '../../lib/queue/task-errors';
import { resolveModuleOptions } from '../../lib/options/resolve-options';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/** The wrong password every test gives; it must appear nowhere. */
const SECRET = 'Wr0ng-S3cret-pw';
const RIGHT = 'the-right-password';

/** Every text an error shows, at any depth of `cause` (and `errors`, `command`, own props). */
function textsOf(value: unknown, seen = new Set<unknown>()): string[] {
  if (typeof value === 'string') return [value];
  if (typeof value !== 'object' || value === null || seen.has(value)) return [];
  seen.add(value);
  const texts: string[] = [inspect(value, { depth: 20, showHidden: true })];
  if (value instanceof Error) texts.push(value.message, String(value.stack));
  const own: Record<string, unknown> = {};
  for (const key of Reflect.ownKeys(value)) {
    const v = (value as Record<PropertyKey, unknown>)[key];
    own[String(key)] = v;
    texts.push(...textsOf(v, seen));
  }
  const written = new Set<unknown>();
  texts.push(
    JSON.stringify(own, (_k, v: unknown) => {
      if (typeof v === 'bigint') return String(v);
      if (typeof v !== 'object' || v === null) return v;
      if (written.has(v)) return '[circular]';
      written.add(v);
      return v;
    }),
  );
  return texts;
}

function expectNoSecret(value: unknown): void {
  const leaks = textsOf(value).filter((t) => t.includes(SECRET));
  expect(leaks).toEqual([]);
}

/** Everything the Nest Logger is asked to print while the test runs. */
function captureLogs(): string[] {
  const lines: string[] = [];
  for (const level of ['error', 'warn', 'log', 'debug', 'verbose', 'fatal'] as const) {
    jest.spyOn(Logger.prototype, level).mockImplementation((...args: unknown[]) => {
      lines.push(
        args.map((a) => (typeof a === 'string' ? a : inspect(a, { depth: 20 }))).join(' '),
      );
    });
  }
  return lines;
}

/** What `acquire('k')` rejects with (the test fails if it resolves). */
async function acquireError(app: INestApplicationContext): Promise<unknown> {
  const err = await app
    .get(LockService)
    .acquire('k')
    .then(() => new Error('acquired'))
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(RedisLockError);
  return err;
}

async function boot(options: RedisLockModuleOptions) {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ commandTimeoutMs: 2_000, ...options })],
  }).compile();
  return moduleRef.init();
}

describe('credentials in errors and logs', () => {
  let server: RedisServer;
  /** A server that does not know AUTH: Redis quotes the arguments (the password) in its error. */
  let quoting: RedisServer;
  let url: string;

  beforeAll(async () => {
    server = await startRedisServer(['--requirepass', RIGHT]);
    quoting = await startRedisServer(['--rename-command', 'AUTH', '']);
    url = `redis://default:${SECRET}@127.0.0.1:${server.port}`;
  });
  afterAll(async () => {
    await server.stop();
    await quoting.stop();
  });
  afterEach(() => jest.restoreAllMocks());
  const quotedUrl = () => `redis://:${SECRET}@127.0.0.1:${quoting.port}`;

  it('a failed start (forRoot with a wrong password) carries no password', async () => {
    const logs = captureLogs();
    const err = await boot({ redis: url, connectTimeoutMs: 2_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisCommandError);
    expect((err as Error).message).toMatch(/WRONGPASS/);
    expectNoSecret(err);
    expectNoSecret(logs);
  });

  it('later acquire, enqueue and worker claim errors (and their events and logs) carry none', async () => {
    const logs = captureLogs();
    const app = await boot({ redis: url, keyPrefix: uniquePrefix('redacted') });
    try {
      const acquired = await acquireError(app);
      expect(acquired).toBeInstanceOf(RedisCommandError);
      expectNoSecret(acquired);
      const enqueued = await app
        .get(QueueService)
        .enqueue('q', 'a')
        .catch((e: unknown) => e);
      expect(enqueued).toBeInstanceOf(RedisCommandError);
      expectNoSecret(enqueued);

      const emitted: unknown[] = [];
      app.get(RedisLockEvents).on('worker.error', (event) => emitted.push(event));
      const worker = app.get(QueueService).process('q', () => undefined);
      await waitFor('a worker.error event', () => emitted.length > 0, 10_000);
      await worker.close();
      expect(emitted[0]).toMatchObject({ queue: 'q', error: expect.any(RedisCommandError) });
      expectNoSecret(emitted);
    } finally {
      await app.close();
    }
    expect(logs.length).toBeGreaterThan(0);
    expectNoSecret(logs);
  });

  // Redis quotes the arguments of a command it does not know: a server without AUTH puts the
  // password into its error reply, so into ioredis's error messages.
  const quotedAuth = /unknown command 'auth'/i;
  it.each([
    [
      'a password Redis quotes in its reply',
      () => ({ redis: { host: '127.0.0.1', port: quoting.port, password: SECRET } }),
      /unknown command 'auth', with args beginning with: '\*\*\*'/i,
    ],
    [
      'a wrong sentinelPassword quoted by the sentinel',
      () => ({
        redis: {
          sentinels: [{ host: '127.0.0.1', port: quoting.port }],
          name: 'mymaster',
          sentinelPassword: SECRET,
          sentinelRetryStrategy: () => 50,
        },
      }),
      undefined,
    ],
    [
      "quorum nodes' passwords quoted by Redis",
      // Three databases: one address given three times is refused before connecting.
      () => ({ redis: quoting.url, nodes: [1, 2, 3].map((db) => `${quotedUrl()}/${db}`) }),
      undefined,
    ],
  ])('%s: in neither the acquire error nor the logs', async (_, options, message) => {
    const logs = captureLogs();
    const app = await boot({
      commandTimeoutMs: 500,
      keyPrefix: uniquePrefix('redacted'),
      ...(options() as RedisLockModuleOptions),
    });
    try {
      const err = await acquireError(app);
      if (message) expect((err as Error).message).toMatch(message);
      expectNoSecret(err);
      await waitFor('the quoted reply to be logged', () => logs.some((l) => quotedAuth.test(l)));
    } finally {
      await app.close();
    }
    expectNoSecret(logs);
  });

  it.each([
    ['a URL of another scheme', { redis: `http://:${SECRET}@127.0.0.1:6379` }],
    [
      'quorum nodes too few',
      { nodes: [`redis://:${SECRET}@a:1`, { host: 'b', password: SECRET }] },
    ],
    [
      'quorum nodes too few, as ioredis clients',
      {
        nodes: [1, 2].map(
          () => new Redis({ password: SECRET, lazyConnect: true, enableOfflineQueue: false }),
        ),
      },
    ],
  ])(
    'an invalid option holding a password (%s) names it without the password',
    async (_, options) => {
      const err = await boot(options as RedisLockModuleOptions).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expectNoSecret(err);
    },
  );

  it("shows an invalid URL's password as ***", async () => {
    const err = (await boot({ redis: `http://:${SECRET}@h` }).catch(
      (e: unknown) => e,
    )) as RedisLockOptionsError;
    expect(err.message).toContain("got 'http://***@h'");
    expect(err.value).toBe('http://***@h');
  });

  it.each([
    [`default:${SECRET}@h:6379`, 'default:***@h:6379'],
    [`redis:/:${SECRET}@h:6379`, 'redis:/***@h:6379'],
    [`//:${SECRET}@h:6379`, '//***@h:6379'],
    [`:${SECRET}@h:6379`, '***@h:6379'],
    [`h:6379?password=${SECRET}`, 'h:6379?password=***'],
    // A scheme, but no URL that ioredis can read: its own TypeError carried the whole URL.
    [`redis://:${SECRET}@`, 'redis://***@'],
    [`redis://user:${SECRET}@[::1`, 'redis://***@[::1'],
    [`redis://:${SECRET}@host:notaport`, 'redis://***@host:notaport'],
  ])('a malformed URL (%s) is shown with its user info as *** (%s)', async (url, shown) => {
    for (const options of [{ redis: url }, { nodes: ['redis://a:1', url, 'redis://b:1'] }]) {
      const err = (await boot(options as RedisLockModuleOptions).catch(
        (e: unknown) => e,
      )) as RedisLockOptionsError;
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect(err.value).toBe(shown);
      expect(err.message).toContain(`got '${shown}'`);
      expectNoSecret(err);
    }
  });

  const DB = 'a database index (a whole number)';
  const PREFIX = 'no ioredis keyPrefix';
  it.each([
    [`redis://:${SECRET}@h:6379/abc`, 'redis://:***@h:6379/abc', DB],
    [`redis://h:6379?password=${SECRET}&db=x`, 'redis://h:6379?password=***&db=x', DB],
    [`redis://:${SECRET}@h:6379/1.5`, 'redis://:***@h:6379/1.5', DB],
    // The URL parser takes a space or a tab in a password: the pattern stopped at it.
    [`redis://default:${SECRET} x@h:6379/abc`, 'redis://default:***@h:6379/abc', DB],
    [`redis://default:${SECRET}\tx@h:6379/abc`, 'redis://default:***@h:6379/abc', DB],
    [`redis://u:${SECRET} x@h:6379?keyPrefix=app:`, 'redis://u:***@h:6379?keyPrefix=app:', PREFIX],
    [`redis://u:${SECRET}\tx@h:6379?keyPrefix=a:`, 'redis://u:***@h:6379?keyPrefix=a:', PREFIX],
  ])(
    'a URL refused before connecting (%s) is shown as %s, expecting %s',
    async (url, shown, expected) => {
      // A database that is not a whole number: ioredis sent SELECT NaN, and Redis's refusal ended
      // the process (an unhandled rejection).
      for (const [options, option] of [
        [{ redis: url }, 'redis'],
        [{ nodes: ['redis://a:1', url, 'redis://b:1'] }, 'nodes[1]'],
      ] as const) {
        const err = (await boot(options as RedisLockModuleOptions).catch(
          (e: unknown) => e,
        )) as RedisLockOptionsError;
        expect(err).toBeInstanceOf(RedisLockOptionsError);
        expect(err).toMatchObject({ option, value: shown });
        expect(err.message).toContain(`expected ${expected}`);
        expectNoSecret(err);
      }
    },
  );

  it('a password given under an unknown option (one level too high, or to the dashboard) is shown as ***', () => {
    const refusals = [
      () => resolveModuleOptions({ redis: 'redis://127.0.0.1:6379', password: SECRET } as never),
      () => resolveModuleOptions({ redis: 'redis://h:1', sentinelPassword: SECRET } as never),
      () => RedisLockDashboardModule.forRoot({ password: SECRET } as never),
      // A numeric password (a config value read as a number).
      () => resolveModuleOptions({ redis: 'redis://h:1', password: 80_417_265 } as never),
    ].map((refused) => {
      try {
        refused();
      } catch (err) {
        return err;
      }
      return undefined;
    });
    for (const err of refusals) {
      expect(err).toBeInstanceOf(RedisLockOptionsError);
      expect((err as RedisLockOptionsError).value).toBe('***');
      expect((err as Error).message).toMatch(
        /Password'?: expected a known option .*, got '\*\*\*'$|password': expected a known option .*, got '\*\*\*'$/,
      );
      expectNoSecret(err);
    }
    // A mistyped option that is no credential still shows what was given.
    expect(() => resolveModuleOptions({ ttlms: 5_000 } as never)).toThrow(
      /invalid option 'ttlms': expected a known option .*, got 5000$/,
    );
  });

  it('an options object whose db is not a whole number is refused, naming redis.db', async () => {
    const err = (await boot({ redis: { host: 'h', db: 'abc' } } as never).catch(
      (e: unknown) => e,
    )) as RedisLockOptionsError;
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect(err).toMatchObject({ option: 'redis.db', value: 'abc' });
  });
});

describe('Cluster startup nodes', () => {
  it.each([
    [{ cluster: [] }, 'redis.cluster'],
    [{ cluster: 'h:7000' }, 'redis.cluster'],
    [{ cluster: ['h:7000', null] }, 'redis.cluster[1]'],
    [{ cluster: [`redis://:${SECRET}@h:notaport`] }, 'redis.cluster[0]'],
    [{ cluster: [`:${SECRET}@[::1`] }, 'redis.cluster[0]'],
  ])('%j is refused, naming %s, without its password', (redis, option) => {
    let err: unknown;
    try {
      resolveModuleOptions({ redis } as unknown as RedisLockModuleOptions);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RedisLockOptionsError);
    expect((err as RedisLockOptionsError).option).toBe(option);
    expectNoSecret(err);
  });

  it('accepts URLs, host:port strings, ports and node options', () => {
    const nodes = ['redis://h:7000', 'h:7001', 7002, { host: 'h', port: 7003 }];
    expect(() => resolveModuleOptions({ redis: { cluster: nodes } })).not.toThrow();
  });
});

describe("a task handler's error quoting a URL with a password", () => {
  it('is emitted, stored, shown and logged with the password as ***', async () => {
    const logs = captureLogs();
    const app = await createLockApp({ keyPrefix: uniquePrefix('redacted') });
    try {
      const queues = app.get(QueueService);
      const emitted: unknown[] = [];
      app.get(RedisLockEvents).onAny((name, payload) => emitted.push({ name, payload }));
      const thrown = new Error(`cannot reach redis://cache:${SECRET}@cache.internal:6379`);
      const worker = queues.process('q', () => Promise.reject(thrown), { maxAttempts: 1 });
      await queues.enqueue('q', 't1');
      await waitFor('the task to die', async () => (await queues.get('q', 't1'))?.state === 'dead');
      await worker.close();
      const info = await queues.get('q', 't1');
      expect(info?.error?.message).toBe('cannot reach redis://cache:***@cache.internal:6379');
      expect(emitted).toContainEqual({ name: 'task.dead', payload: expect.anything() });
      expectNoSecret(info);
      expectNoSecret(emitted);
      // The handler's own error object is left as it was.
      expect(thrown.message).toContain(SECRET);
    } finally {
      await app.close();
    }
    expect(logs.some((l) => l.includes('cache.internal'))).toBe(true);
    expectNoSecret(logs);
  });
});

describe('encodeTaskError', () => {
  it('stores name, message and stack without the password, each cut to its bound', () => {
    const err = new Error(`at redis://u:${SECRET}@h ${'m'.repeat(5_000)}`);
    err.name = `Err redis://u:${SECRET}@h ${'n'.repeat(5_000)}`;
    const stored = decodeTaskError(encodeTaskError(err));
    expectNoSecret(stored);
    expect(stored.name).toHaveLength(200);
    expect(stored.name.startsWith('Err redis://u:***@h nnn')).toBe(true);
    expect(stored.message).toHaveLength(1_000);
    expect(stored.stack).toHaveLength(4_000);
  });

  it('stores an error whose name and message are not strings as text', () => {
    const err = new Error('x');
    Object.assign(err, { name: 42, message: { code: 7 } });
    expect(decodeTaskError(encodeTaskError(err))).toMatchObject({
      name: '42',
      message: '[object Object]',
    });
  });
});

describe('redactCredentials', () => {
  it('returns a value without credentials as is, and copies (never edits) one with them', () => {
    const clean = new Error('plain', { cause: { name: 'get', args: ['k'] } });
    expect(redactCredentials(clean)).toBe(clean);
    const auth = Object.assign(new Error('WRONGPASS'), {
      command: { name: 'auth', args: ['alice', SECRET] },
    });
    const hello = Object.assign(new Error('WRONGPASS'), {
      command: { name: 'hello', args: ['3', 'AUTH', 'alice', SECRET, 'SETNAME', 'x'] },
    });
    const wrapped = new Error('outer', { cause: auth });
    (wrapped as { self?: unknown }).self = wrapped;
    const out = redactCredentials({ wrapped, hello });
    expectNoSecret(out);
    expect(auth.command.args).toEqual(['alice', SECRET]);
    expect(out.wrapped).not.toBe(wrapped);
    expect(out.wrapped.cause).toMatchObject({ command: { name: 'auth', args: ['alice', '***'] } });
    expect((out.wrapped as { self?: unknown }).self).toBe(out.wrapped);
    expect(out.hello.command.args).toEqual(['3', 'AUTH', 'alice', '***', 'SETNAME', 'x']);
    expect(Object.getPrototypeOf(out.wrapped.cause)).toBe(Error.prototype);
  });
});

describe('redactText (property)', () => {
  it('leaves no registered secret of 4+ characters in any text, wherever it occurs', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.string({ minLength: 4, maxLength: 12 }),
            // Secrets made of the redaction mark's character: replacing one can make another.
            fc.string({ unit: fc.constantFrom('*', 'a'), minLength: 4, maxLength: 8 }),
          ),
          { minLength: 1, maxLength: 3 },
        ),
        fc.array(fc.oneof(fc.string(), fc.constantFrom('*', '**', '***')), { maxLength: 8 }),
        (secrets, pieces) => {
          const forget = rememberSecrets([secrets.map((password) => ({ password }))]);
          try {
            const text = pieces.flatMap((p, i) => [p, secrets[i % secrets.length]]).join('');
            const out = redactText(text);
            for (const secret of secrets) expect(out).not.toContain(secret);
          } finally {
            forget();
          }
        },
      ),
      // Found by this property: one pass over "********" left "******".
      { examples: [[['****'], ['', '']]] },
    );
  });

  it("replaces exactly the password of any URL's user info", () => {
    const part = (chars: string) =>
      fc.stringMatching(new RegExp(`^[${chars}]{1,16}$`)) as fc.Arbitrary<string>;
    fc.assert(
      // `@` and `:` too: ioredis takes an unencoded `@` as part of the password (up to the last);
      // a space and a tab too, which the URL parser takes.
      fc.property(
        part('a-zA-Z0-9_.~-'),
        part('a-zA-Z0-9_.~!$&()*+,;=%@: \t-'),
        (user, password) => {
          const text = `reach rediss://${user}:${password}@db.internal:6380/2 now`;
          expect(redactText(text)).toBe(`reach rediss://${user}:***@db.internal:6380/2 now`);
        },
      ),
    );
  });

  it('replaces a password holding an unencoded @ whole, as ioredis reads it', () => {
    expect(redactText('cannot reach redis://default:p@ssw0rd@10.0.0.5:6379')).toBe(
      'cannot reach redis://default:***@10.0.0.5:6379',
    );
    expect(redactText("got ' redis://:p@ss@w0rd@127.0.0.1:6379/0?db=1'")).toBe(
      "got ' redis://:***@127.0.0.1:6379/0?db=1'",
    );
  });
});
