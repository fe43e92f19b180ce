import { Module } from '@nestjs/common';
import { EditorsController } from './editors.controller';
import { TasksController } from './tasks.controller';
import { TaskDeskService } from './task-desk.service';

/** The task desk: `/tasks` and `/editors` endpoints on the `desk` queue. */
@Module({
  controllers: [TasksController, EditorsController],
  providers: [TaskDeskService],
})
export class TaskDeskModule {}
