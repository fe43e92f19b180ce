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

  it('counts the callers still waiting through every way in and out of the line', async () => {
    const line = new LocalLine<number, string>(() => undefined);
    const abort = new AbortController();
    const outcomes = [
      line.add(0, 60_000, undefined, () => 'late'),
      line.add(1, 10, undefined, () => 'timed out'),
      line.add(2, 60_000, abort.signal, () => 'late'),
      line.add(3, 60_000, undefined, () => 'late'),
    ].map((p) => p.catch((e: Error) => e.message));
    expect(line.pending).toBe(4);
    abort.abort(new Error('aborted'));
    expect(line.pending).toBe(3);
    expect(await outcomes[1]).toBe('timed out');
    expect(line.pending).toBe(2);
    const first = line.shift()!;
    expect(first.options).toBe(0);
    expect(line.pending).toBe(1);
    line.unshift(first);
    expect(line.pending).toBe(2);
    line.shift()!.resolve('granted');
    expect(line.pending).toBe(1);
    line.rejectAll(new Error('closed'));
    expect(line.pending).toBe(0);
    expect(await Promise.all(outcomes)).toEqual(['granted', 'timed out', 'aborted', 'closed']);
    expect(line.pending).toBe(0);
  });
});
