import type { LeasedTask, QueueService } from '../../lib';

/**
 * Calls `record` with the tasks each claim of `queues` acked (a worker acks, and claims its next
 * tasks, with one claim), once that claim resolved: worker processes of the crash tests tell
 * their records which tasks are acked (a task killed after its handler ended but before its ack
 * runs again, and counts as in flight).
 */
export function onAcks(
  queues: QueueService,
  record: (acked: readonly LeasedTask[]) => Promise<unknown>,
): void {
  const claim = queues.store.claim.bind(queues.store);
  queues.store.claim = async <P>(...args: Parameters<typeof claim>) => {
    const result = await claim<P>(...args);
    const acked = (args[3] ?? []).filter((s, i) => s.kind === 'ack' && result.settled[i] === 1);
    if (acked.length > 0) await record(acked.map((s) => s.task));
    return result;
  };
}
