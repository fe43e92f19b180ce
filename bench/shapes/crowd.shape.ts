import type { LockLibrary } from '../adapters/lock-adapter';
import type { BenchConfig } from '../bench-config';
import { runContenders } from './contended.shape';
import type { Shape } from './shape';

/** The id of the crowd shape with `processes` × `callers`, e.g. `crowd-8x16`. */
export function crowdShapeId(processes: number, callers: number): string {
  return `crowd-${processes}x${callers}`;
}

/**
 * The crowd shapes: `processes` OS processes with `callers` concurrent callers each fight for
 * one key for `config.contendedMs`, each section as in contended (MULTI INCR inside + counter,
 * sleep `holdMs`, DECR inside). A flash sale in miniature: many requests of each instance wait
 * on one key. Metrics as contended's, with `jainCallers` (fairness over every caller) next to
 * `jain` (over processes).
 */
export function crowdShape(
  config: BenchConfig,
  processes: number,
  callers: number,
): Shape<LockLibrary> {
  const id = crowdShapeId(processes, callers);
  return {
    id,
    title:
      `${id}: ${processes} processes × ${callers} concurrent callers, one key, ` +
      `~${config.holdMs} ms per section (${config.contendedMs / 1000} s)`,
    run: (library, ctx) => runContenders(library, ctx, { shape: id, processes, callers }),
  };
}
