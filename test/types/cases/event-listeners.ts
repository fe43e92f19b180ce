// Type tests of `RedisLockEvents` listeners (run by test/types/types.spec.ts): a listener may be
// async (a rejection is logged as a throw is), and one that returns a value (`push`) still
// compiles. Every `@ts-expect-error` line must be an error. Nothing here runs.
import type { RedisLockEvents, RedisLockListener, TaskFailedEvent } from 'nestjs-redis-lock';

declare function page(message: string): Promise<void>;

export function listen(events: RedisLockEvents): void {
  const dead: TaskFailedEvent[] = [];
  events.on('task.dead', async ({ queue, id }) => page(`${queue}/${id} died`));
  events.once('task.dead', async ({ queue, id }) => {
    await page(`${queue}/${id} died`);
  });
  events.onAny(async (name) => page(name));
  events.on('task.dead', (e) => dead.push(e));
  // @ts-expect-error a task.dead payload has no `keys`
  events.on('task.dead', async (e) => page(e.keys.join()));
}

export const pager: RedisLockListener<'task.dead'> = async ({ id, error }) =>
  page(`${id}: ${String(error)}`);
