import { EventEmitter } from 'node:events';
import { setImmediateUnfaked } from '../../redis/unfaked-ticks';
import { bufferToBytes, bytesToBuffer, bytesToText, textToBytes } from './memory-bytes';
import { COMMANDS } from './memory-commands';
import { commandError, MemoryReplyError, MemoryStatus, type MemoryReply } from './memory-replies';
import {
  MemoryRedisServer,
  type MemoryClientInfo,
  type MemorySubscriber,
} from './memory-redis-server';

/* eslint-disable @typescript-eslint/no-unsafe-declaration-merging -- ioredis's command methods, added to the prototypes below, are variadic */

type Value = string | number | Buffer;
type Arg = Value | readonly Arg[] | Record<string, Value>;

/** One argument as the bytes ioredis sends: a string as UTF-8, a Buffer as it is. */
const argBytes = (a: Value): string =>
  Buffer.isBuffer(a) ? bufferToBytes(a) : textToBytes(String(a));

/**
 * A command's arguments as byte strings (memory-bytes.ts); ioredis flattens arrays (and objects
 * for HSET, MSET…).
 */
function flatten(args: readonly Arg[], out: string[] = []): string[] {
  for (const a of args) {
    if (Array.isArray(a)) flatten(a as readonly Arg[], out);
    else if (typeof a === 'object' && a !== null && !Buffer.isBuffer(a))
      for (const [k, v] of Object.entries(a as Record<string, Value>))
        out.push(textToBytes(k), argBytes(v));
    else out.push(argBytes(a as Value));
  }
  return out;
}

/** An error reply as ioredis reads it: its message as UTF-8 text. */
function toJsError(err: unknown): unknown {
  if (!(err instanceof MemoryReplyError)) return err;
  const message = bytesToText(err.message);
  return message === err.message ? err : new MemoryReplyError(message);
}

/**
 * A reply as ioredis gives it to JavaScript: bulk and status strings as UTF-8 text, or as
 * Buffers of their bytes for a `…Buffer` command.
 */
function toJs(name: string, reply: MemoryReply, buffers: boolean): unknown {
  if (reply instanceof MemoryStatus) reply = reply.status;
  if (typeof reply === 'string') return buffers ? bytesToBuffer(reply) : bytesToText(reply);
  if (name === 'hgetall' && Array.isArray(reply)) {
    // ioredis makes an object of the pairs: the fields become text, also for HGETALLBUFFER.
    const o: Record<string, unknown> = {};
    for (let i = 0; i < reply.length; i += 2)
      o[bytesToText(reply[i] as string)] = toJs('', reply[i + 1], buffers);
    return o;
  }
  if (Array.isArray(reply)) return reply.map((r) => toJs('', r, buffers));
  return toJsError(reply);
}

/** Commands the client runs itself (blocking reads, pub/sub, QUIT), counted by the server. */
const CLIENT_SIDE = new Set([
  'client',
  'blpop',
  'xread',
  'subscribe',
  'ssubscribe',
  'psubscribe',
  'unsubscribe',
  'sunsubscribe',
  'punsubscribe',
  'quit',
]);

/**
 * The reply of a command, delivered as a socket's would be: in a later turn of the event loop
 * (the command itself ran at once, in order). A caller looping on commands thus lets timers and
 * I/O run between them, as over a network; the `setImmediate` of before any fake timers.
 */
function answer(reply: unknown, failure?: unknown): Promise<unknown> {
  return new Promise((resolve, reject) =>
    setImmediateUnfaked(() => (failure === undefined ? resolve(reply) : reject(failure))),
  );
}

const closed = () => new Error('Connection is closed.');

/** Names of the commands a client offers (ioredis's methods, lower-case). */
const COMMAND_NAMES = [...Object.keys(COMMANDS), 'eval', 'evalsha', 'script', 'pubsub'];

/** Options of an in-memory client; what ioredis's `options` holds that the library reads. */
export interface MemoryRedisOptions {
  /** Shown where the library names the server (boot warnings). @default 'in-memory' */
  host?: string;
  /** @default 6379 */
  port?: number;
  [option: string]: unknown;
}

/**
 * An ioredis-compatible client of a `MemoryRedisServer`: the commands the library sends (and the
 * usual ones a test reads Redis with), EVALSHA/EVAL of its Lua scripts, pipelines and MULTI,
 * BLPOP and XREAD BLOCK, SUBSCRIBE/SSUBSCRIBE/PSUBSCRIBE with `message` events, `duplicate`,
 * `quit`/`disconnect`. Always `ready` until closed; after that every command rejects with
 * "Connection is closed." as ioredis does. Opens no socket and keeps no timer except those of
 * blocking reads in progress, which closing ends.
 */
