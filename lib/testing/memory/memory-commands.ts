import type { MemoryKeyspace, MemoryStream, StreamEntry } from './memory-keyspace';
import {
  commandError,
  formatDouble,
  MemoryReplyError,
  MemoryStatus,
  OK,
  type MemoryReply,
} from './memory-replies';
import {
  aboveMin,
  belowMax,
  lexAboveMin,
  lexBelowMax,
  parseLexBound,
  parseScore,
  parseScoreBound,
  type MemorySortedSet,
} from './memory-sorted-set';

/** What a command can reach besides the keys. */
export interface CommandContext {
  readonly keys: MemoryKeyspace;
  /** Delivers a message to the subscribers (after the command or script that sent it). */
  publish(channel: string, message: string, sharded: boolean): number;
  /** Answers to INFO, by section. */
  info(section: string | undefined): string;
  /** CONFIG RESETSTAT. */
  resetStats(): void;
}

/** A command: its arguments and its string replies are byte strings (memory-bytes.ts). */
type Command = (ctx: CommandContext, args: string[]) => MemoryReply;

const int = (text: string | undefined, what = 'value'): number => {
  const n = Number(text);
  if (text === undefined || !/^-?\d+$/.test(text.trim()) || !Number.isSafeInteger(n))
    throw commandError(`${what} is not an integer or out of range`);
  return n;
};

const float = (text: string | undefined): number => {
  const n = text === undefined ? undefined : parseScore(text);
  if (n === undefined) throw commandError('value is not a valid float');
  return n;
};

const syntax = () => commandError('syntax error');

/** Start and stop of a range by index (negative from the end), clipped; undefined if empty. */
function indexRange(start: number, stop: number, length: number): [number, number] | undefined {
  if (start < 0) start = Math.max(0, length + start);
  if (stop < 0) stop = length + stop;
  stop = Math.min(stop, length - 1);
  return start > stop || start >= length ? undefined : [start, stop];
}

/** Options after the fixed arguments, upper-cased, with the index of each. */
const upper = (args: string[]) => args.map((a) => a.toUpperCase());

// ---------------------------------------------------------------- keys and strings

function set(ctx: CommandContext, [key, value, ...rest]: string[]): MemoryReply {
  let nx = false;
  let xx = false;
  let get = false;
  let keepTtl = false;
  let expireAt: number | undefined;
  const opts = upper(rest);
  for (let i = 0; i < opts.length; i++) {
    const o = opts[i];
    if (o === 'NX') nx = true;
    else if (o === 'XX') xx = true;
    else if (o === 'GET') get = true;
    else if (o === 'KEEPTTL') keepTtl = true;
    else if (o === 'PX' || o === 'EX' || o === 'PXAT' || o === 'EXAT') {
      const n = int(rest[++i]);
      if (n <= 0 && (o === 'PX' || o === 'EX'))
        throw commandError("invalid expire time in 'set' command");
      const ms = o === 'EX' || o === 'EXAT' ? n * 1000 : n;
      expireAt = o.endsWith('AT') ? ms : ctx.keys.now() + ms;
    } else throw syntax();
  }
  const old = get ? (ctx.keys.read(key, 'string')?.v ?? null) : undefined;
  const exists = ctx.keys.exists(key);
  if ((nx && exists) || (xx && !exists)) return get ? old! : null;
  ctx.keys.setString(key, value, expireAt, keepTtl);
  return get ? old! : OK;
}

const getString = (ctx: CommandContext, key: string) => ctx.keys.read(key, 'string')?.v ?? null;

function incrBy(ctx: CommandContext, key: string, by: number): number {
  const current = getString(ctx, key);
  const n = current === null ? 0 : int(current);
  const next = n + by;
  const ttl = ctx.keys.pttl(key);
  ctx.keys.setString(key, String(next), undefined, ttl >= 0);
  return next;
}

function expire(ctx: CommandContext, key: string, ms: number): number {
  return ctx.keys.expire(key, ctx.keys.now() + ms) ? 1 : 0;
}

