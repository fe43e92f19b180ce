import 'reflect-metadata';
import {
  createConnection,
  createServer,
  type AddressInfo,
  type Server,
  type Socket,
} from 'node:net';
import type { INestApplicationContext } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { Lock, LockService, LockTimeoutError, RedisUnavailableError } from '../../lib';
import { lockRedisKeys } from '../../lib/lock/lock-keys';
import {
  createLockApp,
  redisClient,
  uniquePrefix,
  waitFor,
  waitForLine,
  waitForLocalWaiters,
} from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/**
 * A TCP proxy in front of Redis whose replies can be held back (`delay`) while requests go
 * through at once: Redis runs a command on time and its reply comes late, as on a slow link. With
 * `commands` only the command connections are slowed, not the subscriber's (whose messages then
 * come before the replies); otherwise both are.
 */
class ReplyDelayingProxy {
  url = '';
  /** Replies (chunks) received from Redis on command connections so far. */
  received = 0;
  /** Replies held back so far and then passed on. */
  delivered = 0;
  private delayMs = 0;
  private commandsOnly = false;
  /** `delayOnSubscribe`'s delay, until a connection subscribes. */
  private armed = 0;
  private server?: Server;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly port: number) {}

  async start(): Promise<void> {
    this.server = createServer((client) => this.connect(client));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `redis://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** From now on each reply comes `ms` late (order kept per connection). */
  delay(ms: number, commandsOnly: boolean): void {
    this.delayMs = ms;
    this.commandsOnly = commandsOnly;
  }

  /** As `delay(ms, true)` from the next SUBSCRIBE on (sent right before a waiter joins the line). */
  delayOnSubscribe(ms: number): void {
    this.armed = ms;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }

  private connect(client: Socket): void {
    const upstream = createConnection(this.port, '127.0.0.1');
    this.sockets.add(client).add(upstream);
    let subscriber = false;
    let last = 0;
    client.on('data', (chunk) => {
      // The command's name, not a script's text (which may mention subscribing).
      if (/\*\d+\r\n\$\d+\r\n[SP]?SUBSCRIBE\r\n/i.test(chunk.toString('latin1'))) {
        subscriber = true;
        if (this.armed > 0) this.delay(this.armed, true);
        this.armed = 0;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!subscriber) this.received++;
      const ms = subscriber && this.commandsOnly ? 0 : this.delayMs;
      if (ms === 0 && last <= Date.now()) {
        client.write(chunk);
        return;
      }
      // In order behind what is held already.
      last = Math.max(last, Date.now() + ms);
      setTimeout(() => {
        if (!subscriber) this.delivered++;
        if (!client.destroyed) client.write(chunk);
      }, last - Date.now()).unref();
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  }
}

/** What `p` settles with: its value or its error. */
async function settled<T>(p: Promise<T>): Promise<T | unknown> {
  return p.catch((err: unknown) => err);
}

describe('LockService under Redis stalls (the undo of a call made with a line token)', () => {
  let server: RedisServer;
  let admin: Redis;
  const apps: INestApplicationContext[] = [];

  /** A lock service (one "process") on the private server, or through `url`. */
  async function instance(
    prefix: string,
    commandTimeoutMs?: number,
    url = server.url,
    maxLocalHandoffs?: number,
  ) {
    const app = await createLockApp({
      redis: url,
      keyPrefix: prefix,
      commandTimeoutMs,
      maxLocalHandoffs,
    });
    apps.push(app);
    return app.get(LockService);
  }

  /** Stops the server (SIGSTOP): commands sent meanwhile run when `resume` is called. */
  const stall = () => server.process.kill('SIGSTOP');
  const resume = () => server.process.kill('SIGCONT');

  beforeAll(async () => {
    server = await startRedisServer();
    admin = redisClient(server.url);
  });
  afterEach(async () => {
    resume();
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });
  afterAll(async () => {
    admin.disconnect();
    await server.stop();
  });

  it('takes a waiter out of the line when its renewal times out: the next release frees the lock', async () => {
    const prefix = uniquePrefix('stall-renew');
    const keys = lockRedisKeys(prefix, 'k');
    const a = await instance(prefix);
    const b = await instance(prefix, 300);
    const held = await a.acquire('k', { ttlMs: 20_000 });
    const waiting = settled(b.acquire('k', { ttlMs: 15_000, waitMs: 20_000 }));
    await waitForLine(admin, prefix, 'k');

    stall();
    // The heartbeat's renewal (once a second) is not answered in time: the caller is told.
    expect(await waiting).toBeInstanceOf(RedisUnavailableError);
    resume();
    // B's connection: answered after the late renewal and whatever B sent behind it.
    expect(await b.isLocked('k')).toBe(true);

    expect(await admin.zrange(keys.line, 0, -1)).toEqual([]);
    expect(await held.release()).toBe(true);
    expect(await admin.get(keys.value)).toBeNull();
  });

  it('leaves the line again when a check of its place runs after the process gave it up (answered NOSCRIPT, sent again behind the leave): the lock is not taken for nobody', async () => {
    const prefix = uniquePrefix('stall-recheck');
    const keys = lockRedisKeys(prefix, 'k');
    const b = await instance(prefix, 300);
    // A holder that will crash; B waits in line (its acquire script sent, its leave-line not yet).
    await admin.set(keys.value, 'crashed-holder', 'PX', 20_000);
    const waiting = settled(b.acquire('k', { ttlMs: 20_000, waitMs: 600 }));
    await waitForLine(admin, prefix, 'k');
    // The holder's lock goes, a wake-up tells B to check again, and Redis stalls with its script
    // cache empty: B's check times out, its caller gives up during the stall and B leaves the
    // line; then the check is answered NOSCRIPT and sent again after the leave.
    await admin
      .multi()
      .script('FLUSH')
      .del(keys.value)
      .publish(keys.channel, 'f')
      .call('CLIENT', 'PAUSE', '1200', 'ALL')
      .exec();
    expect(await waiting).toBeInstanceOf(LockTimeoutError);
    await waitFor('the stall to end', async () => (await admin.ping()) === 'PONG');
    // The check's NOSCRIPT reply, its EVAL sent again, and the leave its late reply sends.
    await new Promise((r) => setTimeout(r, 300));
    await b.isLocked('k');
    expect(await admin.get(keys.value)).toBeNull();
    expect(await admin.zrange(keys.line, 0, -1)).toEqual([]);
  });

  it('takes a joining process out of the line when its join times out', async () => {
    const prefix = uniquePrefix('stall-join');
    const keys = lockRedisKeys(prefix, 'k');
    const a = await instance(prefix);
    const b = await instance(prefix, 300);
    // A first wait leaves B subscribed for a while: its next waiter joins the line at once.
    const first = await a.acquire('k');
    const before = b.acquire('k', { waitMs: 5_000 });
    await waitForLine(admin, prefix, 'k');
    await first.release();
    await (await before).release();
    const held = await a.acquire('k', { ttlMs: 20_000 });

    stall();
    expect(await settled(b.acquire('k', { ttlMs: 15_000, waitMs: 20_000 }))).toBeInstanceOf(
      RedisUnavailableError,
    );
    resume();
    expect(await b.isLocked('k')).toBe(true);

    expect(await admin.zrange(keys.line, 0, -1)).toEqual([]);
    expect(await held.release()).toBe(true);
    expect(await admin.get(keys.value)).toBeNull();
  });

  it('gives both tokens back when a local handoff times out', async () => {
    const prefix = uniquePrefix('stall-handoff');
    const locks = await instance(prefix, 300);
    const first = await locks.acquire('k', { ttlMs: 10_000 });
    const second = settled(locks.acquire('k', { ttlMs: 10_000, waitMs: 1_500 }));
    await waitForLocalWaiters(locks, 'k');

    stall();
    const released = await settled(first.release());
    expect(released).toBeInstanceOf(RedisUnavailableError);
    expect((released as Error).message).toMatch(/handoff failed/);
    resume();

    // The waiter gets the lock once Redis answers again, or the failure of its own attempt; it
    // does not wait behind a lock nobody has.
    const outcome = await second;
    expect(outcome).not.toBeInstanceOf(LockTimeoutError);
    if (!(outcome instanceof Error)) expect(await (outcome as Lock).release()).toBe(true);
    expect(await locks.isLocked('k')).toBe(false);
    expect(await admin.zrange(lockRedisKeys(prefix, 'k').line, 0, -1)).toEqual([]);
  });

  it('takes the rejoin token out of the line when a release that rejoins it times out', async () => {
    const prefix = uniquePrefix('stall-rejoin');
    const keys = lockRedisKeys(prefix, 'k');
    const a = await instance(prefix, 300, undefined, 1);
    const c = await instance(prefix);
    const o = { ttlMs: 10_000, waitMs: 20_000 };
    const a1 = await a.acquire('k', o);
    const a2Waiting = a.acquire('k', o);
    await waitForLocalWaiters(a, 'k');
    const cWaiting = c.acquire('k', o);
    await waitForLine(admin, prefix, 'k');
    // One local handoff (the bound) while C waits: a2's release hands the lock to the line.
    await a1.release();
    const a2 = await a2Waiting;
    const a3Waiting = settled(a.acquire('k', { ...o, waitMs: 1_500 }));
    await waitForLocalWaiters(a, 'k');

    stall();
    expect(await settled(a2.release())).toBeInstanceOf(RedisUnavailableError);
    resume();
    // The late release + rejoin handed the lock to C.
    const cLock = await cWaiting;
    expect(await a.isLocked('k')).toBe(true);
    expect(await cLock.release()).toBe(true);

    // Then to a3 (A queued again for it) or to nobody: not to the forgotten rejoin token.
    const a3 = await a3Waiting;
    if (a3 instanceof RedisUnavailableError) {
      expect(await admin.get(keys.value)).toBeNull();
    } else {
      expect(a3).not.toBeInstanceOf(Error);
      expect(await admin.get(keys.value)).toBe((a3 as Lock).token);
      await (a3 as Lock).release();
    }
  });

  describe('through a proxy that delays the replies', () => {
    let proxy: ReplyDelayingProxy;
    beforeEach(async () => {
      proxy = new ReplyDelayingProxy(server.port);
      await proxy.start();
    });
    afterEach(async () => {
      await Promise.all(apps.splice(0).map((app) => app.close()));
      await proxy.close();
    });

    it('keeps a lock handed by message when the join that put its token in line is answered late', async () => {
      const prefix = uniquePrefix('stall-late-join');
      const keys = lockRedisKeys(prefix, 'k');
      const a = await instance(prefix);
      const b = await instance(prefix, 300, proxy.url);
      // B's first attempt (refused) comes back on time, so that B joins the line next.
      const held = await a.acquire('k', { ttlMs: 30_000 });
      proxy.delayOnSubscribe(600);
      const waiting = b.acquire('k', { ttlMs: 30_000, waitMs: 10_000 });
      await waitForLine(admin, prefix, 'k');

      // Handed to B's line token; the message (not delayed) gives it to B's caller.
      await held.release();
      const bLock = await waiting;
      // The join's reply (the first held back) comes after the join timed out (300 ms).
      await waitFor('the join reply', () => proxy.delivered >= 1);

      expect(await admin.get(keys.value)).toBe(bLock.token);
      expect(bLock.signal.aborted).toBe(false);
      expect(await a.tryAcquire('k', { waitMs: 0 })).toBeNull();
    });

    it("keeps the process's other callers waiting when its join times out after a message handed the lock to its first caller: the holder's release hands it on", async () => {
      const prefix = uniquePrefix('stall-late-join-cohort');
      const keys = lockRedisKeys(prefix, 'k');
      const a = await instance(prefix);
      const b = await instance(prefix, 500, proxy.url);
      const o = { ttlMs: 30_000, waitMs: 10_000 };
      const held = await a.acquire('k', o);
      proxy.delayOnSubscribe(1_000);
      const waiting = b.acquire('k', o);
      await waitForLine(admin, prefix, 'k');
      // A second caller of B waits behind the first, in B's cohort (one place in the line).
      const next = settled(b.acquire('k', o));
      await waitForLocalWaiters(b, 'k', 2);

      // Handed to B's line token; the message (not delayed) gives it to B's first caller.
      await held.release();
      const bLock = await waiting;
      // The join's reply (the first held back) comes after the join timed out (500 ms).
      await waitFor('the join reply', () => proxy.delivered >= 1);
      proxy.delay(0, true);

      // The failed join was for a place B no longer needs: its second caller still waits.
      expect(b.localWaiters('k')).toBe(1);
      expect(bLock.signal.aborted).toBe(false);
      expect(await admin.get(keys.value)).toBe(bLock.token);
      expect(await bLock.release()).toBe(true);
      const nextLock = await next;
      expect(nextLock).toBeInstanceOf(Lock);
      expect(await admin.get(keys.value)).toBe((nextLock as Lock).token);
      expect(await (nextLock as Lock).release()).toBe(true);
      expect(await admin.zrange(keys.line, 0, -1)).toEqual([]);
    });

    it('gives back a lock handed to a waiter that gives up while its leaving is answered late', async () => {
      const prefix = uniquePrefix('stall-leave');
      const keys = lockRedisKeys(prefix, 'k');
      const a = await instance(prefix);
      const b = await instance(prefix, 300, proxy.url);
      const held = await a.acquire('k', { ttlMs: 30_000 });
      const waiting = settled(b.acquire('k', { ttlMs: 15_000, waitMs: 300 }));
      await waitForLine(admin, prefix, 'k');
      const token = (await admin.zrange(keys.line, 0, -1))[0];

      // B hears nothing in time: neither the handoff message nor the reply to its leaving.
      proxy.delay(1_000, false);
      await held.release();
      expect(await admin.get(keys.value)).toBe(token);
      const received = proxy.received;
      expect(await waiting).toBeInstanceOf(LockTimeoutError);
      // Redis answered B's leaving (the reply is held back): it ran.
      await waitFor("B's leaving", () => proxy.received > received);

      expect(await admin.get(keys.value)).toBeNull();
      const again = await a.tryAcquire('k', { waitMs: 0 });
      expect(again).not.toBeNull();
      await again!.release();
    });
  });
});
