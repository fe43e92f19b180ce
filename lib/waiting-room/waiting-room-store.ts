import { join } from 'node:path';
import { WaitingRoomNotOpenError } from '../errors/waiting-room-not-open.error';
import { checkKeyName } from '../lock/lock-keys';
import { LuaScript } from '../redis/lua-script';
import type { RedisLockConnection } from '../redis/redis-connection';
import { taggedKey } from '../redis/tagged-key';
import { LINE_PRELUDES } from '../waiting/waiting-scripts';
import type { WaitingRoomOptions } from './waiting-room-options';

const ROOM_PRELUDE = join(__dirname, 'scripts', 'includes', 'room.lua');
const script = (name: string) =>
  new LuaScript(
    `waiting room ${name}`,
    join(__dirname, 'scripts', `${name}.lua`),
    ...LINE_PRELUDES,
    ROOM_PRELUDE,
  );

/** The waiting room's Lua scripts, read once per process (their KEYS: scripts/includes/room.lua). */
export const WAITING_ROOM_SCRIPTS = {
  open: script('open'),
  join: script('join'),
  advance: script('advance'),
  presence: script('presence'),
  lease: script('lease'),
  unpark: script('unpark'),
  pass: script('pass'),
};

/** Visitors whose presence one script call marks. */
const PRESENCE_BATCH = 1_000;

/** The room's clock as one reply saw it: Redis now, the next admission's Redis time, the rate. */
export interface RoomClock {
  /** Redis time of the reply, in ms. */
  redisNow: number;
  /** Redis time at which the next visitor may be admitted, in ms. */
  next: number;
  /** `admitPerSecond`. */
  rate: number;
  /** `absentMs`. */
  absent: number;
  /**
   * Redis time of the last admission made by an instance's admission timer, in ms (0: none): the
   * timer calls come `MIN_ADVANCE_GAP_MS` apart from it (room-watch.ts).
   */
  lastCall: number;
}

/** What `join` found. */
export interface JoinReply extends RoomClock {
  admitted: boolean;
  /** Admitted: the pass's ms left; else the position (1 = next). */
  value: number;
  /** The visitor's ticket in line (0 when admitted). */
  ticket: number;
}

/** Where one visitor stands, by `presence`. */
export type Presence =
  { kind: 'waiting'; position: number } | { kind: 'admitted'; passMs: number } | { kind: 'lost' };

/** A message on a room's channel (includes/room.lua: `publish`). */
export interface RoomMessage {
  /** Visitors admitted (empty: the settings changed). */
  a: string[] | Record<string, never>;
  /** Next admission (Redis ms, as text). */
  n: string;
  /** Rate, as text. */
  r: string;
  /** Redis now, ms. */
  t: number;
  /** passTtlMs. */
  p: number;
  /** absentMs. */
  x: number;
  /** `RoomClock.lastCall`. */
  l: number;
  /** Id of the instance whose admission timer's call admitted `a` ('' for any other call). */
  i: string;
}

/**
 * The Redis keys of one room (and its channel, the fifth), all under one hash tag: one Cluster
 * slot. Their roles: scripts/includes/room.lua.
 */
export function waitingRoomKeys(prefix: string, room: string): string[] {
  const base = taggedKey(prefix, 'room', room);
  return ['', ':line', ':seen', ':passes', ':ch', ':leases', ':parkedby'].map((s) => base + s);
}

/** The channel among a room's keys. */
export const CHANNEL = 4;

/** The only user of the waiting room's scripts: keys, ARGV order, replies. */
export class WaitingRoomStore {
  constructor(private readonly connection: RedisLockConnection) {}

  /** Checks a room name (`LockKeyError`) and returns its keys. */
  keys(room: unknown): string[] {
    const name = checkKeyName(room, 'waiting room name');
    return waitingRoomKeys(this.connection.options.keyPrefix, name);
  }

  private get sharded(): string {
    return this.connection.isCluster ? '1' : '0';
  }

  async open(keys: string[], o: Required<WaitingRoomOptions>): Promise<void> {
    await this.connection.run(WAITING_ROOM_SCRIPTS.open, keys, [
      this.sharded,
      String(o.admitPerSecond),
      o.passTtlMs,
      o.absentMs,
    ]);
  }

