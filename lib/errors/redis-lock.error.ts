/**
 * Base class of every error this library throws. Catch it to handle all of them at once;
 * each failure has its own subclass with `name` set to the class name.
 */
export class RedisLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
