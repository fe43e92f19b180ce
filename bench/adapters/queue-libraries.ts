import { packageVersion } from '../support/package-version';
import { BullmqAdapter } from './bullmq.adapter';
import { OursQueueAdapter } from './ours-queue.adapter';
import type { QueueLibrary } from './queue-adapter';

const BULLMQ: QueueLibrary = {
  id: 'bullmq',
  label: `bullmq ${packageVersion('bullmq')} (removeOnComplete)`,
  ours: false,
  create: (url) => BullmqAdapter.create(url),
};

/** Rows of the enqueue table (ours enqueues the same way in either drain mode). */
export const ENQUEUE_LIBRARIES: readonly QueueLibrary[] = [
  {
    id: 'ours',
    label: 'nestjs-redis-lock',
    ours: true,
    create: (url) => OursQueueAdapter.create(url, 'leased'),
  },
  BULLMQ,
];

/** Rows of the drain tables. */
export const DRAIN_LIBRARIES: readonly QueueLibrary[] = [
  {
    id: 'ours-leased',
    label: 'nestjs-redis-lock, leased (worker: claim + ack)',
    ours: true,
    create: (url) => OursQueueAdapter.create(url, 'leased'),
  },
  {
    id: 'ours-pop',
    label: 'nestjs-redis-lock, pop',
    ours: true,
    create: (url) => OursQueueAdapter.create(url, 'pop'),
  },
  BULLMQ,
];

/** Rows of the groups table: BullMQ's open-source edition has no groups (BullMQ Pro has). */
export const GROUP_LIBRARIES: readonly QueueLibrary[] = [DRAIN_LIBRARIES[0]];

/** Rows of the rate-limited table. */
export const LIMITED_LIBRARIES: readonly QueueLibrary[] = [DRAIN_LIBRARIES[0], BULLMQ];

/** Why a library has no row in a feature table (shown under it). */
export const NOT_SUPPORTED: Readonly<Record<string, string>> = {
  groups: `${BULLMQ.label}: not run — the open-source bullmq has no groups (a BullMQ Pro feature)`,
};
