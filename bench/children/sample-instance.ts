/**
 * Entry point of one instance of the sample app (`sample/`) for the flash-sale shape, started by
 * `BenchChild.start(index, 'sample-instance.ts')`. Operation `listen` `{ redisUrl, keyPrefix,
 * databaseUrl }` (the PostgreSQL every instance writes its orders to)
 * starts the app on a free loopback port and answers its base URL; `close` closes it (so does
 * the orchestrator disconnecting).
 */
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import type { INestApplication } from '@nestjs/common';
import { createSampleApp } from '../../sample/sample-app';
import { serveRequests } from '../support/child-server';

let app: INestApplication | undefined;

async function close(): Promise<void> {
  const closing = app;
  app = undefined;
  await closing?.close();
}

serveRequests(
  {
    async listen(config: { redisUrl: string; keyPrefix: string; databaseUrl: string }) {
      await close();
      app = await createSampleApp(config);
      await app.listen(0, '127.0.0.1');
      const { port } = app.getHttpServer().address() as AddressInfo;
      return `http://127.0.0.1:${port}`;
    },
    close,
  },
  close,
);