export class MemoryRedis extends EventEmitter {
  status: 'ready' | 'end' = 'ready';
  readonly isCluster = false;
  readonly options: MemoryRedisOptions;
  /** What CLIENT LIST shows of this client. */
  private readonly clientInfo: MemoryClientInfo;
  private readonly stops = new Set<() => void>();
  private readonly pendingRejects = new Set<(err: Error) => void>();
  private readonly subscriptions = new Map<string, 'channel' | 'shard' | 'pattern'>();
  private readonly subscriber: MemorySubscriber = {
    // As ioredis: the message as text, and as Buffers (`messageBuffer`…) of its bytes.
    deliver: (kind, channel, message, pattern) => {
      if (this.status !== 'ready') return;
      const head = kind === 'pmessage' ? [bytesToText(pattern!)] : [];
      if (this.listenerCount(kind) > 0)
        this.emit(kind, ...head, bytesToText(channel), bytesToText(message));
      if (this.listenerCount(`${kind}Buffer`) > 0)
        this.emit(`${kind}Buffer`, ...head, bytesToBuffer(channel), bytesToBuffer(message));
    },
  };

  constructor(
    readonly server: MemoryRedisServer = new MemoryRedisServer(),
    options: MemoryRedisOptions = {},
  ) {
    super();
    this.options = { host: 'in-memory', port: 6379, ...options };
    this.clientInfo = server.connect();
  }

  /** Runs a command by name, as ioredis's `call`: replies as UTF-8 text. */
  call(name: string, ...args: Arg[]): Promise<unknown> {
    return this.send(name.toLowerCase(), flatten(args));
  }

  /** As ioredis's `callBuffer`: replies as Buffers of their bytes. */
  callBuffer(name: string, ...args: Arg[]): Promise<unknown> {
    return this.send(name.toLowerCase(), flatten(args), true);
  }

  private send(name: string, args: string[], buffers = false): Promise<unknown> {
    if (this.status !== 'ready') return Promise.reject(closed());
    if (CLIENT_SIDE.has(name)) this.server.count(name);
    this.clientInfo.cmd = name;
    switch (name) {
      case 'client':
        return this.clientCommand(args, buffers);
      case 'blpop':
        return this.blocking(name, buffers, (resolve) =>
          this.server.blpop(args.slice(0, -1), Number(args[args.length - 1]) * 1000, resolve),
        );
      case 'xread':
        return this.blocking(name, buffers, (resolve) => this.server.xread(args, resolve));
      case 'subscribe':
      case 'ssubscribe':
      case 'psubscribe':
        return this.changeSubscriptions(
          name === 'subscribe' ? 'channel' : name === 'ssubscribe' ? 'shard' : 'pattern',
          args,
          true,
        );
      case 'unsubscribe':
      case 'sunsubscribe':
      case 'punsubscribe':
        return this.changeSubscriptions(
          name === 'unsubscribe' ? 'channel' : name === 'sunsubscribe' ? 'shard' : 'pattern',
          args,
          false,
        );
      case 'quit':
        this.end();
        return Promise.resolve('OK');
    }
    let reply: unknown;
    let failure: unknown;
    try {
      reply = toJs(name, this.server.execute(name, args), buffers);
    } catch (err) {
      failure = toJsError(err);
    }
    return answer(reply, failure);
  }

  /** CLIENT LIST | ID | SETNAME | GETNAME. */
  private clientCommand([sub, name]: string[], buffers: boolean): Promise<unknown> {
    const s = sub?.toUpperCase();
    if (s === 'SETNAME') this.clientInfo.name = name;
    const reply =
      s === 'LIST'
        ? this.server.clientList()
        : s === 'ID'
          ? this.clientInfo.id
          : s === 'GETNAME'
            ? this.clientInfo.name || null
            : s === 'SETNAME'
              ? 'OK'
              : undefined;
    return reply === undefined
      ? answer(undefined, toJsError(commandError(`unknown subcommand '${sub}'`)))
      : answer(toJs('client', reply, buffers));
  }

