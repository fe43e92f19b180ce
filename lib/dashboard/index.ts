export { RedisLockDashboardModule } from './dashboard.module';
export type { RedisLockDashboardOptions } from './dashboard-options';
export type {
  DashboardLocalWaiters,
  DashboardLock,
  DashboardLockEvent,
  DashboardOverview,
  DashboardQueue,
} from './dashboard.service';
