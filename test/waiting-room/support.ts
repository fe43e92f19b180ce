import type { Cluster, Redis } from 'ioredis';
import type { WaitingRoomService } from '../../lib';
import { waitingRoomKeys } from '../../lib/waiting-room/waiting-room-store';

/** The keys of room `room` under `prefix` (their roles: lib/waiting-room/scripts/includes/room.lua). */
export function roomKeys(prefix: string, room: string) {
  const [settings, line, seen, passes, channel, leases, parkedBy] = waitingRoomKeys(prefix, room);
  return { settings, line, seen, passes, channel, leases, parkedBy };
}

/**
 * When each visitor was admitted, by Redis (its pass's expiry minus `passTtlMs`), in `visitors`'
 * order; `undefined` for one without a pass.
 */
export async function admissionTimes(
  redis: Redis | Cluster,
  prefix: string,
  room: string,
  visitors: string[],
  passTtlMs: number,
): Promise<(number | undefined)[]> {
  const scores = await redis.zmscore(roomKeys(prefix, room).passes, ...visitors);
  return scores.map((s) => (s === null ? undefined : Number(s) - passTtlMs));
}

/** Pairs (i < j) of `times` (in join order) where the later joiner was admitted strictly first. */
export function inversions(times: number[]): number {
  let count = 0;
  for (let i = 0; i < times.length; i++)
    for (let j = i + 1; j < times.length; j++) if (times[j] < times[i]) count++;
  return count;
}

/** Joins `visitors` one after the other, the i-th on `rooms[i % rooms.length]` (their order is the line's). */
export async function joinInTurn(
  rooms: WaitingRoomService[],
  room: string,
  visitors: string[],
): Promise<void> {
  for (const [i, v] of visitors.entries()) await rooms[i % rooms.length].join(room, v);
}
