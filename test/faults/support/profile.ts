/**
 * How hard the fault suite pushes: `FAULTS_PROFILE=ci` is the short version CI runs (bounded time,
 * under about 2 minutes on 2 cores); anything else is the full version, run locally.
 */
export const PROFILE_NAME: 'ci' | 'full' = process.env.FAULTS_PROFILE === 'ci' ? 'ci' : 'full';

const isCi = PROFILE_NAME === 'ci';

/**
 * Scheduling slack on top of a lock's TTL in the unavailability bounds: the short profile runs
 * where CI machines stall for a second at times; the full one keeps the tight bound.
 */
const UNAVAILABILITY_SLACK_MS = isCi ? 1_500 : 500;

/** Iterations and injected faults per scenario. */
export const PROFILE = {
  crashingHolders: {
    processes: 8,
    /** SIGKILLs that hit a process while it held the lock. */
    holderKills: isCi ? 5 : 15,
    /** Completed critical sections at least. */
    sections: isCi ? 400 : 3_000,
    ttlMs: 1_000,
    /** Added to the TTL in the bound of each kill's unavailability. */
    slackMs: UNAVAILABILITY_SLACK_MS,
  },
  frozenHolder: {
    rounds: isCi ? 3 : 10,
    ttlMs: 1_000,
    /** Added to the TTL in the bound of each freeze's unavailability. */
    slackMs: UNAVAILABILITY_SLACK_MS,
  },
  redisRestart: {
    restarts: isCi ? 2 : 5,
    /** The outage lasts at least this long, in ms. */
    minOutageMs: isCi ? 2_000 : 6_000,
    commandTimeoutMs: 500,
  },
  slowNetwork: {
    /** Acquisitions per latency. */
    acquisitions: isCi ? 4 : 50,
    /** withLock callbacks that outlive their TTL several times. */
    longSections: isCi ? 1 : 4,
  },
  badInput: {
    /** fast-check runs per call family; at least 1,000 invalid calls in total in either profile. */
    runsPerFamily: isCi ? 150 : 1_000,
  },
};
