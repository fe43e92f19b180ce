import { Redis } from 'ioredis';

interface Countable {
  sendCommand(command: unknown, stream?: { isPipeline?: boolean }, ...rest: unknown[]): unknown;
}

const uncounted = new WeakSet<object>();
const seenPipelines = new WeakSet<object>();
let requests = 0;
let installed = false;

/**
 * Counts the requests every ioredis client of this process sends to Redis, so that each shape can
 * report "Redis requests per operation" for every library alike (all of them use this process's
 * single copy of ioredis, created by the adapters). A pipeline or MULTI block counts once: it is
 * one round trip. Commands that Lua scripts run inside Redis are not requests and are not
 * counted. Idempotent.
 */
export function installRequestCounter(): void {
  if (installed) return;
  installed = true;
  const proto = Redis.prototype as unknown as Countable;
  const send = proto.sendCommand;
  proto.sendCommand = function (this: object, command, stream, ...rest) {
    if (!uncounted.has(this)) {
      if (stream?.isPipeline) {
        if (!seenPipelines.has(stream)) {
          seenPipelines.add(stream);
          requests++;
        }
      } else {
        requests++;
      }
    }
    return send.call(this, command, stream, ...rest);
  };
}

/** Excludes a client the harness itself uses (markers, flushing) from the count. */
export function uncountedClient(client: Redis): Redis {
  uncounted.add(client);
  return client;
}

/** Requests sent so far by counted clients of this process. */
export function requestCount(): number {
  return requests;
}
