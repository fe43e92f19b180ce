import { Body, Controller, Get, Post } from '@nestjs/common';
import { ParsePipe } from '../common/parse.pipe';
import {
  parseAddTasks,
  type AddTasksRequest,
  type AddTasksResult,
  type DeskStatus,
} from './task-desk.dto';
import { TaskDeskService } from './task-desk.service';

/**
 * The pool of tasks:
 * - `POST /tasks` `{ ids: [...] }` → 201 `{ added, ids }`
 * - `GET /tasks` → `{ pool, holders, submitted }`
 */
@Controller('tasks')
export class TasksController {
  constructor(private readonly desk: TaskDeskService) {}

  @Post()
  add(@Body(new ParsePipe(parseAddTasks)) body: AddTasksRequest): Promise<AddTasksResult> {
    return this.desk.addTasks(body.ids);
  }

  @Get()
  status(): Promise<DeskStatus> {
    return this.desk.status();
  }
}
