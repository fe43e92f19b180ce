import { fork, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');
/** The lock child: `bench/children/lock-child.ts`. */
const LOCK_CHILD = 'lock-child.ts';

/** A request from the orchestrator to a child process. */
export interface ChildRequest {
  id: number;
  op: string;
  args?: unknown;
}

/**
 * Arguments of a child's `setup`: connect `library` to `url`, then warm it up unmeasured on a key
 * derived from `key` (one acquisition that has to wait, then `warmupPairs` pairs).
 */
export interface ChildSetup {
  library: string;
  url: string;
  /** The key the shape will measure on. */
  key: string;
  warmupPairs: number;
}

/** A child's answer to one request. */
export type ChildReply =
  { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

/**
 * A child process (compiled by ts-node) that runs operations on request. The lock children
 * (`bench/children/lock-child.ts`) run one side of a multi-process shape; they are started once
 * per run and reused by every shape and library, so that process start-up is never part of a
 * measurement. The children's side of the protocol: `serveRequests` (support/child-server.ts).
 */
export class BenchChild {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (v: unknown) => void; reject: (e: Error) => void }
  >();
  private exitError?: Error;

  private constructor(
    readonly index: number,
    private readonly child: ChildProcess,
  ) {
    child.on('message', (message: ChildReply) => {
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.ok) waiter.resolve(message.result);
      else waiter.reject(new Error(`child ${index}: ${message.error}`));
    });
    child.once('exit', (code, signal) => {
      this.exitError = new Error(`bench child ${index} exited (${code ?? signal})`);
      for (const waiter of this.pending.values()) waiter.reject(this.exitError);
      this.pending.clear();
    });
  }

  /**
   * Starts child number `index`; resolves once it is ready for requests.
   * @param entry its file in `bench/children/`
   * @default entry 'lock-child.ts'
   */
  static start(index: number, entry = LOCK_CHILD): Promise<BenchChild> {
    const child = fork(resolve(ROOT, 'bench', 'children', entry), [String(index)], {
      cwd: ROOT,
      execArgv: ['-r', 'ts-node/register/transpile-only'],
      env: { ...process.env, TS_NODE_PROJECT: resolve(ROOT, 'tsconfig.json') },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`bench child ${index} did not start within 120 s`));
      }, 120_000);
      child.once('message', () => {
        clearTimeout(timer);
        resolvePromise(new BenchChild(index, child));
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`bench child ${index} exited (${code}) before it was ready`));
      });
    });
  }

  /** Sends `op` with `args`; resolves with the child's result, rejects with its error. */
  call<T>(op: string, args?: unknown, timeoutMs = 120_000): Promise<T> {
    if (this.exitError) return Promise.reject(this.exitError);
    const id = this.nextId++;
    return new Promise<T>((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`child ${this.index}: '${op}' did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolvePromise(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      const request: ChildRequest = { id, op, args };
      this.child.send(request);
    });
  }

  /** Asks the child to exit; kills it if it has not within 5 s. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    const kill = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    this.child.disconnect();
    await exited;
    clearTimeout(kill);
  }
}
