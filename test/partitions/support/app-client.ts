import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import type { NetNode } from './netns';

const ROOT = resolve(__dirname, '..', '..', '..');
const FIXTURE = resolve(ROOT, 'test/partitions/fixtures/partition-app.ts');

/** One event of an application instance (a JSON line of fixtures/partition-app.ts). */
export interface AppEvent {
  /** `enter`, `leave`, `abort`, `fenced`, `checked`, `run`, `ran`, `done`, `error`, `ready`. */
  ev: string;
  /** When it happened, by the machine's monotonic clock, in ms. */
  t: number;
  /** The instance that reported it (set by the test process). */
  app: string;
  [field: string]: any;
}

/**
 * An application instance (fixtures/partition-app.ts) running in its own namespace: the test
 * sends it commands on stdin and keeps every event it prints, in order.
 */
export class AppClient {
  readonly events: AppEvent[] = [];
  private stderr = '';
  private waiters = new Set<() => void>();

  private constructor(
    readonly name: string,
    readonly net: NetNode,
    readonly child: ChildProcess,
  ) {
    let partial = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        this.events.push({ ...(JSON.parse(line) as AppEvent), app: name });
      }
      this.wake();
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString()).slice(-20_000);
    });
    child.once('exit', () => this.wake());
    // A command sent to an instance that just died must not crash the test process.
    child.stdin!.on('error', () => undefined);
  }

  /** Starts the fixture in `net`'s namespace; resolves once it says it is ready. */
  static async start(net: NetNode): Promise<AppClient> {
    // Compiled once by the global setup (support/compile.ts); ts-node when run without it.
    const compiled = process.env.PARTITIONS_FIXTURE;
    const node = compiled ? [compiled] : ['-r', 'ts-node/register/transpile-only', FIXTURE];
    const child = spawn('ip', ['netns', 'exec', net.ns, process.execPath, ...node], {
      cwd: ROOT,
      env: { ...process.env, TS_NODE_PROJECT: resolve(ROOT, 'tsconfig.json') },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const client = new AppClient(net.name, net, child);
    await client.next((e) => e.ev === 'ready', 0, 60_000);
    return client;
  }

  /** Sends a command (fire and forget). */
  send(cmd: Record<string, unknown>): void {
    this.child.stdin!.write(`${JSON.stringify(cmd)}\n`);
  }

  /** Sends `cmd` and resolves its `done` event; rejects with the instance's error. */
  async request(cmd: Record<string, unknown>, timeoutMs = 60_000): Promise<AppEvent> {
    const from = this.events.length;
    this.send(cmd);
    const event = await this.next(
      (e) => (e.ev === 'done' || e.ev === 'error') && (e.cmd === cmd.cmd || e.in === cmd.cmd),
      from,
      timeoutMs,
    );
    if (event.ev === 'error')
      throw new Error(`${this.name} ${cmd.cmd}: ${event.name}: ${event.message}`);
    return event;
  }

  /**
   * The first event at or after index `from` matching `match`; rejects when the instance exits
   * first or after `timeoutMs` (with its last events and stderr).
   */
  async next(match: (e: AppEvent) => boolean, from = 0, timeoutMs = 30_000): Promise<AppEvent> {
    const deadline = Date.now() + timeoutMs;
    for (let i = from; ;) {
      for (; i < this.events.length; i++) if (match(this.events[i])) return this.events[i];
      const exited = this.child.exitCode !== null || this.child.signalCode !== null;
      const left = deadline - Date.now();
      if (exited || left <= 0) {
        throw new Error(
          `${this.name}: no matching event ${exited ? 'before it exited' : `within ${timeoutMs} ms`}; last events:\n` +
            this.events
              .slice(-8)
              .map((e) => JSON.stringify(e))
              .join('\n') +
            `\nstderr:\n${this.stderr.slice(-3_000)}`,
        );
      }
      await new Promise<void>((r) => {
        const done = () => {
          clearTimeout(timer);
          this.waiters.delete(done);
          r();
        };
        const timer = setTimeout(done, left);
        this.waiters.add(done);
      });
    }
  }

  /** Its stderr so far (the last 20 kB). */
  get errors(): string {
    return this.stderr;
  }

  /** Asks it to exit; SIGKILL after 5 s. */
  async exit(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    const kill = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    this.send({ cmd: 'exit' });
    await exited;
    clearTimeout(kill);
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }
}
