// Imported first by a child fixture: shifts this process's clock by CLOCK_OFFSET_MS (e.g. 500 or
// -500), as if its system clock were off. `Date.now()` and `new Date()` move; timers do not (they
// run on the monotonic clock), so schedules computed from the date fire early or late like on a
// machine with a skewed clock. Loaded before Nest, luxon, cron and croner read the date.
const offset = Number(process.env.CLOCK_OFFSET_MS ?? 0);

if (offset !== 0) {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  class SkewedDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(realNow() + offset);
      else super(...(args as [string | number | Date]));
    }

    static override now(): number {
      return realNow() + offset;
    }
  }
  globalThis.Date = SkewedDate as DateConstructor;
}

export {};
