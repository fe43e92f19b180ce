import type { ChildProcess } from 'node:child_process';

/** One stdout line of a child process, with when it arrived (local clock, ms). */
export interface TimedLine {
  text: string;
  at: number;
}

/**
 * Keeps every stdout line of `child` (and its stderr, for error messages), so that a test can wait
 * for lines that may already have arrived, in order, without losing any in between.
 */
export class ChildLines {
  readonly lines: TimedLine[] = [];
  private stderr = '';
  private partial = '';
  private waiters = new Set<() => void>();
  /** Its output streams closed: no line comes any more. */
  private closed = false;

  constructor(readonly child: ChildProcess) {
    child.stdout?.on('data', (chunk: Buffer) => {
      const parts = (this.partial + chunk.toString()).split('\n');
      this.partial = parts.pop() ?? '';
      const at = Date.now();
      for (const text of parts) this.lines.push({ text, at });
      this.wake();
    });
    child.stderr?.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    // 'close', not 'exit': the last lines may come after 'exit'.
    child.once('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  /** Lines matching `pattern` that arrived at or after index `from`. */
  matching(pattern: RegExp, from = 0): TimedLine[] {
    return this.lines.slice(from).filter((l) => pattern.test(l.text));
  }

  /**
   * Resolves the first line at or after index `from` matching `pattern`; rejects (with the
   * child's stderr) when the child exits first or after `timeoutMs`.
   */
  async next(pattern: RegExp, from = 0, timeoutMs = 30_000): Promise<TimedLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.lines.slice(from).find((l) => pattern.test(l.text));
      if (hit) return hit;
      const exited =
        this.closed ||
        ((this.child.exitCode !== null || this.child.signalCode !== null) &&
          this.child.stdout?.destroyed !== false);
      const left = deadline - Date.now();
      if (exited || left <= 0) {
        throw new Error(
          `no line matching ${pattern} ${exited ? 'before the process exited' : `within ${timeoutMs} ms`}; ` +
            `last lines:\n${this.lines
              .slice(-10)
              .map((l) => l.text)
              .join('\n')}\nstderr:\n${this.stderr}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.waiters.add(done);
      });
    }
  }

  private wake(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const w of waiters) w();
  }
}