/** A glob of KEYS/SCAN MATCH as a RegExp. */
function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '*') re += '.*';
    else if (c === '?') re += '.';
    else if (c === '\\' && i + 1 < glob.length) re += escape(glob[++i]);
    else if (c === '[') {
      const end = glob.indexOf(']', i + 1);
      if (end < 0) re += '\\[';
      else {
        const body = glob.slice(i + 1, end);
        re += `[${body.startsWith('^') ? '^' + body.slice(1) : body}]`;
        i = end;
      }
    } else re += escape(c);
  }
  return new RegExp(`^${re}$`, 's');
}

const escape = (c: string) => c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

function scan(ctx: CommandContext, args: string[]): MemoryReply {
  // One page holds every key: the cursor is always 0 after it (a valid SCAN reply).
  let match: RegExp | undefined;
  let type: string | undefined;
  const opts = upper(args);
  for (let i = 1; i < args.length; i++) {
    if (opts[i] === 'MATCH') match = globToRegExp(args[++i]);
    else if (opts[i] === 'COUNT') int(args[++i]);
    else if (opts[i] === 'TYPE') type = args[++i].toLowerCase();
    else throw syntax();
  }
  if (args[0] !== '0') return ['0', []];
  const keys = ctx.keys
    .keys()
    .filter((k) => (!match || match.test(k)) && (!type || ctx.keys.typeOf(k) === type));
  return ['0', keys];
}

// ---------------------------------------------------------------- hashes

function hset(ctx: CommandContext, [key, ...pairs]: string[]): number {
  if (pairs.length === 0 || pairs.length % 2)
    throw commandError("wrong number of arguments for 'hset' command");
  const h = ctx.keys.write(key, 'hash');
  let added = 0;
  for (let i = 0; i < pairs.length; i += 2) {
    if (!h.has(pairs[i])) added++;
    h.set(pairs[i], pairs[i + 1]);
  }
  return added;
}

function hrandfield(ctx: CommandContext, [key, count, withValues]: string[]): MemoryReply {
  const h = ctx.keys.read(key, 'hash');
  const fields = h ? [...h.keys()] : [];
  if (count === undefined)
    return fields.length ? fields[Math.floor(Math.random() * fields.length)] : null;
  const n = int(count);
  const picked =
    n >= 0
      ? fields.slice(0, n)
      : Array.from({ length: -n }, (_, i) => fields[i % fields.length]).filter(
          (f) => f !== undefined,
        );
  return withValues?.toUpperCase() === 'WITHVALUES'
    ? picked.flatMap((f) => [f, h!.get(f)!])
    : picked;
}

// ---------------------------------------------------------------- lists

function push(ctx: CommandContext, [key, ...items]: string[], left: boolean): number {
  const list = ctx.keys.write(key, 'list');
  for (const item of items) {
    if (left) list.unshift(item);
    else list.push(item);
  }
  return list.length;
}

function pop(ctx: CommandContext, [key, count]: string[], left: boolean): MemoryReply {
  const list = ctx.keys.read(key, 'list');
  if (!list) return null;
  const n = count === undefined ? 1 : int(count);
  const items = left ? list.splice(0, n) : list.splice(Math.max(0, list.length - n)).reverse();
  ctx.keys.dropIfEmpty(key);
  return count === undefined ? (items[0] ?? null) : items;
}

function lrem(ctx: CommandContext, [key, count, value]: string[]): number {
  const list = ctx.keys.read(key, 'list');
  if (!list) return 0;
  let n = int(count);
  let removed = 0;
  const limit = n === 0 ? Infinity : Math.abs(n);
  const fromEnd = n < 0;
  const indexes = list.map((_, i) => i);
  if (fromEnd) indexes.reverse();
  const drop = new Set<number>();
  for (const i of indexes) {
    if (removed >= limit) break;
    if (list[i] === value) {
      drop.add(i);
      removed++;
    }
  }
  const kept = list.filter((_, i) => !drop.has(i));
  list.length = 0;
  list.push(...kept);
  ctx.keys.dropIfEmpty(key);
  n = removed;
  return n;
}

// ---------------------------------------------------------------- sorted sets

