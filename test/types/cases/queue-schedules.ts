// Type tests of queue schedule options (run by test/types/types.spec.ts): a schedule may name its
// tasks, for a queue served by named handlers. Every `@ts-expect-error` line must be an error.
// Nothing here runs.
import type { QueueSchedule, QueueScheduleOptions, QueueService } from 'nestjs-redis-lock';

export async function daily(queues: QueueService): Promise<string | undefined> {
  const options: QueueScheduleOptions = { cron: '0 6 * * *', name: 'daily', limit: 3 };
  const schedule: QueueSchedule = await queues.schedule('reports', 'daily', options);
  // @ts-expect-error a task name is a string
  await queues.schedule('reports', 'weekly', { cron: '0 6 * * 1', name: 7 });
  return schedule.name;
}
