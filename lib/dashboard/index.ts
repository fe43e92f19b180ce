export { RedisLockDashboardModule } from './dashboard.module';
export type { RedisLockDashboardOptions } from './dashboard-options';
export type {
  DashboardCancelReply,
  DashboardJson,
  DashboardLocalWaiters,
  DashboardLock,
  DashboardLockEvent,
  DashboardOverview,
  DashboardQueue,
  DashboardTask,
} from './dashboard.service';
