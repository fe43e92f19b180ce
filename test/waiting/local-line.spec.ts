import { LocalLine } from '../../lib/waiting/local-line';

describe('LocalLine', () => {
  it('never times a caller out before its waitMs has passed by Date.now()', async () => {
    // Node's timers count whole milliseconds of a monotonic clock whose millisecond boundaries
    // fall elsewhere than Date.now()'s: a timer alone can fire up to 1 ms early by Date.now().
    const line = new LocalLine<undefined, number>(() => undefined);
    const early: number[] = [];
    for (let i = 0; i < 300; i++) {
      const added = Date.now();
      const waited = await line.add(undefined, 2, undefined, () => Date.now() - added);
      if (waited < 2) early.push(waited);
    }
    expect(early).toEqual([]);
  });

  it('is not held past its waitMs when the wall clock steps back meanwhile', async () => {
    const line = new LocalLine<undefined, string>(() => undefined);
    const realNow = Date.now.bind(Date);
    // From the moment it is added, the wall clock reads a minute earlier (an NTP step back).
    const step = jest.spyOn(Date, 'now');
    let guardTimer: NodeJS.Timeout | undefined;
    try {
      const waiting = line.add(undefined, 20, undefined, () => 'timed out');
      step.mockImplementation(() => realNow() - 60_000);
      const guard = new Promise<string>((resolve) => {
        guardTimer = setTimeout(() => resolve('still held'), 2_000);
      });
      expect(await Promise.race([waiting, guard])).toBe('timed out');
    } finally {
      clearTimeout(guardTimer);
      step.mockRestore();
    }
  });
});
