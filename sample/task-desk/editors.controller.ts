import { Controller, HttpCode, HttpStatus, Param, Post } from '@nestjs/common';
import { WithLock } from '../../lib';
import { IdPipe } from '../common/parse.pipe';
import type { NextTaskResult, SubmitResult } from './task-desk.dto';
import { TaskDeskService } from './task-desk.service';
import { EDITOR_LOCK_TEMPLATE } from './task-desk-keys';

/**
 * One editor's calls run one at a time, on whichever app instance they reach: a call waits up
 * to 2 s for the editor's previous one (then 423 Locked). Its TTL is the module's.
 */
const EDITOR_LOCK = { waitMs: 2_000 } as const;

/**
 * The editors:
 * - `POST /editors/:id/next` → 200 `{ editor, task }` (`task: null` when the pool is empty);
 *   409 while the editor's lease on a task still runs
 * - `POST /editors/:id/submit` → 200 `{ editor, taskId, attempt }`; 409 no task held;
 *   410 the lease ran out and the task went back to the pool
 */
@Controller('editors')
export class EditorsController {
  constructor(private readonly desk: TaskDeskService) {}

  @Post(':id/next')
  @HttpCode(HttpStatus.OK)
  @WithLock(EDITOR_LOCK_TEMPLATE, EDITOR_LOCK)
  async next(@Param('id', new IdPipe('editor')) editor: string): Promise<NextTaskResult> {
    return { editor, task: await this.desk.next(editor) };
  }

  @Post(':id/submit')
  @HttpCode(HttpStatus.OK)
  @WithLock(EDITOR_LOCK_TEMPLATE, EDITOR_LOCK)
  submit(@Param('id', new IdPipe('editor')) editor: string): Promise<SubmitResult> {
    return this.desk.submit(editor);
  }
}
