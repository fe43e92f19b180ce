import fc from 'fast-check';

// Invalid values for the bad-input fuzz, each family invalid by construction (never filtered
// through the library's own validators, so a validator that lets one through fails the test).

const MAX_LOCK_MS = 86_400_000;
const MAX_TIMER_MS = 2_147_483_647;
const MAX_DELAY_MS = 315_360_000_000;

/** Values that are not numbers at all. */
export const notANumber: fc.Arbitrary<unknown> = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.constant(null),
  fc.boolean(),
  fc.constant({}),
  fc.constant([1]),
  fc.bigInt().map((b) => b),
);

/** Not an integer in [min, max]: NaN, infinities, fractions, out of range, or not a number. */
export function badInt(min: number, max: number): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.constantFrom(NaN, Infinity, -Infinity),
    fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Number.isInteger(x)),
    fc.integer({ min: -1_000_000, max: min - 1 }),
    fc.double({ min: max + 1, max: Number.MAX_VALUE, noNaN: true }),
    notANumber,
  );
}

export const badLockTtl = badInt(1, MAX_LOCK_MS);
export const badLockWait = badInt(0, MAX_LOCK_MS);
export const badTimerMs = (min: number) => badInt(min, MAX_TIMER_MS);
export const badDelay = badInt(0, MAX_DELAY_MS);
export const badCount = badInt(1, 1_000);
export const badMaxAttempts = badInt(1, 1_000_000);

/** Not a boolean. */
export const notABoolean: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(0, 1, 'true', 'false', null, {}, []),
  fc.string({ maxLength: 5 }),
);

/** Not a non-empty string of at most `maxBytes` bytes: other types, '', or too long. */
export function badName(maxBytes: number): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.constant(''),
    fc.string({ minLength: maxBytes + 1, maxLength: maxBytes + 200 }),
    // Multi-byte characters: few characters, too many bytes.
    fc.constant('é'.repeat(Math.floor(maxBytes / 2) + 1)),
    fc.integer(),
    fc.constantFrom(NaN, null, undefined, true),
    fc.constant(Symbol('name')),
    fc.constant(() => 'key'),
    fc.object({ maxDepth: 1 }),
  );
}

/** Invalid lock keys: bad names, and arrays that are empty, hold a bad name, or repeat one. */
export const badLockKey: fc.Arbitrary<unknown> = fc.oneof(
  badName(512),
  fc.constant([]),
  fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), badName(512)).map(([ok, bad]) => [ok, bad]),
  fc.string({ minLength: 1, maxLength: 8 }).map((k) => [k, k]),
);

/** An option name that none of `known` is (and that cannot set a prototype). */
export function unknownOption(known: readonly string[]): fc.Arbitrary<string> {
  return fc
    .string({ minLength: 1, maxLength: 12 })
    .filter((k) => !known.includes(k) && k !== '__proto__');
}

/** An object with one property `key` = `value` (defined, so even `__proto__`-like names are plain keys). */
export function withOption(key: string, value: unknown): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  Object.defineProperty(o, key, { value, enumerable: true, configurable: true, writable: true });
  return o;
}

/** Options "objects" that are not objects. */
export const notAnObject: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, 0, 1, true, 'options', []),
  fc.array(fc.integer(), { minLength: 1, maxLength: 3 }),
);

/** One invalid lock option: the option's name and the whole options object. */
export const badLockOptions: fc.Arbitrary<{ option: string; options: unknown }> = fc.oneof(
  badLockTtl.map((v) => ({ option: 'ttlMs', options: { ttlMs: v } })),
  badLockWait.map((v) => ({ option: 'waitMs', options: { waitMs: v } })),
  badLockTtl.map((v) => ({ option: 'retryIntervalMs', options: { retryIntervalMs: v } })),
  fc
    .tuple(fc.constantFrom('fair', 'fencing', 'autoExtend'), notABoolean)
    .map(([option, v]) => ({ option, options: withOption(option, v) })),
  fc
    .oneof(fc.integer(), fc.constant(null), fc.constant('p'.repeat(257)))
    .map((v) => ({ option: 'keyPrefix', options: { keyPrefix: v } })),
  fc
    .constantFrom({}, 'signal', 1, null, new AbortController())
    .map((v) => ({ option: 'signal', options: { signal: v } })),
  fc
    .tuple(
      unknownOption([
        'ttlMs',
        'waitMs',
        'retryIntervalMs',
        'fair',
        'fencing',
        'keyPrefix',
        'signal',
        'autoExtend',
      ]),
      fc.anything(),
    )
    .map(([option, v]) => ({ option, options: withOption(option, v) })),
  notAnObject.map((options) => ({ option: '', options })),
);

/** Payloads JSON cannot represent faithfully. */
export const badPayload: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(() => 1),
  fc.constant(Symbol('payload')),
  fc.bigInt(),
  fc.constantFrom(NaN, Infinity, -Infinity),
  fc.constantFrom(NaN, Infinity).map((x) => ({ nested: [1, x] })),
  fc.bigInt().map((b) => ({ deep: { b } })),
  fc.constant(null).map(() => ({ fn: () => 1 })),
  fc.constant(null).map(() => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    return cyclic;
  }),
  fc.constant(null).map(() => ({
    toJSON() {
      throw new Error('not serializable');
    },
  })),
);

