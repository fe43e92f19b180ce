/**
 * `work`, or a rejection naming `what` when it has not settled within `timeoutMs`. The work itself
 * cannot be cancelled and goes on in the background; the caller records the failure and moves on
 * instead of hanging.
 * @example
 * const metrics = await withTimeout(shape.run(library, ctx), 72_000, `serial for ours`);
 */
export function withTimeout<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not finish within ${timeoutMs} ms`)),
      timeoutMs,
    );
    timer.unref();
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
