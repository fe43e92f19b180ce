export { LockInterceptor } from './lock.interceptor';
