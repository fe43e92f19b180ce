import { packageVersion } from '../support/package-version';
import { BullmqAdapter } from './bullmq.adapter';
import { OursQueueAdapter } from './ours-queue.adapter';
import type { QueueLibrary } from './queue-adapter';

const BULLMQ_NAME = `bullmq ${packageVersion('bullmq')}`;

/**
 * BullMQ as it comes: default options, so completed jobs are kept (no `removeOnComplete`: BullMQ
 * keeps them all) and events are on (its `events` stream, 10,000 entries). The queue targets
 * compare against this row (issue 26).
 */
const BULLMQ: QueueLibrary = {
  id: 'bullmq',
  label: `${BULLMQ_NAME} (defaults: completed jobs kept, events on)`,
  ours: false,
  create: (url) => BullmqAdapter.create(url, { jobOptions: {} }),
};

/** BullMQ with `removeOnComplete: true`, its documented setting for throughput. */
const BULLMQ_REMOVE: QueueLibrary = {
  id: 'bullmq-remove',
  label: `${BULLMQ_NAME} (removeOnComplete: true, events on)`,
  ours: false,
  create: (url) => BullmqAdapter.create(url, { jobOptions: { removeOnComplete: true } }),
};

/** Ours as it comes: results kept (`keepCompleted` 1 day / 1,000 tasks), events on (10,000). */
const OURS_LEASED: QueueLibrary = {
  id: 'ours-leased',
  label: 'nestjs-redis-lock, leased (worker: claim + ack; defaults: results kept, events on)',
  ours: true,
  create: (url) => OursQueueAdapter.create(url, 'leased'),
};

/** Ours with what issue 26 added turned off: what results and events cost, in the same run. */
const OURS_LEASED_BARE: QueueLibrary = {
  id: 'ours-leased-bare',
  label: 'nestjs-redis-lock, leased (results not kept, events off)',
  ours: true,
  create: (url) =>
    OursQueueAdapter.create(url, 'leased', {
      keepCompleted: { ageMs: 0, count: 0 },
      eventsMaxLen: 0,
    }),
};

/** Ours with a batch worker (issue 28): the handler gets 100 tasks per call. */
const OURS_BATCH: QueueLibrary = {
  id: 'ours-batch',
  label: 'nestjs-redis-lock, batch worker (size 100; concurrency = batches; defaults)',
  ours: true,
  create: (url) => OursQueueAdapter.create(url, 'batch'),
};

/**
 * Ours with a bound on every queue (issue 28): the enqueue script then counts the queue before
 * it adds. The bound is far above what the shape enqueues, so nothing is refused: the row shows
 * what the counting costs.
 */
const OURS_BOUNDED: QueueLibrary = {
  id: 'ours-bounded',
  label: 'nestjs-redis-lock (maxSize 1,000,000; defaults otherwise)',
  ours: true,
  create: (url) => OursQueueAdapter.create(url, 'leased', { maxSize: 1_000_000 }),
};

/** Rows of the enqueue table (ours enqueues the same way in either drain mode). */
export const ENQUEUE_LIBRARIES: readonly QueueLibrary[] = [
  {
    id: 'ours',
    label: 'nestjs-redis-lock (defaults: events on)',
    ours: true,
    create: (url) => OursQueueAdapter.create(url, 'leased'),
  },
  OURS_BOUNDED,
  BULLMQ,
];

/** Rows of the drain tables. */
export const DRAIN_LIBRARIES: readonly QueueLibrary[] = [
  OURS_LEASED,
  {
    id: 'ours-pop',
    label: 'nestjs-redis-lock, pop (defaults: events on)',
    ours: true,
    create: (url) => OursQueueAdapter.create(url, 'pop'),
  },
  OURS_LEASED_BARE,
  OURS_BATCH,
  BULLMQ,
  BULLMQ_REMOVE,
];

/** Rows of the groups table: BullMQ's open-source edition has no groups (BullMQ Pro has). */
export const GROUP_LIBRARIES: readonly QueueLibrary[] = [OURS_LEASED];

/** Rows of the rate-limited table. */
export const LIMITED_LIBRARIES: readonly QueueLibrary[] = [OURS_LEASED, BULLMQ];

/**
 * Rows of the "completion seen on another instance" table: ours `enqueue` + `waitFor`, BullMQ
 * `add` + `job.waitUntilFinished(queueEvents)` (its defaults: completed jobs kept, so a job that
 * finished before the wait began is still found).
 */
export const WAIT_LIBRARIES: readonly QueueLibrary[] = [OURS_LEASED, BULLMQ];

/** Rows of the flows table: ours `enqueueFlow`, BullMQ `FlowProducer` (both with defaults). */
export const FLOW_LIBRARIES: readonly QueueLibrary[] = [OURS_LEASED, BULLMQ];

/** Rows of the cancel table: ours only (see `NOT_SUPPORTED.cancel`). */
export const CANCEL_LIBRARIES: readonly QueueLibrary[] = [OURS_LEASED];

/** Every queue row, for the child processes that set one up by id. */
export const QUEUE_LIBRARIES: readonly QueueLibrary[] = [
  ...ENQUEUE_LIBRARIES,
  ...DRAIN_LIBRARIES.filter((l) => l !== BULLMQ),
];

/** The queue row with id `id`; throws for an unknown id. */
export function queueLibrary(id: string): QueueLibrary {
  const library = QUEUE_LIBRARIES.find((l) => l.id === id);
  if (!library) throw new Error(`unknown queue library '${id}'`);
  return library;
}

/** Why a library has no row in a feature table (shown under it). */
export const NOT_SUPPORTED: Readonly<Record<string, string>> = {
  groups: `${BULLMQ_NAME}: not run — the open-source bullmq has no groups (a BullMQ Pro feature)`,
  cancel:
    `${BULLMQ_NAME}: not run — \`Worker.cancelJob(id)\` aborts a job only in the process of ` +
    'the Worker that runs it; bullmq has no cancel of a running job from another process ' +
    '(bullmq issues #632, #3768)',
};