function zadd(ctx: CommandContext, [key, ...rest]: string[]): MemoryReply {
  const flags = new Set<string>();
  let i = 0;
  while (i < rest.length && ['NX', 'XX', 'GT', 'LT', 'CH', 'INCR'].includes(rest[i].toUpperCase()))
    flags.add(rest[i++].toUpperCase());
  const pairs = rest.slice(i);
  if (pairs.length === 0 || pairs.length % 2) throw syntax();
  if (flags.has('NX') && (flags.has('XX') || flags.has('GT') || flags.has('LT')))
    throw commandError('GT, LT, and/or NX options at the same time are not compatible');
  const scores = pairs.filter((_, j) => j % 2 === 0).map(float);
  const z = ctx.keys.write(key, 'zset');
  let changed = 0;
  let incrResult: MemoryReply = null;
  for (let j = 0; j < pairs.length; j += 2) {
    const member = pairs[j + 1];
    const old = z.scores.get(member);
    let score = scores[j / 2];
    if (flags.has('INCR')) score += old ?? 0;
    if (old === undefined ? flags.has('XX') : flags.has('NX')) continue;
    if (old !== undefined && flags.has('GT') && !(score > old)) continue;
    if (old !== undefined && flags.has('LT') && !(score < old)) continue;
    if (old === undefined || old !== score) {
      if (old === undefined || flags.has('CH')) changed++;
      z.set(member, score);
    }
    incrResult = formatDouble(score);
  }
  ctx.keys.dropIfEmpty(key);
  return flags.has('INCR') ? incrResult : changed;
}

function withScores(z: MemorySortedSet, members: readonly string[], scores: boolean): string[] {
  return scores ? members.flatMap((m) => [m, formatDouble(z.scores.get(m)!)]) : [...members];
}

function limitOf(opts: string[], args: string[]): [number, number] | undefined {
  const at = opts.indexOf('LIMIT');
  return at < 0 ? undefined : [int(args[at + 1]), int(args[at + 2])];
}

function applyLimit(members: string[], limit: [number, number] | undefined): string[] {
  if (!limit) return members;
  const [offset, count] = limit;
  return members.slice(offset, count < 0 ? undefined : offset + count);
}

/** ZRANGE key min max [BYSCORE|BYLEX] [REV] [LIMIT o c] [WITHSCORES], and the older forms. */
function zrange(
  ctx: CommandContext,
  args: string[],
  by?: 'SCORE' | 'LEX',
  rev = false,
): MemoryReply {
  const [key, a, b, ...rest] = args;
  const opts = upper(rest);
  if (opts.includes('BYSCORE')) by = 'SCORE';
  if (opts.includes('BYLEX')) by = 'LEX';
  if (opts.includes('REV')) rev = true;
  const scores = opts.includes('WITHSCORES');
  const limit = limitOf(opts, rest);
  const z = ctx.keys.read(key, 'zset');
  if (!z) return [];
  let members: string[];
  if (by === 'SCORE') {
    const [min, max] = (rev ? [b, a] : [a, b]).map(parseScoreBound);
    if (!min || !max) throw commandError('min or max is not a float');
    members = z
      .sorted()
      .filter((m) => aboveMin(z.scores.get(m)!, min) && belowMax(z.scores.get(m)!, max));
    if (rev) members.reverse();
    members = applyLimit(members, limit);
  } else if (by === 'LEX') {
    const [min, max] = (rev ? [b, a] : [a, b]).map(parseLexBound);
    if (!min || !max) throw commandError('min or max not valid string range item');
    members = z.sorted().filter((m) => lexAboveMin(m, min) && lexBelowMax(m, max));
    if (rev) members.reverse();
    members = applyLimit(members, limit);
  } else {
    const all = rev ? [...z.sorted()].reverse() : z.sorted();
    const range = indexRange(int(a), int(b), all.length);
    members = range ? all.slice(range[0], range[1] + 1) : [];
  }
  return withScores(z, members, scores);
}

function zremBy(ctx: CommandContext, key: string, pick: (z: MemorySortedSet) => string[]): number {
  const z = ctx.keys.read(key, 'zset');
  if (!z) return 0;
  const members = pick(z);
  for (const m of members) z.delete(m);
  ctx.keys.dropIfEmpty(key);
  return members.length;
}

