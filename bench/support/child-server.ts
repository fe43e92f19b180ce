import type { ChildReply, ChildRequest } from './bench-child';

/** An operation a child process runs on the orchestrator's request. */
export type ChildOperation = (args: any) => unknown;

/**
 * The child's side of `BenchChild`: answers each request with the result (or error) of the
 * operation it names, runs `cleanup` and exits when the orchestrator disconnects, and tells the
 * orchestrator it is ready.
 * @example
 * serveRequests({ clock: () => monotonicMs() }, () => adapter?.close());
 */
export function serveRequests(
  operations: Record<string, ChildOperation>,
  cleanup: () => Promise<unknown>,
): void {
  process.on('message', async (request: ChildRequest) => {
    let reply: ChildReply;
    try {
      const operation = operations[request.op];
      if (!operation) throw new Error(`unknown operation '${request.op}'`);
      reply = { id: request.id, ok: true, result: (await operation(request.args)) ?? null };
    } catch (err) {
      reply = { id: request.id, ok: false, error: (err as Error).stack ?? String(err) };
    }
    process.send?.(reply);
  });
  process.once('disconnect', () => {
    void cleanup()
      .catch(() => undefined)
      .finally(() => process.exit(0));
  });
  process.send?.({ ready: true });
}
