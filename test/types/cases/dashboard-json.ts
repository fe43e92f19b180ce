// Type tests of a task list's values (run by test/types/types.spec.ts): a value the list read has
// its length in characters, one over 64 KiB only its size in bytes, so a client checks which it
// got. Every `@ts-expect-error` line must be an error. Nothing here runs.
import type { DashboardJson, DashboardTask } from 'nestjs-redis-lock';

/** What a page shows for a task's payload. */
export function payloadCell(task: DashboardTask): string {
  const value: DashboardJson | undefined = task.payload;
  if (!value) return '–';
  if (value.bytes !== undefined) return `${value.bytes.toLocaleString('en')} bytes`;
  // @ts-expect-error `chars` is absent for a value the list did not read
  const length: number = value.chars;
  return value.truncated ? `${value.json}… (${length} characters)` : value.json;
}
