// What the application fixtures run as child processes share: start the app with SIGTERM shutdown
// hooks, say 'closed' once it shut down gracefully, and exit with code 1 on a startup error.
import {
  Injectable,
  type INestApplicationContext,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';

/** A provider that prints 'closed' when the application has shut down (after workers drained). */
@Injectable()
export class SaysClosed implements OnApplicationShutdown {
  onApplicationShutdown(): void {
    console.log('closed');
  }
}

/**
 * Starts `module` (list `SaysClosed` in its providers) as an application context logging errors
 * only, closed by SIGTERM, then runs `ready` with it. Exits with code 1 if either fails.
 */
export function runChildApp(
  module: Type<unknown>,
  ready: (app: INestApplicationContext) => Promise<void> | void,
): void {
  (async () => {
    const app = await NestFactory.createApplicationContext(module, { logger: ['error'] });
    app.enableShutdownHooks(['SIGTERM']);
    await ready(app);
  })().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
