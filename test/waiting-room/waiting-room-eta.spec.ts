import { RoomWatch } from '../../lib/waiting-room/room-watch';
import type { RoomClock } from '../../lib/waiting-room/waiting-room-store';

describe('RoomWatch.eta: the first admission call at or after the visitor turn', () => {
  const clock = (o: Partial<RoomClock>): RoomClock => ({
    redisNow: 10_000,
    next: 10_010,
    rate: 50,
    absent: 60_000,
    lastCall: 9_990,
    ...o,
  });

  it('in batches (interval under the 400 ms between calls): on the calls every 400 ms from the last one', () => {
    // Turn 10,010 + 29 x 20 = 10,590: the call at 9,990 + 2 x 400 = 10,790.
    expect(RoomWatch.eta(clock({}), 30)).toBe(790);
    // Turn 10,010 + 9 x 20 = 10,190: the call at 10,390; read 100 ms ago.
    expect(RoomWatch.eta(clock({}), 10, 100)).toBe(290);
    // A turn on a call: that call.
    expect(RoomWatch.eta(clock({ next: 10_000, lastCall: 9_600 }), 21)).toBe(400);
    // No call for longer than the gap: the calls start at the next admission.
    expect(RoomWatch.eta(clock({ next: 12_000, lastCall: 0 }), 1)).toBe(2_000);
    expect(RoomWatch.eta(clock({ next: 12_000, lastCall: 0 }), 2)).toBe(2_400);
  });

  it('one by one (interval of 400 ms or more): the turn itself; null while the room holds', () => {
    expect(RoomWatch.eta(clock({ rate: 2 }), 3)).toBe(10 + 2 * 500);
    expect(RoomWatch.eta(clock({ rate: 0 }), 3)).toBeNull();
    expect(RoomWatch.eta(clock({ next: 9_000, rate: 2 }), 1)).toBe(0);
  });
});