/** Invalid task ids (valid ones: non-empty strings of at most 512 bytes and finite numbers). */
export const badTaskId: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(''),
  // Over the 512 bytes of names: long, or few multi-byte characters.
  fc.string({ minLength: 513, maxLength: 700 }),
  fc.constant('é'.repeat(257)),
  fc.constantFrom(NaN, Infinity, -Infinity, null, undefined, true),
  fc.object({ maxDepth: 1 }),
  fc.constant(Symbol('id')),
);

/** Invalid `LeasedTask`s to hand back to ack / nack / extendLease / release. */
export const badLeasedTask: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, undefined, 'task', 1, [], {}),
  fc.record({ queue: fc.constant('q'), id: fc.constant(''), leaseToken: fc.constant('t') }),
  fc.record({ queue: fc.constant('q'), id: fc.constant('a'), leaseToken: fc.constant('') }),
  fc.record({ queue: badName(512), id: fc.constant('a'), leaseToken: fc.constant('t') }),
  fc.record({ queue: fc.constant('q'), id: fc.integer(), leaseToken: fc.constant('t') }),
  fc.record({ queue: fc.constant('q'), id: fc.constant('a') }),
);

/** Key templates `@WithLock` must refuse when decorating a one-parameter method. */
export const badTemplate: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom('', 1, null, undefined, {}, true),
  // An unclosed '<' (literal text never contains '<' or '>').
  fc
    .tuple(fc.stringMatching(/^[a-z:]{0,6}$/), fc.stringMatching(/^[a-z0-9.]{0,6}$/))
    .map(([a, b]) => `${a}<${b}`),
  // A placeholder that is not <N> or <N.path>.
  fc
    .tuple(
      fc.stringMatching(/^[a-z:]{0,6}$/),
      fc.oneof(
        fc.constantFrom('', 'x', '01', '-1', '0.', '0..a', 'a.0', ' 0', '0 ', '0.a-b', '1e3', '+1'),
        fc.constantFrom('99999999999999999999', '9007199254740993'),
      ),
    )
    .map(([a, body]) => `${a}<${body}>`),
  // An argument the method does not declare.
  fc.integer({ min: 1, max: 50 }).map((n) => `item:<${n}>`),
  fc.constant([]),
  fc.constant(['a:<0>', 'a:<0>']),
  fc.constant(['a:<0>', 'b<']),
);

/** Argument values a template placeholder must refuse at call time. */
export const badKeyArgument: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(undefined, null, '', NaN, Infinity, -Infinity),
  fc.object({ maxDepth: 1 }),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.constant(() => 'k'),
  fc.constant(Symbol('arg')),
  // A valid scalar that makes the key longer than 512 bytes.
  fc.string({ minLength: 520, maxLength: 700 }),
);

/** One invalid module option: its name, and the options (`redis` is set by the caller). */
export const badModuleOptions: fc.Arbitrary<{ option: string; options: Record<string, unknown> }> =
  fc.oneof(
    fc
      .constantFrom(1, true, 'localhost:6379', 'http://127.0.0.1:6379', '')
      .map((v) => ({ option: 'redis', options: { redis: v } })),
    fc
      .oneof(fc.integer(), fc.constant('p'.repeat(300)), fc.constant({}))
      .map((v) => ({ option: 'keyPrefix', options: { keyPrefix: v } })),
    badTimerMs(1)
      .filter((v) => v !== null)
      .map((v) => ({ option: 'commandTimeoutMs', options: { commandTimeoutMs: v } })),
    badLockTtl.map((v) => ({ option: 'ttlMs', options: { ttlMs: v } })),
    badLockWait.map((v) => ({ option: 'waitMs', options: { waitMs: v } })),
    badLockTtl.map((v) => ({ option: 'retryIntervalMs', options: { retryIntervalMs: v } })),
    fc
      .tuple(fc.constantFrom('fair', 'fencing'), notABoolean)
      .map(([option, v]) => ({ option, options: withOption(option, v) })),
    notAnObject.map((v) => ({ option: 'queue', options: { queue: v } })),
    fc
      .tuple(
        fc.constantFrom(
          ['leaseMs', badTimerMs(1)] as const,
          ['maxAttempts', badMaxAttempts] as const,
          ['backoffMs', badTimerMs(0)] as const,
          ['concurrency', badInt(1, 10_000)] as const,
          ['drainTimeoutMs', badTimerMs(0)] as const,
        ),
      )
      .chain(([[name, values]]) =>
        values
          .filter((v) => v !== null)
          .map((v) => ({ option: `queue.${name}`, options: { queue: withOption(name, v) } })),
      ),
    fc
      .tuple(
        unknownOption([
          'redis',
          'keyPrefix',
          'commandTimeoutMs',
          'ttlMs',
          'waitMs',
          'retryIntervalMs',
          'fair',
          'fencing',
          'queue',
        ]),
        fc.anything(),
      )
      .map(([option, v]) => ({ option, options: withOption(option, v) })),
  );
