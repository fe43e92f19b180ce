import { Injectable } from '@nestjs/common';
import { RedisLockConnection } from '../redis/redis-connection';

/** The Redis task queue (issue: QueueService). */
@Injectable()
export class QueueService {
  constructor(private readonly connection: RedisLockConnection) {}
}
