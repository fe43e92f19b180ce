// `npm run sample`: the flash sale and the task desk on REDIS_URL, or on a private redis-server
// started here (and stopped with the app on Ctrl-C / SIGTERM); the orders in the PostgreSQL at
// DATABASE_URL, or in an embedded one (pglite, in memory). See docs/sample.md.
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { startRedisServer, type RedisServer } from '../scripts/redis-server';
import { loadSampleConfig, redactRedisUrl } from './config/sample-config';
import { OrdersDatabase } from './database/orders-database';
import { createSampleApp } from './sample-app';
import { tryItText } from './try-it';

async function main(): Promise<void> {
  const env = { ...process.env };
  let server: RedisServer | undefined;
  if (!env.REDIS_URL && !env.REDIS_CLUSTER_NODES && !env.REDIS_SENTINELS) {
    server = await startRedisServer();
    env.REDIS_URL = server.url;
    // startRedisServer kills its server when this process exits: after the app has closed.
    process.once('exit', () => console.log(`stopped the private redis-server at ${server!.url}`));
  }
  const config = loadSampleConfig(env);
  const app = await createSampleApp(config);
  // On SIGINT/SIGTERM: release locks, drain the queue workers, close Redis connections, exit.
  app.enableShutdownHooks(['SIGINT', 'SIGTERM'], { useProcessExit: true });
  await app.init();
  const database = app.get(OrdersDatabase);
  await database.ready();
  await app.listen(config.port, config.host);

  const { port } = app.getHttpServer().address() as AddressInfo;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const baseUrl = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const redis = server
    ? `a private redis-server at ${config.redisUrl} (set REDIS_URL to use yours)`
    : config.redisClusterNodes
      ? `Cluster ${config.redisClusterNodes.map((n) => `${n.host}:${n.port}`).join(',')}`
      : config.redisSentinels
        ? `Sentinel ${config.redisSentinelName} at ${config.redisSentinels.map((n) => `${n.host}:${n.port}`).join(',')}`
        : redactRedisUrl(config.redisUrl);
  const orders = config.databaseUrl
    ? database.description
    : `${database.description} (set DATABASE_URL to use your PostgreSQL)`;
  console.log(`sample listening on ${baseUrl}, Redis: ${redis}; Ctrl-C stops it`);
  console.log(`orders: ${orders}`);
  console.log(`dashboard (locks and queues, live): ${baseUrl}/redis-lock\n`);
  console.log(tryItText(baseUrl, config.deskLeaseMs));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
