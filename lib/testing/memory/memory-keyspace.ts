import { MemorySortedSet } from './memory-sorted-set';
import { wrongType } from './memory-replies';

/** One entry of a stream: its id and its field/value pairs. */
export interface StreamEntry {
  id: string;
  ms: number;
  seq: number;
  fields: string[];
}

/** A stream: entries in id order and the last id given out. */
export interface MemoryStream {
  entries: StreamEntry[];
  lastMs: number;
  lastSeq: number;
}

/**
 * The value types of the in-memory Redis, by the name `TYPE` answers. Every key, value, field
 * and member is a byte string (memory-bytes.ts).
 */
export interface ValueTypes {
  string: { v: string };
  hash: Map<string, string>;
  list: string[];
  set: Set<string>;
  zset: MemorySortedSet;
  stream: MemoryStream;
}

export type TypeName = keyof ValueTypes;

interface Entry {
  type: TypeName;
  value: ValueTypes[TypeName];
  /** Epoch ms at which the key expires (`Date.now()`, so Jest's fake timers move it). */
  expireAt?: number;
}

const EMPTY: { [T in TypeName]: () => ValueTypes[T] } = {
  string: () => ({ v: '' }),
  hash: () => new Map(),
  list: () => [],
  set: () => new Set(),
  zset: () => new MemorySortedSet(),
  stream: () => ({ entries: [], lastMs: 0, lastSeq: 0 }),
};

/**
 * The keys of the in-memory Redis. A key past its expiry is gone at the next access (Redis's
 * lazy expiry; its active expiry only frees memory). The clock is `Date.now()`, stopped while a
 * script runs (`frozen`).
 */
export class MemoryKeyspace {
  private readonly entries = new Map<string, Entry>();
  /** Keys of lists and streams written since `takeWritten()` (to serve blocked readers). */
  private written = new Set<string>();

  /** The millisecond of the last `time()`, and how many µs of it were handed out. */
  private readonly lastTime = { ms: -1, us: 0 };

  /** While a script runs: the time its keys expire by (see `frozen`). */
  private frozenAt?: number;

  /** The time keys expire by: `Date.now()`, or the start of the script running. */
  now(): number {
    return this.frozenAt ?? Date.now();
  }

  /**
   * Runs `fn` (a script) with the clock of key expiry stopped at its start, as Redis 7 does: a key
   * a script read as live stays live until it ends. Else a `SET ... KEEPTTL` on a key that ran
   * out between the script's `GET` and that `SET` wrote it without a TTL, for good.
   */
  frozen<T>(fn: () => T): T {
    const outer = this.frozenAt;
    this.frozenAt ??= Date.now();
    try {
      return fn();
    } finally {
      this.frozenAt = outer;
    }
  }

  /**
   * TIME: seconds and microseconds. The microseconds within a millisecond are 0 for the first call
   * in it, then one more per call (up to 999), as a real clock moves between two calls. `Date.now()`
   * (and a fake clock that stands still) has whole milliseconds only; without this, two grants in
   * one millisecond saw the same time, which a real Redis never shows (the lock's fence then takes
   * its slower path). Counted per in-memory server, as each Redis has its own clock.
   */
  time(): [string, string] {
    // The real clock, also in a script (Redis's TIME is not frozen).
    const ms = Date.now();
    if (this.lastTime.ms !== ms) {
      this.lastTime.ms = ms;
      this.lastTime.us = 0;
    } else if (this.lastTime.us < 999) {
      this.lastTime.us++;
    }
    return [String(Math.floor(ms / 1000)), String((ms % 1000) * 1000 + this.lastTime.us)];
  }

  private entry(key: string): Entry | undefined {
    const e = this.entries.get(key);
    if (e?.expireAt !== undefined && e.expireAt <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return e;
  }

  exists(key: string): boolean {
    return this.entry(key) !== undefined;
  }

  typeOf(key: string): TypeName | 'none' {
    return this.entry(key)?.type ?? 'none';
  }

  /** The value of `key` if it holds a `type`; undefined if absent; WRONGTYPE otherwise. */
  read<T extends TypeName>(key: string, type: T): ValueTypes[T] | undefined {
    const e = this.entry(key);
    if (!e) return undefined;
    if (e.type !== type) throw wrongType();
    return e.value as ValueTypes[T];
  }

  /** The value of `key`, created empty when absent; WRONGTYPE if it holds another type. */
  write<T extends TypeName>(key: string, type: T): ValueTypes[T] {
    const found = this.read(key, type);
    if (type === 'list' || type === 'stream') this.written.add(key);
    if (found) return found;
    const value = EMPTY[type]();
    this.entries.set(key, { type, value });
    return value as ValueTypes[T];
  }

  /** Sets a string, keeping the TTL only when `keepTtl`. */
  setString(key: string, value: string, expireAt?: number, keepTtl = false): void {
    const old = keepTtl ? this.entry(key)?.expireAt : undefined;
    this.entries.set(key, { type: 'string', value: { v: value }, expireAt: expireAt ?? old });
  }

  /** Deletes `key` when its container is empty (Redis never keeps an empty hash, list, set…). */
  dropIfEmpty(key: string): void {
    const e = this.entries.get(key);
    if (!e || e.type === 'string' || e.type === 'stream') return;
    const size = (e.value as { size?: number; length?: number }).size;
    const length = (e.value as { length?: number }).length;
    if ((size ?? length) === 0) this.entries.delete(key);
  }

  delete(key: string): boolean {
    const had = this.exists(key);
    this.entries.delete(key);
    return had;
  }

  /** Sets the expiry of an existing key (undefined: persist); false when the key is absent. */
  expire(key: string, at: number | undefined): boolean {
    const e = this.entry(key);
    if (!e) return false;
    e.expireAt = at;
    if (at !== undefined && at <= this.now()) this.entries.delete(key);
    return true;
  }

  /** ms to live: -2 absent, -1 no expiry. */
  pttl(key: string): number {
    const e = this.entry(key);
    if (!e) return -2;
    return e.expireAt === undefined ? -1 : e.expireAt - this.now();
  }

  /**
   * A serialization of the value of `key` (DUMP: not Redis's format, but equal for equal values,
   * so a test can compare snapshots); null when absent.
   */
  dump(key: string): string | null {
    const e = this.entry(key);
    if (!e) return null;
    const v = e.value as unknown;
    const plain =
      e.type === 'string'
        ? (v as { v: string }).v
        : e.type === 'hash'
          ? [...(v as Map<string, string>)].sort()
          : e.type === 'set'
            ? [...(v as Set<string>)].sort()
            : e.type === 'zset'
              ? [...(v as MemorySortedSet).scores].sort()
              : v;
    return JSON.stringify([e.type, plain]);
  }

  /** Every live key. */
  keys(): string[] {
    return [...this.entries.keys()].filter((k) => this.exists(k));
  }

  flush(): void {
    this.entries.clear();
  }

  /** Lists and streams written since the last call. */
  takeWritten(): Set<string> {
    const w = this.written;
    this.written = new Set();
    return w;
  }
}