function scoreRange(z: MemorySortedSet, minText: string, maxText: string): string[] {
  const min = parseScoreBound(minText);
  const max = parseScoreBound(maxText);
  if (!min || !max) throw commandError('min or max is not a float');
  return z
    .sorted()
    .filter((m) => aboveMin(z.scores.get(m)!, min) && belowMax(z.scores.get(m)!, max));
}

// ---------------------------------------------------------------- streams

function parseStreamId(text: string, defaultSeq: number): [number, number] | undefined {
  if (text === '-') return [0, 0];
  if (text === '+') return [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];
  const m = /^(\d+)(?:-(\d+))?$/.exec(text);
  if (!m) return undefined;
  return [Number(m[1]), m[2] === undefined ? defaultSeq : Number(m[2])];
}

/** -1, 0 or 1 as the id of `e` is before, at or after `[ms, seq]`. */
const compareId = (e: StreamEntry, [ms, seq]: [number, number]) =>
  Math.sign(e.ms - ms) || Math.sign(e.seq - seq);

const entryReply = (e: StreamEntry): MemoryReply => [e.id, [...e.fields]];

function xadd(ctx: CommandContext, [key, ...rest]: string[]): MemoryReply {
  let i = 0;
  let maxLen: number | undefined;
  let noMkStream = false;
  for (;;) {
    const o = rest[i]?.toUpperCase();
    if (o === 'NOMKSTREAM') {
      noMkStream = true;
      i++;
    } else if (o === 'MAXLEN') {
      i++;
      if (rest[i] === '~' || rest[i] === '=') i++;
      maxLen = int(rest[i++]);
    } else break;
  }
  const idText = rest[i++];
  const fields = rest.slice(i);
  if (!idText || fields.length === 0 || fields.length % 2)
    throw commandError("wrong number of arguments for 'xadd' command");
  if (noMkStream && !ctx.keys.exists(key)) return null;
  const s = ctx.keys.write(key, 'stream');
  let ms: number;
  let seq: number;
  if (idText === '*') {
    ms = Math.max(ctx.keys.now(), s.lastMs);
    seq = ms === s.lastMs ? s.lastSeq + 1 : 0;
  } else {
    const id = parseStreamId(idText, 0);
    if (!id) throw commandError('Invalid stream ID specified as stream command argument');
    [ms, seq] = id;
    if (ms < s.lastMs || (ms === s.lastMs && seq <= s.lastSeq && (s.lastMs > 0 || s.lastSeq > 0)))
      throw commandError(
        'The ID specified in XADD is equal or smaller than the target stream top item',
      );
  }
  s.lastMs = ms;
  s.lastSeq = seq;
  const id = `${ms}-${seq}`;
  s.entries.push({ id, ms, seq, fields });
  if (maxLen !== undefined) trimStream(s, maxLen);
  return id;
}

/** Drops the oldest entries of `s` past `maxLen` (its last id stays); how many went. */
function trimStream(s: MemoryStream, maxLen: number): number {
  return s.entries.length > maxLen ? s.entries.splice(0, s.entries.length - maxLen).length : 0;
}

/** `XTRIM key MAXLEN [=|~] n`: keeps the last `n` entries (and the last id given out). */
function xtrim(ctx: CommandContext, [key, strategy, ...rest]: string[]): MemoryReply {
  if (strategy?.toUpperCase() !== 'MAXLEN')
    throw commandError(`XTRIM ${strategy ?? ''}: only MAXLEN is supported by the in-memory Redis`);
  const maxLen = int(rest[0] === '~' || rest[0] === '=' ? rest[1] : rest[0]);
  const s = ctx.keys.read(key, 'stream');
  return s ? trimStream(s, maxLen) : 0;
}

function xrange(ctx: CommandContext, [key, a, b, ...rest]: string[], rev: boolean): MemoryReply {
  const s = ctx.keys.read(key, 'stream');
  if (!s) return [];
  const [startText, endText] = rev ? [b, a] : [a, b];
  const exclusiveStart = startText.startsWith('(');
  const exclusiveEnd = endText.startsWith('(');
  const start = parseStreamId(exclusiveStart ? startText.slice(1) : startText, 0);
  const end = parseStreamId(exclusiveEnd ? endText.slice(1) : endText, Number.MAX_SAFE_INTEGER);
  if (!start || !end) throw commandError('Invalid stream ID specified as stream command argument');
  const count = rest[0]?.toUpperCase() === 'COUNT' ? int(rest[1]) : Infinity;
  let picked = s.entries.filter((e) => {
    const fromStart = compareId(e, start);
    const toEnd = compareId(e, end);
    return (
      (exclusiveStart ? fromStart > 0 : fromStart >= 0) && (exclusiveEnd ? toEnd < 0 : toEnd <= 0)
    );
  });
  if (rev) picked = picked.reverse();
  return picked.slice(0, count).map(entryReply);
}

