import {
  COMMANDS,
  streamEntriesAfter,
  streamEntryReply,
  unknownCommand,
  type CommandContext,
} from './memory-commands';
import { MemoryKeyspace } from './memory-keyspace';
import { commandError, MemoryReplyError, OK, type MemoryReply } from './memory-replies';
import { LuaEngine } from './lua-engine';
import { setImmediateUnfaked } from '../../redis/unfaked-ticks';

/** Who receives the messages of a channel: a client of the server. */
export interface MemorySubscriber {
  deliver(
    kind: 'message' | 'smessage' | 'pmessage',
    channel: string,
    message: string,
    pattern?: string,
  ): void;
}

/** A connected client, as CLIENT LIST shows it. */
export interface MemoryClientInfo {
  readonly id: number;
  name: string;
  /** The last command it sent. */
  cmd: string;
}

/** A client waiting in BLPOP or XREAD BLOCK. */
interface Blocked {
  /** The reply once it can be served, else undefined. */
  attempt(): MemoryReply | undefined;
  resolve(reply: MemoryReply): void;
}

const globRegExps = new Map<string, RegExp>();

function patternMatches(pattern: string, channel: string): boolean {
  let re = globRegExps.get(pattern);
  if (!re) {
    re = new RegExp(
      `^${pattern
        .replace(/[.+^${}()|\\/]/g, '\\$&')
        .replace(/\*/g, '.*')
        .replace(/\?/g, '.')}$`,
      's',
    );
    globRegExps.set(pattern, re);
  }
  return re.test(channel);
}

/**
 * One Redis in the test process: keys, scripts (the library's own Lua, run by `LuaEngine`),
 * pub/sub and blocking reads, for the clients (`MemoryRedis`) made on it. Single-threaded like
 * Redis: each command and each script runs to its end before the next. Time is `Date.now()`,
 * so Jest's fake timers move TTLs and TIME; key expiry stands still while a script runs, as in
 * Redis 7. Holds no timer or socket of its own.
 */
export class MemoryRedisServer {
  readonly keys = new MemoryKeyspace();
  private engine?: LuaEngine;
  private readonly channels = new Map<string, Set<MemorySubscriber>>();
  private readonly shardChannels = new Map<string, Set<MemorySubscriber>>();
  private readonly patterns = new Map<string, Set<MemorySubscriber>>();
  private blocked: Blocked[] = [];
  private readonly stats = new Map<string, number>();
  private readonly clients = new Set<MemoryClientInfo>();
  private nextClientId = 1;

  /** Clients connected now (INFO clients). */
  get connectedClients(): number {
    return this.clients.size;
  }

  /** Registers a new client; `disconnect` it when it ends. */
  connect(): MemoryClientInfo {
    const info = { id: this.nextClientId++, name: '', cmd: 'NULL' };
    this.clients.add(info);
    return info;
  }

  disconnect(info: MemoryClientInfo): void {
    this.clients.delete(info);
  }

  /** CLIENT LIST. */
  clientList(): string {
    return [...this.clients]
      .map((c) => `id=${c.id} addr=in-memory:${c.id} name=${c.name} db=0 cmd=${c.cmd}\n`)
      .join('');
  }

  private readonly context: CommandContext = {
    keys: this.keys,
    publish: (channel, message, sharded) => this.publish(channel, message, sharded),
    info: (section) => this.info(section),
    resetStats: () => this.stats.clear(),
  };

  /** The Lua engine, created at the first script (fengari is loaded only then). */
  private lua(): LuaEngine {
    return (this.engine ??= new LuaEngine());
  }

  /**
   * Runs one command (not a blocking or subscribing one) and serves the readers it unblocked.
   * Throws `MemoryReplyError` for an error reply. Arguments and string replies are byte strings,
   * one char per byte (`Buffer.from(text).toString('latin1')`; see memory-bytes.ts): the same as
   * text for ASCII. A `MemoryRedis` client converts them from and to UTF-8 text and Buffers.
   */
  execute(name: string, args: string[]): MemoryReply {
    try {
      return this.dispatch(name.toLowerCase(), args, false);
    } finally {
      this.serveBlocked();
    }
  }

  /** Counts a call of `name` for INFO commandstats (the client's blocking and pub/sub ones). */
  count(name: string): void {
    this.stats.set(name, (this.stats.get(name) ?? 0) + 1);
  }

