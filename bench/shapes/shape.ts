import type { BenchConfig } from '../bench-config';
import type { BenchChild } from '../support/bench-child';

/** Named numbers one shape measured for one library in one round. */
export type Metrics = Record<string, number>;

/** What a shape gets from the orchestrator. */
export interface ShapeContext {
  /** URL of the bench redis-server. */
  readonly url: string;
  readonly config: BenchConfig;
  /** 1-based round number. */
  readonly round: number;
  /** The long-lived child processes (as many as `config.contendedProcesses`). */
  readonly children: readonly BenchChild[];
}

/** A shape run once per library and round. */
export interface Shape<L> {
  /** Stable id, used in results.json. */
  readonly id: string;
  /** Heading in RESULTS.md. */
  readonly title: string;
  /**
   * How long one run may take before the orchestrator records it as failed, in ms.
   * @default shapeTimeoutMs(config): the longest measured stretch of the common shapes plus a minute
   */
  readonly timeoutMs?: number;
  run(library: L, ctx: ShapeContext): Promise<Metrics>;
}

/** The Redis key (or key prefix) a shape uses for one library in one round. */
export function benchKey(shape: string, libraryId: string, round: number): string {
  return `bench:${shape}:${libraryId}:${round}`;
}
