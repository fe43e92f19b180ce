/**
 * A numeric `--name value` argument of a stand-alone bench script (wait-vs-try.ts,
 * replica-wait.ts, otel-overhead.ts, serial-cost.ts), or `fallback` when it is not given.
 * @example
 * const ROUNDS = numberArg('rounds', 5);
 */
export function numberArg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
