import { Redis } from 'ioredis';
import { connectedReplicas, ReplicaWatch } from '../../lib/redis/replica-watch';
import { waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

/** Resolves once `client` is connected again after a `disconnect(true)`. */
async function reconnect(client: Redis): Promise<void> {
  const ready = new Promise<void>((resolve) => client.once('ready', () => resolve()));
  client.disconnect(true);
  await ready;
}

describe('ReplicaWatch (what Sentinel locks wait for): the most replicas seen per master term', () => {
  let master: RedisServer;
  let replica: RedisServer;
  let client: Redis;
  let admin: { master: Redis; replica: Redis };
  let watch: ReplicaWatch;
  const warnings: string[] = [];

  beforeAll(async () => {
    master = await startRedisServer(['--repl-diskless-sync-delay', '0']);
    replica = await startRedisServer([
      '--replicaof',
      '127.0.0.1',
      String(master.port),
      '--repl-diskless-sync-delay',
      '0',
    ]);
    admin = { master: new Redis(master.url), replica: new Redis(replica.url) };
    await waitFor(
      'the replica to be connected',
      async () => connectedReplicas(await admin.master.info('replication')) === 1,
      20_000,
      50,
    );
    client = new Redis(master.url);
    watch = new ReplicaWatch(client, 2_000, (what) => warnings.push(what));
  }, 60_000);
  afterAll(async () => {
    watch.close();
    client.disconnect();
    admin.master.disconnect();
    admin.replica.disconnect();
    await replica.stop();
    await master.stop();
  });

  it('counts the replicas of the master it is connected to', async () => {
    expect(await watch.replicas()).toBe(1);
  });

  it('a master cut off from its replica keeps needing one, also after a reconnect (same term)', async () => {
    await admin.replica.replicaof('NO', 'ONE');
    await waitFor(
      'the master to lose its replica',
      async () => connectedReplicas(await admin.master.info('replication')) === 0,
      10_000,
      50,
    );
    await reconnect(client);
    expect(await watch.replicas()).toBe(1);
  });

  it('a node promoted again (new term, no replica yet) needs none', async () => {
    // The old master becomes a replica of the other node, then is promoted back: a new
    // replication ID, as after a failover back to it.
    await admin.master.replicaof('127.0.0.1', String(replica.port));
    await waitFor(
      'the old master to replicate',
      async () => (await admin.master.info('replication')).includes('master_link_status:up'),
      20_000,
      50,
    );
    await admin.master.replicaof('NO', 'ONE');
    await reconnect(client);
    expect(await watch.replicas()).toBe(0);
    expect(warnings).toEqual([]);
  });
});
