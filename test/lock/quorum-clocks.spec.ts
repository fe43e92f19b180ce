import fc from 'fast-check';
import { QuorumClocks } from '../../lib/lock/quorum-clocks';

describe('QuorumClocks: the relock deadline on a node clock', () => {
  it('answers 0 (never relock) for a node that never replied, and for a moment before its latest reply arrived', () => {
    const clocks = new QuorumClocks(3, 0.01);
    expect(clocks.before(0, 1_000)).toBe(0);
    clocks.observe(0, 1_700_000_000_000, 500);
    expect(clocks.before(0, 500)).toBe(0);
    expect(clocks.before(0, 400)).toBe(0);
    expect(clocks.before(1, 1_000)).toBe(0);
    // 1000 local ms later, at least 990 node ms later (clockDriftFactor 0.01).
    expect(clocks.before(0, 1_500)).toBe(1_700_000_000_990);
  });

  it('the latest reply wins', () => {
    const clocks = new QuorumClocks(1, 0);
    clocks.observe(0, 10_000, 100);
    clocks.observe(0, 5_000, 200);
    expect(clocks.before(0, 300)).toBe(5_100);
  });

  it('is never after the node clock at that local moment, whatever the delays and a node clock rate within the drift', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 0.1, noNaN: true }),
        // The node clock's rate relative to ours, as a fraction of the allowed drift.
        fc.double({ min: -1, max: 1, noNaN: true }),
        fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 }),
        // When the script ran, how long its reply took, and how far after that the deadline is.
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.double({ min: 0, max: 1e5, noNaN: true }),
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        (driftFactor, rateShare, offset, ranAt, replyMs, laterMs) => {
          const rate = 1 + rateShare * driftFactor;
          const nodeClock = (local: number) => offset + rate * local;
          const clocks = new QuorumClocks(1, driftFactor);
          const arrivedAt = ranAt + replyMs;
          // The script reads TIME in whole ms, rounded down.
          clocks.observe(0, Math.floor(nodeClock(ranAt)), arrivedAt);
          const at = arrivedAt + laterMs;
          // (1 µs for the rounding of doubles near 1.7e12.)
          expect(clocks.before(0, at)).toBeLessThanOrEqual(nodeClock(at) + 0.001);
        },
      ),
    );
  });
});