/** Entries of `s` after `id` (`$`: none yet), at most `count`; a binary search (ids ascend). */
export function streamEntriesAfter(
  s: MemoryStream | undefined,
  id: string,
  count: number,
): StreamEntry[] {
  if (!s || id === '$') return [];
  const after = parseStreamId(id, 0);
  if (!after) throw commandError('Invalid stream ID specified as stream command argument');
  let lo = 0;
  let hi = s.entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareId(s.entries[mid], after) > 0) hi = mid;
    else lo = mid + 1;
  }
  return s.entries.slice(lo, lo + count);
}

export { entryReply as streamEntryReply };

// ---------------------------------------------------------------- the table

const hashOf = (ctx: CommandContext, key: string) => ctx.keys.read(key, 'hash');
const setOf = (ctx: CommandContext, key: string) => ctx.keys.read(key, 'set');

/** The commands of the in-memory Redis, by lower-case name. */
export const COMMANDS: Record<string, Command> = {
  ping: (_, [message]) => (message === undefined ? new MemoryStatus('PONG') : message),
  echo: (_, [message]) => message,
  time: (ctx) => ctx.keys.time(),
  info: (ctx, [section]) => ctx.info(section?.toLowerCase()),
  config: (ctx, [sub, name]) => {
    const s = sub?.toUpperCase();
    if (s === 'GET') {
      const known: Record<string, string> = { 'maxmemory-policy': 'noeviction', maxmemory: '0' };
      const re = globToRegExp(name ?? '');
      return Object.entries(known)
        .filter(([k]) => re.test(k))
        .flat();
    }
    if (s === 'RESETSTAT') {
      ctx.resetStats();
      return OK;
    }
    if (s === 'SET') return OK;
    throw commandError(`unknown subcommand '${sub}'`);
  },
  wait: () => 0,
  dbsize: (ctx) => ctx.keys.keys().length,
  flushall: (ctx) => (ctx.keys.flush(), OK),
  flushdb: (ctx) => (ctx.keys.flush(), OK),
  keys: (ctx, [pattern]) => ctx.keys.keys().filter((k) => globToRegExp(pattern).test(k)),
  scan,
  type: (ctx, [key]) => new MemoryStatus(ctx.keys.typeOf(key)),
  exists: (ctx, keys) => keys.filter((k) => ctx.keys.exists(k)).length,
  del: (ctx, keys) => keys.filter((k) => ctx.keys.delete(k)).length,
  unlink: (ctx, keys) => keys.filter((k) => ctx.keys.delete(k)).length,
  pexpire: (ctx, [key, ms]) => expire(ctx, key, int(ms)),
  expire: (ctx, [key, s]) => expire(ctx, key, int(s) * 1000),
  pexpireat: (ctx, [key, at]) => (ctx.keys.expire(key, int(at)) ? 1 : 0),
  persist: (ctx, [key]) => (ctx.keys.pttl(key) >= 0 && ctx.keys.expire(key, undefined) ? 1 : 0),
  pttl: (ctx, [key]) => ctx.keys.pttl(key),
  ttl: (ctx, [key]) => {
    const ms = ctx.keys.pttl(key);
    return ms < 0 ? ms : Math.round(ms / 1000);
  },
  dump: (ctx, [key]) => ctx.keys.dump(key),
  get: (ctx, [key]) => getString(ctx, key),
  mget: (ctx, keys) =>
    keys.map((k) => (ctx.keys.typeOf(k) === 'string' ? getString(ctx, k) : null)),
  set,
  setnx: (ctx, [key, value]) => (set(ctx, [key, value, 'NX']) === null ? 0 : 1),
  psetex: (ctx, [key, ms, value]) => set(ctx, [key, value, 'PX', ms]),
  setex: (ctx, [key, s, value]) => set(ctx, [key, value, 'EX', s]),
  mset: (ctx, pairs) => {
    for (let i = 0; i < pairs.length; i += 2) ctx.keys.setString(pairs[i], pairs[i + 1]);
    return OK;
  },
  getdel: (ctx, [key]) => {
    const v = getString(ctx, key);
    ctx.keys.delete(key);
    return v;
  },
  incr: (ctx, [key]) => incrBy(ctx, key, 1),
  decr: (ctx, [key]) => incrBy(ctx, key, -1),
  incrby: (ctx, [key, by]) => incrBy(ctx, key, int(by)),
  decrby: (ctx, [key, by]) => incrBy(ctx, key, -int(by)),
  // Values are byte strings (memory-bytes.ts): their length is their size in bytes.
  strlen: (ctx, [key]) => (getString(ctx, key) ?? '').length,

  hget: (ctx, [key, field]) => hashOf(ctx, key)?.get(field) ?? null,
  hmget: (ctx, [key, ...fields]) => fields.map((f) => hashOf(ctx, key)?.get(f) ?? null),
  hset,
  hmset: (ctx, args) => (hset(ctx, args), OK),
  hsetnx: (ctx, [key, field, value]) => {
    if (hashOf(ctx, key)?.has(field)) return 0;
    ctx.keys.write(key, 'hash').set(field, value);
    return 1;
  },
  hdel: (ctx, [key, ...fields]) => {
    const h = hashOf(ctx, key);
    const n = h ? fields.filter((f) => h.delete(f)).length : 0;
    ctx.keys.dropIfEmpty(key);
    return n;
  },
  hgetall: (ctx, [key]) => [...(hashOf(ctx, key) ?? new Map<string, string>())].flat(),
  hkeys: (ctx, [key]) => [...(hashOf(ctx, key)?.keys() ?? [])],
  hvals: (ctx, [key]) => [...(hashOf(ctx, key)?.values() ?? [])],
  hlen: (ctx, [key]) => hashOf(ctx, key)?.size ?? 0,
  hstrlen: (ctx, [key, field]) => hashOf(ctx, key)?.get(field)?.length ?? 0,
  hexists: (ctx, [key, field]) => (hashOf(ctx, key)?.has(field) ? 1 : 0),
  hincrby: (ctx, [key, field, by]) => {
    const h = ctx.keys.write(key, 'hash');
    const current = h.get(field);
    const next = (current === undefined ? 0 : int(current, 'hash value')) + int(by);
    h.set(field, String(next));
    return next;
  },
  hincrbyfloat: (ctx, [key, field, by]) => {
    const h = ctx.keys.write(key, 'hash');
    const next = Number(h.get(field) ?? 0) + float(by);
    h.set(field, formatDouble(next));
    return formatDouble(next);
  },
  hrandfield,

  lpush: (ctx, args) => push(ctx, args, true),
  rpush: (ctx, args) => push(ctx, args, false),
  lpop: (ctx, args) => pop(ctx, args, true),
  rpop: (ctx, args) => pop(ctx, args, false),
  llen: (ctx, [key]) => ctx.keys.read(key, 'list')?.length ?? 0,
  lindex: (ctx, [key, index]) => {
    const list = ctx.keys.read(key, 'list') ?? [];
    const i = int(index);
    return list[i < 0 ? list.length + i : i] ?? null;
  },
  lrange: (ctx, [key, start, stop]) => {
    const list = ctx.keys.read(key, 'list') ?? [];
    const range = indexRange(int(start), int(stop), list.length);
    return range ? list.slice(range[0], range[1] + 1) : [];
  },
  ltrim: (ctx, [key, start, stop]) => {
    const list = ctx.keys.read(key, 'list');
    if (!list) return OK;
    const range = indexRange(int(start), int(stop), list.length);
    const kept = range ? list.slice(range[0], range[1] + 1) : [];
    list.length = 0;
    list.push(...kept);
    ctx.keys.dropIfEmpty(key);
    return OK;
  },
  lrem,

  sadd: (ctx, [key, ...members]) => {
    const s = ctx.keys.write(key, 'set');
    let added = 0;
    for (const m of members) {
      if (s.has(m)) continue;
      s.add(m);
      added++;
    }
    return added;
  },
  srem: (ctx, [key, ...members]) => {
    const s = setOf(ctx, key);
    const n = s ? members.filter((m) => s.delete(m)).length : 0;
    ctx.keys.dropIfEmpty(key);
    return n;
  },
  smembers: (ctx, [key]) => [...(setOf(ctx, key) ?? [])],
  sismember: (ctx, [key, member]) => (setOf(ctx, key)?.has(member) ? 1 : 0),
  scard: (ctx, [key]) => setOf(ctx, key)?.size ?? 0,

  zadd,
  zincrby: (ctx, [key, by, member]) => zadd(ctx, [key, 'INCR', by, member]),
  zrem: (ctx, [key, ...members]) => zremBy(ctx, key, (z) => members.filter((m) => z.scores.has(m))),
  zscore: (ctx, [key, member]) => {
    const s = ctx.keys.read(key, 'zset')?.scores.get(member);
    return s === undefined ? null : formatDouble(s);
  },
  zmscore: (ctx, [key, ...members]) =>
    members.map((m) => {
      const s = ctx.keys.read(key, 'zset')?.scores.get(m);
      return s === undefined ? null : formatDouble(s);
    }),
  zcard: (ctx, [key]) => ctx.keys.read(key, 'zset')?.size ?? 0,
  zrank: (ctx, [key, member]) => {
    const r = ctx.keys.read(key, 'zset')?.rank(member) ?? -1;
    return r < 0 ? null : r;
  },
  zcount: (ctx, [key, min, max]) => {
    const z = ctx.keys.read(key, 'zset');
    return z ? scoreRange(z, min, max).length : 0;
  },
  zrange: (ctx, args) => zrange(ctx, args),
  zrevrange: (ctx, args) => zrange(ctx, args, undefined, true),
  zrangebyscore: (ctx, args) => zrange(ctx, args, 'SCORE'),
  zrevrangebyscore: (ctx, args) => zrange(ctx, args, 'SCORE', true),
  zrangebylex: (ctx, args) => zrange(ctx, args, 'LEX'),
  zpopmin: (ctx, [key, count]) => {
    const z = ctx.keys.read(key, 'zset');
    if (!z) return [];
    const popped = z.sorted().slice(0, count === undefined ? 1 : Math.max(0, int(count)));
    const reply = popped.flatMap((m) => [m, formatDouble(z.scores.get(m)!)]);
    for (const m of popped) z.delete(m);
    ctx.keys.dropIfEmpty(key);
    return reply;
  },
  zremrangebyscore: (ctx, [key, min, max]) => zremBy(ctx, key, (z) => scoreRange(z, min, max)),
  zremrangebyrank: (ctx, [key, start, stop]) =>
    zremBy(ctx, key, (z) => {
      const all = z.sorted();
      const range = indexRange(int(start), int(stop), all.length);
      return range ? all.slice(range[0], range[1] + 1) : [];
    }),

  xadd,
  xlen: (ctx, [key]) => ctx.keys.read(key, 'stream')?.entries.length ?? 0,
  xrange: (ctx, args) => xrange(ctx, args, false),
  xrevrange: (ctx, args) => xrange(ctx, args, true),
  xtrim,
  xdel: (ctx, [key, ...ids]) => {
    const s = ctx.keys.read(key, 'stream');
    if (!s) return 0;
    const before = s.entries.length;
    s.entries = s.entries.filter((e) => !ids.includes(e.id));
    return before - s.entries.length;
  },

  publish: (ctx, [channel, message]) => ctx.publish(channel, message, false),
  spublish: (ctx, [channel, message]) => ctx.publish(channel, message, true),
};

/** Raised for a command the in-memory Redis does not implement. */
export function unknownCommand(name: string, args: string[]): MemoryReplyError {
  return commandError(
    `unknown command '${name}', with args beginning with: ${args
      .slice(0, 3)
      .map((a) => `'${a}'`)
      .join(
        ' ',
      )} (nestjs-redis-lock/testing: the in-memory Redis implements what the library uses)`,
  );
}
