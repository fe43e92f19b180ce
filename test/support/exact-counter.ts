import type { Cluster, Redis } from 'ioredis';
import { exited, lineFrom, spawnTs } from './child';

/** What `expectExactCounter` runs, and where the counter lives. */
export interface ExactCounterRun {
  /** OS processes running test/fixtures/lock-child.ts at the same time. */
  processes: number;
  /** Critical sections per process. */
  sections: number;
  /** The children's environment: REDIS_URL, and MODULE_OPTIONS_JSON for Cluster / quorum mode. */
  env: NodeJS.ProcessEnv;
  /** The module's `redis` (where the children keep the counter), to read it back. */
  counter: Redis | Cluster;
  /** Key prefix of the children's locks and counter. */
  prefix: string;
}

/**
 * Mutual exclusion across OS processes: `processes` children each run `sections` non-atomic
 * read-modify-write sections of one counter under one lock (test/fixtures/lock-child.ts).
 * Expects every child to finish cleanly, the counter to be exactly `processes × sections` (no
 * lost update) and no section to have seen another one inside.
 */
export async function expectExactCounter(run: ExactCounterRun): Promise<void> {
  const env = { ...run.env, PREFIX: run.prefix, MODE: 'sections', SECTIONS: String(run.sections) };
  const children = Array.from({ length: run.processes }, () =>
    spawnTs('test/fixtures/lock-child.ts', [], env),
  );
  const codes = await Promise.all(
    children.map(async (child) => {
      await lineFrom(child, new RegExp(`^done ${run.sections}$`), 90_000);
      return exited(child);
    }),
  );
  expect(codes).toEqual(children.map(() => 0));
  expect(Number(await run.counter.get(`${run.prefix}counter`))).toBe(run.processes * run.sections);
  expect(await run.counter.get(`${run.prefix}violations`)).toBeNull();
}