  async close(keys: string[]): Promise<void> {
    const stored = keys.filter((_, i) => i !== CHANNEL);
    await this.connection.call('DEL (waiting room)', (c) => c.del(...stored));
  }

  /** Joins; with `instance`, parks the visitor on that instance (it waits there). */
  async join(room: string, keys: string[], visitor: string, instance = ''): Promise<JoinReply> {
    const r = await this.run(room, WAITING_ROOM_SCRIPTS.join, keys, [visitor, instance]);
    return { ...clockOf(r), admitted: r[5] === 1, value: Number(r[6]), ticket: Number(r[7]) };
  }

  /** Admits whoever is due, by a call of `instance` (named in the admission message). */
  async advance(room: string, keys: string[], instance: string): Promise<RoomClock> {
    return clockOf(await this.run(room, WAITING_ROOM_SCRIPTS.advance, keys, [instance]));
  }

  /** Renews `instance`'s lease; `held: false` when it had run out (park its visitors again). */
  async lease(
    room: string,
    keys: string[],
    instance: string,
  ): Promise<{ clock: RoomClock; held: boolean }> {
    const r = await this.run(room, WAITING_ROOM_SCRIPTS.lease, keys, [instance]);
    return { clock: clockOf(r), held: r[5] === 1 };
  }

  /** Visitors that stopped waiting on `instance` unadmitted: seen now, no longer parked. */
  async unpark(keys: string[], instance: string, visitors: string[]): Promise<void> {
    for (let i = 0; i < visitors.length; i += PRESENCE_BATCH) {
      const batch = visitors.slice(i, i + PRESENCE_BATCH);
      await this.connection.run(WAITING_ROOM_SCRIPTS.unpark, keys, [
        this.sharded,
        instance,
        ...batch,
      ]);
    }
  }

  /**
   * Parks `visitors` on `instance` again and says where each stands, in batches of 1,000 visitors
   * per script call; resolves with the last reply's clock. A visitor for which `still` is false
   * when its batch is sent is left out (not parked, not in the map).
   */
  async presence(
    room: string,
    keys: string[],
    instance: string,
    visitors: string[],
    still: (visitor: string) => boolean = () => true,
  ): Promise<{ clock: RoomClock; presence: Map<string, Presence> }> {
    const presence = new Map<string, Presence>();
    let clock: RoomClock | undefined;
    for (let i = 0; i === 0 || i < visitors.length; i += PRESENCE_BATCH) {
      const batch = visitors.slice(i, i + PRESENCE_BATCH).filter(still);
      if (i > 0 && batch.length === 0) continue;
      const r = await this.run(room, WAITING_ROOM_SCRIPTS.presence, keys, [instance, ...batch]);
      clock = clockOf(r);
      batch.forEach((visitor, j) => {
        const kind = r[5 + j * 2];
        const value = Number(r[6 + j * 2]);
        presence.set(
          visitor,
          kind === 1
            ? { kind: 'waiting', position: value }
            : kind === 2
              ? { kind: 'admitted', passMs: value }
              : { kind: 'lost' },
        );
      });
    }
    return { clock: clock!, presence };
  }

  /** The visitor's pass's ms left, 0 without a valid pass. */
  async pass(keys: string[], visitor: string): Promise<number> {
    return Number(
      await this.connection.run(WAITING_ROOM_SCRIPTS.pass, keys, [this.sharded, visitor]),
    );
  }

  private async run(
    room: string,
    s: LuaScript,
    keys: string[],
    args: string[],
  ): Promise<unknown[]> {
    const reply = (await this.connection.run(s, keys, [this.sharded, ...args])) as unknown[];
    if (reply[0] === 0) throw new WaitingRoomNotOpenError(room);
    return reply;
  }
}

function clockOf(r: unknown[]): RoomClock {
  return {
    redisNow: Number(r[0]),
    next: Number(r[1]),
    rate: Number(r[2]),
    absent: Number(r[3]),
    lastCall: Number(r[4]),
  };
}

/** The clock a room message carries. */
export function messageClock(m: RoomMessage): RoomClock {
  return { redisNow: m.t, next: Number(m.n), rate: Number(m.r), absent: m.x, lastCall: m.l };
}
