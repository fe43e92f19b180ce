import { RedisCommandError } from './redis-command.error';

/**
 * Redis did not answer in time, or the connection is down. The outcome of the command is unknown:
 * a lock it may have taken expires by its TTL.
 */
export class RedisUnavailableError extends RedisCommandError {}
