import { Redis } from 'ioredis';
import { PubSubHub } from '../../lib/redis/pubsub-hub';
import { redisClient, waitFor } from '../support/helpers';
import { startRedisServer, type RedisServer } from '../support/redis-server';

describe('PubSubHub on one Redis: a subscription that a reconnect interrupted', () => {
  let server: RedisServer;
  let redis: Redis;

  beforeAll(async () => {
    // A server of its own: the test cuts every pub/sub connection of it.
    server = await startRedisServer();
    redis = redisClient(server.url);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  const subscribers = async (channel: string) =>
    Number(((await redis.call('PUBSUB', 'NUMSUB', channel)) as [string, number])[1]);

  it('is subscribed again after the subscriber reconnects, and its listeners are told once (messages published meanwhile were lost)', async () => {
    const hub = new PubSubHub(() => new Redis(server.url), false, 1_000);
    try {
      const heard: string[] = [];
      let resubscribed = 0;
      const stop = await hub.listen(
        'reconnect:ch',
        (m) => heard.push(m),
        () => resubscribed++,
      );
      // A second listener of the same channel shares the subscription; it is told too.
      let second = 0;
      await hub.listen(
        'reconnect:ch',
        () => undefined,
        () => second++,
      );
      expect(await subscribers('reconnect:ch')).toBe(1);

      await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
      await waitFor('the listeners told', () => resubscribed > 0 && second > 0, 10_000, 10);
      expect(await subscribers('reconnect:ch')).toBe(1);
      await redis.publish('reconnect:ch', 'after');
      await waitFor('the message heard', () => heard.includes('after'));
      expect([resubscribed, second]).toEqual([1, 1]);
      stop();
    } finally {
      hub.close();
    }
  });
});
