export { RedisLockDashboardModule } from './dashboard.module';
export type { RedisLockDashboardOptions } from './dashboard-options';
export type {
  DashboardLock,
  DashboardLockEvent,
  DashboardOverview,
  DashboardQueue,
} from './dashboard.service';