  private dispatch(name: string, args: string[], inScript: boolean): MemoryReply {
    this.count(name);
    if (name === 'eval' || name === 'evalsha' || name === 'script') {
      if (inScript) throw commandError('This Redis command is not allowed from script');
      return this.scriptCommand(name, args);
    }
    if (name === 'pubsub') return this.pubsub(args);
    const command = COMMANDS[name];
    if (!command) throw unknownCommand(name, args);
    return command(this.context, args);
  }

  private scriptCommand(name: string, args: string[]): MemoryReply {
    if (name === 'script') {
      const sub = args[0]?.toUpperCase();
      if (sub === 'LOAD') return this.lua().load(args[1]);
      if (sub === 'EXISTS') return args.slice(1).map((sha) => (this.engine?.has(sha) ? 1 : 0));
      if (sub === 'FLUSH') return (this.engine?.flush(), OK);
      throw commandError(`unknown subcommand '${args[0]}'`);
    }
    const [body, count, ...rest] = args;
    const n = Number(count);
    if (!Number.isInteger(n) || n < 0)
      throw commandError('value is not an integer or out of range');
    if (n > rest.length) throw commandError("Number of keys can't be greater than number of args");
    const sha = name === 'eval' ? this.lua().load(body) : body.toLowerCase();
    if (name === 'evalsha' && !this.engine?.has(sha))
      throw new MemoryReplyError('NOSCRIPT No matching script. Please use EVAL.');
    return this.keys.frozen(() =>
      this.lua().run(sha, rest.slice(0, n), rest.slice(n), (command) => {
        if (command.length === 0)
          throw commandError('Please specify at least one argument for this redis lib call');
        return this.dispatch(command[0].toLowerCase(), command.slice(1), true);
      }),
    );
  }

  // ------------------------------------------------------------------ blocking reads

  /**
   * BLPOP key… timeout: pops now, or waits until a push (resolves `[key, item]`) or until
   * `timeoutMs` (0: forever; resolves null). Returns a function that stops the wait.
   */
  blpop(keys: string[], timeoutMs: number, resolve: (reply: MemoryReply) => void): () => void {
    return this.block(
      () => {
        for (const key of keys) {
          const list = this.keys.read(key, 'list');
          if (list && list.length > 0) {
            const item = list.shift()!;
            this.keys.dropIfEmpty(key);
            return [key, item];
          }
        }
        return undefined;
      },
      timeoutMs,
      resolve,
    );
  }

  /** XREAD [COUNT n] [BLOCK ms] STREAMS key… id…: as `blpop`, without BLOCK answering at once. */
  xread(args: string[], resolve: (reply: MemoryReply) => void): (() => void) | undefined {
    let count = Infinity;
    let block: number | undefined;
    let i = 0;
    for (; i < args.length; i++) {
      const o = args[i].toUpperCase();
      if (o === 'COUNT') count = Number(args[++i]);
      else if (o === 'BLOCK') block = Number(args[++i]);
      else if (o === 'STREAMS') break;
      else throw commandError('syntax error');
    }
    const rest = args.slice(i + 1);
    if (rest.length === 0 || rest.length % 2)
      throw commandError(
        "Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.",
      );
    const keys = rest.slice(0, rest.length / 2);
    // '$': the last id now, so a BLOCK waits for what is added after the call.
    const ids = rest.slice(rest.length / 2).map((id, j) => {
      if (id !== '$') return id;
      const s = this.keys.read(keys[j], 'stream');
      return s ? `${s.lastMs}-${s.lastSeq}` : '0-0';
    });
    const attempt = (): MemoryReply | undefined => {
      const found = keys
        .map(
          (key, j) =>
            [key, streamEntriesAfter(this.keys.read(key, 'stream'), ids[j], count)] as const,
        )
        .filter(([, entries]) => entries.length > 0)
        .map(([key, entries]) => [key, entries.map(streamEntryReply)] as MemoryReply);
      return found.length > 0 ? found : undefined;
    };
    if (block === undefined) {
      resolve(attempt() ?? null);
      return undefined;
    }
    return this.block(attempt, block, resolve);
  }

