/**
 * Rounds per scenario. Without `PARTITION_ROUNDS` the CI profile runs (a few rounds each, the
 * whole suite within 5 minutes on 2 cores); `npm run test:partitions -- --rounds N` sets
 * `PARTITION_ROUNDS=N` for long runs (N rounds of every scenario).
 */
const requested = Number(process.env.PARTITION_ROUNDS);

export const PROFILE_NAME = requested > 0 ? `${requested} rounds` : 'ci';

/** Rounds of a scenario: `ci` in the CI profile, else the requested number. */
export function rounds(ci: number): number {
  return requested > 0 ? Math.floor(requested) : ci;
}
