import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { Cluster } from 'ioredis';
import { WaitingRoomService } from '../../lib';
import { clusterKeySlot } from '../../lib/redis/cluster-slot';
import { createLockApp, uniquePrefix, waitFor } from '../support/helpers';
import { startRedisCluster, type RedisClusterProcesses } from '../support/redis-cluster';
import { admissionTimes, inversions, joinInTurn, roomKeys } from './support';

describe('WaitingRoomService on a Redis Cluster (3 masters)', () => {
  const prefix = uniquePrefix('room-cluster');
  let cluster: RedisClusterProcesses;
  let apps: INestApplicationContext[];
  let rooms: WaitingRoomService[];
  let direct: Cluster;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3, replicas: 0 });
    apps = await Promise.all(
      [0, 1, 2].map(() =>
        createLockApp({ redis: { cluster: cluster.startupNodes }, keyPrefix: prefix }),
      ),
    );
    rooms = apps.map((app) => app.get(WaitingRoomService));
    direct = new Cluster(cluster.startupNodes);
  }, 60_000);
  afterAll(async () => {
    direct?.disconnect();
    await Promise.all((apps ?? []).map((app) => app.close()));
    await cluster?.stop();
  });

  it.each(['sale', '{shop}:sale', 'a}b'])(
    "room '%s': keys in one slot; 30 visitors on 3 instances admitted in join order (sharded pub/sub)",
    async (room) => {
      const keys = [
        ...Object.values(roomKeys(prefix, room)),
        `${roomKeys(prefix, room).settings}:parkedz:x`,
      ];
      expect(new Set(keys.map(clusterKeySlot)).size).toBe(1);
      const passTtlMs = 60_000;
      await rooms[0].open(room, { admitPerSecond: 0, passTtlMs });
      const visitors = Array.from({ length: 30 }, (_, i) => `v${i}`);
      await joinInTurn(rooms, room, visitors);
      const waits = visitors.map((v, i) => rooms[i % 3].wait(room, v, { waitMs: 30_000 }));
      await waitFor(
        '30 parked visitors',
        () => rooms.reduce((n, r) => n + r.localWaiters(room), 0) === 30,
      );
      await rooms[2].open(room, { admitPerSecond: 50, passTtlMs });
      const statuses = await Promise.all(waits);
      expect(statuses.every((s) => s.admitted)).toBe(true);
      const times = await admissionTimes(direct, prefix, room, visitors, passTtlMs);
      expect(times.every((t) => t !== undefined)).toBe(true);
      expect(inversions(times as number[])).toBe(0);
      expect(await rooms[1].hasPass(room, 'v29')).toBe(true);
    },
  );
});
