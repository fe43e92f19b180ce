export { QueueService } from './queue.service';
