// The part of autocannon's API that sample:load uses (autocannon ships no type declarations).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      /** Called before each request is sent; returns the request to send. */
      setupRequest?: (request: Request, context: Record<string, unknown>) => Request;
    }

    interface Options {
      url: string;
      connections?: number;
      /** Requests to send in all (overrides `duration`). */
      amount?: number;
      /** Seconds to run (when no `amount` is given). */
      duration?: number;
      /** Seconds to wait for a response. */
      timeout?: number;
      requests?: Request[];
    }

    /** Percentiles of a statistic (latency in ms, requests per second). */
    interface Histogram {
      average: number;
      stddev: number;
      min: number;
      max: number;
      p50: number;
      p90: number;
      p99: number;
      total: number;
    }

    interface Result {
      requests: Histogram & { sent: number };
      latency: Histogram;
      /** Seconds. */
      duration: number;
      errors: number;
      timeouts: number;
      non2xx: number;
      statusCodeStats: Record<string, { count: number }>;
    }

    /** A running load; resolves with the results. */
    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
    }
  }

  function autocannon(options: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