  private blocking(
    name: string,
    buffers: boolean,
    start: (resolve: (reply: MemoryReply) => void) => (() => void) | undefined,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let stop: (() => void) | undefined;
      const done = () => {
        if (stop) this.stops.delete(stop);
        this.pendingRejects.delete(reject);
      };
      this.pendingRejects.add(reject);
      try {
        stop = start((reply) => {
          done();
          void answer(toJs(name, reply, buffers)).then(resolve);
        });
      } catch (err) {
        done();
        return reject(toJsError(err));
      }
      if (stop && this.pendingRejects.has(reject)) this.stops.add(stop);
    });
  }

  private changeSubscriptions(
    kind: 'channel' | 'shard' | 'pattern',
    channels: string[],
    on: boolean,
  ): Promise<number> {
    const targets =
      channels.length > 0 || on
        ? channels
        : [...this.subscriptions].filter(([, k]) => k === kind).map(([c]) => c);
    for (const channel of targets) {
      if (on) {
        this.server.subscribe(this.subscriber, channel, kind);
        this.subscriptions.set(channel, kind);
      } else {
        this.server.unsubscribe(this.subscriber, channel, kind);
        this.subscriptions.delete(channel);
      }
    }
    return Promise.resolve(this.subscriptions.size);
  }

  /** A pipeline: commands queued, sent by `exec()`, answered as `[error, reply]` pairs. */
  pipeline(commands: Array<[string, ...Arg[]]> = []): MemoryPipeline {
    const p = new MemoryPipeline(this);
    for (const [name, ...args] of commands) p.queue(name, args);
    return p;
  }

  /** MULTI … EXEC: run together (nothing runs between them here either). */
  multi(commands: Array<[string, ...Arg[]]> = []): MemoryPipeline {
    return this.pipeline(commands);
  }

  /** @internal runs a pipeline's commands. */
  runQueued(queued: Array<[string, Arg[], boolean]>): Promise<Array<[Error | null, unknown]>> {
    return Promise.all(
      queued.map(([name, args, buffers]) =>
        (buffers ? this.callBuffer(name, ...args) : this.call(name, ...args)).then(
          (reply) => [null, reply] as [null, unknown],
          (err: Error) => [err, undefined] as [Error, undefined],
        ),
      ),
    );
  }

  /** A new client on the same server (ioredis: a new connection with the same options). */
  duplicate(): MemoryRedis {
    return new MemoryRedis(this.server, this.options);
  }

  connect(): Promise<void> {
    return this.status === 'ready'
      ? Promise.resolve()
      : Promise.reject(new Error('Connection is closed.'));
  }

  disconnect(): void {
    this.end();
  }

  /** Ends the client: pending blocking reads reject, subscriptions go, `close` and `end` follow. */
  private end(): void {
    if (this.status === 'end') return;
    this.status = 'end';
    this.server.disconnect(this.clientInfo);
    for (const stop of this.stops) stop();
    this.stops.clear();
    for (const reject of this.pendingRejects) reject(closed());
    this.pendingRejects.clear();
    for (const [channel, kind] of this.subscriptions)
      this.server.unsubscribe(this.subscriber, channel, kind);
    this.subscriptions.clear();
    void Promise.resolve().then(() => {
      this.emit('close');
      this.emit('end');
    });
  }
}

export interface MemoryRedis {
  [command: string]: any;
}

/** A pipeline or MULTI of a `MemoryRedis`. */
export class MemoryPipeline {
  private readonly queued: Array<[string, Arg[], boolean]> = [];

  constructor(private readonly client: MemoryRedis) {}

  get length(): number {
    return this.queued.length;
  }

  /** Queues a command; its reply as Buffers when `buffers` (`pipeline.getBuffer(…)`). */
  queue(name: string, args: Arg[], buffers = false): this {
    this.queued.push([name, args, buffers]);
    return this;
  }

  exec(): Promise<Array<[Error | null, unknown]>> {
    return this.client.runQueued(this.queued.splice(0));
  }
}

export interface MemoryPipeline {
  [command: string]: any;
}

// ioredis's command methods: `client.zadd(…)`, `client.getBuffer(…)`, `pipeline.hset(…)`.
for (const name of [...COMMAND_NAMES, ...CLIENT_SIDE]) {
  (MemoryRedis.prototype as any)[name] ??= function (this: MemoryRedis, ...args: Arg[]) {
    return this.call(name, ...args);
  };
  (MemoryRedis.prototype as any)[`${name}Buffer`] = function (this: MemoryRedis, ...args: Arg[]) {
    return this.callBuffer(name, ...args);
  };
  (MemoryPipeline.prototype as any)[name] = function (this: MemoryPipeline, ...args: Arg[]) {
    return this.queue(name, args);
  };
  (MemoryPipeline.prototype as any)[`${name}Buffer`] = function (
    this: MemoryPipeline,
    ...args: Arg[]
  ) {
    return this.queue(name, args, true);
  };
}
