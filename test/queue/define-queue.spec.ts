// What `defineQueue` does at runtime; its types are tested in test/types/cases/queue-names.ts and
// test/types/cases/queue-worker.ts (test/types/types.spec.ts).
import { defineQueue, QueueError } from '../../lib';

describe('defineQueue', () => {
  it('returns the name alone: a TypedQueue is a name with a type', () => {
    expect(defineQueue<{ sku: string }>('type-orders')).toEqual({ name: 'type-orders' });
  });

  it('refuses an empty name with a QueueError naming the argument', () => {
    expect(() => defineQueue('')).toThrow(QueueError);
    expect(() => defineQueue('')).toThrow(/'queue'/);
  });
});
