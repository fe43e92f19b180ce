import { Redlock as SesamecareRedlock } from '@sesamecare-oss/redlock';
import Redlock from 'redlock';
import { packageVersion } from '../support/package-version';
import type { LockLibrary } from './lock-adapter';
import { FAIR_FLOOR } from './fair-floor.adapter';
import { OriginalDesignAdapter } from './original-design.adapter';
import { OursLockAdapter } from './ours-lock.adapter';
import { RedisSemaphoreAdapter } from './redis-semaphore.adapter';
import { redlockAdapter } from './redlock-family.adapter';

/**
 * Every row of the lock tables, ours first. The order here is only the first round's: the run
 * rotates it every round so that no library always goes first (or right after a heavy one).
 */
export const LOCK_LIBRARIES: readonly LockLibrary[] = [
  {
    id: 'ours',
    label: 'nestjs-redis-lock',
    ours: true,
    create: (url) => OursLockAdapter.create(url, true),
  },
  {
    id: 'ours-unfair',
    label: 'nestjs-redis-lock (fair: false)',
    ours: true,
    create: (url) => OursLockAdapter.create(url, false),
  },
  {
    id: 'redlock',
    label: `redlock ${packageVersion('redlock')}`,
    ours: false,
    // redlock 5 is typed against its own ioredis declarations; the client is this process's ioredis.
    create: redlockAdapter((client) => new Redlock([client as never])),
  },
  {
    id: 'sesamecare-redlock',
    label: `@sesamecare-oss/redlock ${packageVersion('@sesamecare-oss/redlock')}`,
    ours: false,
    // The maintained fork of redlock 5.
    create: redlockAdapter((client) => new SesamecareRedlock([client])),
  },
  {
    id: 'redis-semaphore',
    label: `redis-semaphore ${packageVersion('redis-semaphore')} Mutex`,
    ours: false,
    create: (url) => RedisSemaphoreAdapter.create(url),
  },
  {
    id: 'original',
    label: 'original design (SET NX PX, 100 ms poll)',
    ours: false,
    create: (url) => OriginalDesignAdapter.create(url),
  },
];

/**
 * The rows of the contended shape: every lock library, and the fair floor (`FAIR_FLOOR`), which
 * shows there what a fair handoff between processes costs at the least. Targets compare ours with
 * `LOCK_LIBRARIES` only.
 */
export const CONTENDED_LIBRARIES: readonly LockLibrary[] = [...LOCK_LIBRARIES, FAIR_FLOOR];

/** The library with this id (the fair floor's too); throws for an unknown id. */
export function lockLibrary(id: string): LockLibrary {
  const found = CONTENDED_LIBRARIES.find((l) => l.id === id);
  if (!found) throw new Error(`unknown lock library '${id}'`);
  return found;
}