  private block(
    attempt: () => MemoryReply | undefined,
    timeoutMs: number,
    resolve: (reply: MemoryReply) => void,
  ): () => void {
    const now = attempt();
    if (now !== undefined) {
      resolve(now);
      return () => undefined;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waiter: Blocked = {
      attempt,
      resolve: (reply) => {
        if (timer) clearTimeout(timer);
        resolve(reply);
      },
    };
    this.blocked.push(waiter);
    const stop = () => {
      if (timer) clearTimeout(timer);
      this.blocked = this.blocked.filter((w) => w !== waiter);
    };
    if (timeoutMs > 0) {
      timer = setTimeout(() => {
        stop();
        resolve(null);
      }, timeoutMs);
    }
    return stop;
  }

  /** Serves the blocked readers (in the order they blocked) that the last command unblocked. */
  private serveBlocked(): void {
    if (this.keys.takeWritten().size === 0 || this.blocked.length === 0) return;
    for (const waiter of [...this.blocked]) {
      const reply = waiter.attempt();
      if (reply === undefined) continue;
      this.blocked = this.blocked.filter((w) => w !== waiter);
      waiter.resolve(reply);
    }
  }

  // ------------------------------------------------------------------ pub/sub

  subscribe(who: MemorySubscriber, channel: string, kind: 'channel' | 'shard' | 'pattern'): void {
    const map = this.registry(kind);
    let set = map.get(channel);
    if (!set) map.set(channel, (set = new Set()));
    set.add(who);
  }

  unsubscribe(who: MemorySubscriber, channel: string, kind: 'channel' | 'shard' | 'pattern'): void {
    const set = this.registry(kind).get(channel);
    set?.delete(who);
    if (set?.size === 0) this.registry(kind).delete(channel);
  }

  private registry(kind: 'channel' | 'shard' | 'pattern') {
    return kind === 'channel'
      ? this.channels
      : kind === 'shard'
        ? this.shardChannels
        : this.patterns;
  }

  /**
   * Sends `message` to the subscribers of `channel`; they receive it in a later turn of the
   * event loop (as from a socket), in publishing order.
   */
  publish(channel: string, message: string, sharded: boolean): number {
    const direct = [...((sharded ? this.shardChannels : this.channels).get(channel) ?? [])];
    const patterned = sharded
      ? []
      : [...this.patterns].flatMap(([pattern, set]) =>
          patternMatches(pattern, channel) ? [...set].map((who) => [pattern, who] as const) : [],
        );
    if (direct.length + patterned.length === 0) return 0;
    setImmediateUnfaked(() => {
      for (const who of direct) who.deliver(sharded ? 'smessage' : 'message', channel, message);
      for (const [pattern, who] of patterned) who.deliver('pmessage', channel, message, pattern);
    });
    return direct.length + patterned.length;
  }

  /** PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB. */
  private pubsub([sub, ...args]: string[]): MemoryReply {
    const s = sub?.toUpperCase();
    const map = s?.startsWith('SHARD') ? this.shardChannels : this.channels;
    if (s === 'NUMSUB' || s === 'SHARDNUMSUB')
      return args.flatMap((c) => [c, map.get(c)?.size ?? 0]);
    if (s === 'CHANNELS' || s === 'SHARDCHANNELS')
      return [...map.keys()].filter((c) => args[0] === undefined || patternMatches(args[0], c));
    if (s === 'NUMPAT') return this.patterns.size;
    throw commandError(`unknown subcommand '${sub}'`);
  }

  // ------------------------------------------------------------------ INFO

  private info(section: string | undefined): string {
    const sections: Record<string, string[]> = {
      server: ['redis_version:7.2.0', 'redis_mode:standalone', 'nestjs_redis_lock_memory:1'],
      clients: [
        `connected_clients:${this.connectedClients}`,
        `blocked_clients:${this.blocked.length}`,
      ],
      memory: ['used_memory:0', 'maxmemory:0', 'maxmemory_policy:noeviction'],
      replication: ['role:master', 'connected_slaves:0'],
      cluster: ['cluster_enabled:0'],
      commandstats: [...this.stats].map(
        ([name, calls]) => `cmdstat_${name}:calls=${calls},usec=0,usec_per_call=0.00`,
      ),
      keyspace: [`db0:keys=${this.keys.keys().length},expires=0,avg_ttl=0`],
    };
    const names =
      section === undefined || section === 'all' || section === 'everything'
        ? Object.keys(sections)
        : [section];
    return (
      names
        .filter((n) => sections[n])
        .map((n) => [`# ${n[0].toUpperCase()}${n.slice(1)}`, ...sections[n]].join('\r\n'))
        .join('\r\n\r\n') + '\r\n'
    );
  }
}
