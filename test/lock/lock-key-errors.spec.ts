import {
  LockKeyError,
  LockLostError,
  LockQuorumError,
  LockReplicationError,
  LockTimeoutError,
} from '../../lib';
import { checkLockNames, checkOneSlot, lockRedisKeys } from '../../lib/lock/lock-keys';

/** 3,000 names of 40 characters: the message of a multi-key lock's error must not list them all. */
const NAMES = Array.from(
  { length: 3_000 },
  (_, i) => `order:${String(i).padStart(6, '0')}:${'x'.repeat(27)}`,
);

describe('lock key errors', () => {
  it("name a list's repeated names, quoted, not the whole list", () => {
    const thrown = (key: unknown) => {
      try {
        checkLockNames(key);
      } catch (e) {
        return e as LockKeyError;
      }
      throw new Error('not refused');
    };
    expect(thrown(['a', 'b', 'a']).message).toBe("lock key list has duplicates: 'a'");
    expect(thrown(['b', 'a', 'b', 'a', 'b']).message).toBe(
      "lock key list has duplicates: 'b', 'a'",
    );
    const long = [...NAMES, NAMES[2_500]];
    const err = thrown(long);
    expect(err).toBeInstanceOf(LockKeyError);
    expect(err.message).toBe(`lock key list has duplicates: '${NAMES[2_500]}'`);
    expect(err.key).toBe(long);
  });

  it.each([
    ['LockTimeoutError', (keys: string[]) => new LockTimeoutError(keys, 200, 5_000)],
    ['LockLostError', (keys: string[]) => new LockLostError(keys, 'its TTL ran out')],
    [
      'LockReplicationError',
      (keys: string[]) => new LockReplicationError(keys, 'acquire', 0, 1, 300),
    ],
    ['LockQuorumError', (keys: string[]) => new LockQuorumError(keys, 'acquire', 3, 1, 1, 2, 50)],
  ])('%s lists the first 5 of 3,000 keys, counts the others and keeps them all', (_name, make) => {
    const err = make(NAMES);
    const listed = NAMES.slice(0, 5)
      .map((k) => `'${k}'`)
      .join(', ');
    expect(err.message).toContain(`lock ${listed} … and 2995 more`);
    expect(err.message.length).toBeLessThan(500);
    expect(err.keys).toEqual(NAMES);
    // A short list reads as before: every key, quoted.
    expect(make(['a', 'b']).message).toMatch(/^lock 'a', 'b'[: ]/);
  });

  it('Cluster: names the first key of each slot, the first 5 slots, however many keys', () => {
    // 2,999 keys of one slot (hash tag), then one of another: the conflict is at the end.
    const keys = [...NAMES.slice(0, 2_999).map((n) => `{order}:${n}`), 'other'];
    let err: LockKeyError | undefined;
    try {
      checkOneSlot(keys.map((k) => lockRedisKeys('p:', k)));
    } catch (e) {
      err = e as LockKeyError;
    }
    expect(err).toBeInstanceOf(LockKeyError);
    expect(err?.message).toMatch(
      /^lock keys map to 2 different Redis Cluster slots: '\{order\}:order:000000:x+' \(slot \d+\), 'other' \(slot \d+\); a multi-key lock needs one slot/,
    );
    expect(err?.key).toEqual(keys);
    let many: LockKeyError | undefined;
    try {
      checkOneSlot(NAMES.map((k) => lockRedisKeys('p:', k)));
    } catch (e) {
      many = e as LockKeyError;
    }
    expect(many?.message).toMatch(/ \(slot \d+\) … and \d+ more; a multi-key lock needs one slot/);
    expect(many?.message.length).toBeLessThan(700);
  });
});
