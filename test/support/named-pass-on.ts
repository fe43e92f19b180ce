import { filter, firstValueFrom, take } from 'rxjs';
import type { QueueService } from '../../lib';
import { deferred, waitFor } from './helpers';

/**
 * A named-handler worker leaves the tasks of a name it has no handler for to a live worker that
 * runs them (the workers registry): on queue `q`, a worker without names is kept busy by its
 * first task while a loop with handler 'a' alone has a free slot; three tasks named 'b' are
 * enqueued. Expects the loop of 'a' to give them back (a `delayed` event), each to run once in
 * the other worker once it is free, with one counted attempt, and none to end dead.
 */
export async function expectTasksPassedOn(queues: QueueService, q: string): Promise<void> {
  const gate = deferred();
  const others: string[] = [];
  const ranInA: string[] = [];
  // A worker that runs every task, kept busy by the first one until the gate opens.
  const other = queues.process(
    q,
    async (task) => {
      if (task.id === 'blocker') await gate.promise;
      else others.push(task.id);
    },
    { concurrency: 1 },
  );
  let a: { close(): Promise<void> } | undefined;
  try {
    await queues.enqueue(q, 'blocker');
    await waitFor('blocker running', async () => (await queues.stats(q)).leased === 1);
    await waitFor('the other worker registered', async () =>
      (await queues.workers(q)).some((w) => w.names.length === 0),
    );
    a = queues.process(q, (task) => void ranInA.push(task.id), { name: 'a' });
    const givenBack = firstValueFrom(
      queues.events(q, { from: 'start' }).pipe(
        filter((e) => e.type === 'delayed' && e.taskId === 'b1'),
        take(1),
      ),
    );
    await queues.enqueue(q, ['b1', 'b2', 'b3'], { name: 'b' });
    // Only the loop of 'a' has a free slot: it claims the b tasks and gives them back.
    await givenBack;
    gate.resolve();
    await waitFor('b tasks ran', () => others.length === 3, 10_000);
    expect(others.sort()).toEqual(['b1', 'b2', 'b3']);
    expect(ranInA).toEqual([]);
    expect(await queues.stats(q)).toMatchObject({ dead: 0 });
    for (const id of ['b1', 'b2', 'b3']) {
      // Given back unattempted: one counted attempt, the one that ran.
      expect(await queues.get(q, id)).toMatchObject({ state: 'completed', attempts: 1 });
    }
  } finally {
    gate.resolve();
    await Promise.all([a?.close(), other.close()]);
  }
}
