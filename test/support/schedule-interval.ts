import { applyDecorators, SetMetadata } from '@nestjs/common';

/**
 * The metadata `@Interval(ms)` of @nestjs/schedule sets (its 12.x is an ES module, which Jest
 * cannot load; the child-process test uses the real decorators).
 */
export const Interval = (ms: number) =>
  applyDecorators(
    SetMetadata('SCHEDULE_INTERVAL_OPTIONS', { timeout: ms }),
    SetMetadata('SCHEDULER_TYPE', 3),
  );
