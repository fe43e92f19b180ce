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
});
