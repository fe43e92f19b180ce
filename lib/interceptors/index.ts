export { LockInterceptor, type LockedResponseBody } from './lock.interceptor';
