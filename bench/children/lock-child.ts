/**
 * Entry point of the bench's child processes (started by `BenchChild.start`): holds one lock
 * adapter at a time and runs one side of the contended, crowd, handoff and parked shapes on
 * request.
 * Argument: the child's index.
 */
import 'reflect-metadata';
import { Redis } from 'ioredis';
import type { LockAdapter } from '../adapters/lock-adapter';
import { lockLibrary } from '../adapters/lock-libraries';
import { runContended, type ContendedParams } from '../shapes/contended.child';
import { HandoffRole } from '../shapes/handoff.child';
import { ParkedRole, type ParkParams } from '../shapes/parked.child';
import { PubSubFloorRole } from '../shapes/pubsub-floor.child';
import type { ChildSetup } from '../support/bench-child';
import { serveRequests, type ChildOperation } from '../support/child-server';
import { monotonicMs } from '../support/monotonic-clock';
import { installRequestCounter, uncountedClient } from '../support/request-counter';
import { warmUpAdapter } from './adapter-warm-up';

installRequestCounter();

const index = process.argv[2];

let adapter: LockAdapter | undefined;
let marker: Redis | undefined;
let role: HandoffRole | undefined;
let parked: ParkedRole | undefined;
const floor = new PubSubFloorRole();

function ready(): { adapter: LockAdapter; marker: Redis; role: HandoffRole; parked: ParkedRole } {
  if (!adapter || !marker || !role || !parked) throw new Error('no library set up');
  return { adapter, marker, role, parked };
}

async function teardown(): Promise<void> {
  const closing = [adapter?.close(), marker?.quit()];
  adapter = marker = role = parked = undefined;
  await Promise.allSettled(closing);
}

const operations: Record<string, ChildOperation> = {
  async setup({ library, url, key, warmupPairs }: ChildSetup) {
    await teardown();
    adapter = await lockLibrary(library).create(url);
    marker = uncountedClient(new Redis(url));
    role = new HandoffRole(adapter);
    parked = new ParkedRole(adapter);
    await marker.ping();
    // Each child on a key of its own: the children's warm-ups do not wait for one another.
    const holder = await lockLibrary(library).create(url);
    try {
      await warmUpAdapter(adapter, holder, `${key}:warm-up:${index}`, warmupPairs);
    } finally {
      await holder.close();
    }
  },
  teardown,
  clock: () => monotonicMs(),
  contended: (params: ContendedParams) => runContended(ready().adapter, ready().marker, params),
  hold: ({ key }: { key: string }) => ready().role.hold(key),
  release: ({ delayMs }: { delayMs: number }) => ready().role.release(delayMs),
  startWait: ({ key }: { key: string }) => ready().role.startWait(key),
  finishWait: () => ready().role.finishWait(),
  parkStart: (params: ParkParams) => ready().parked.start(params),
  parkFinish: ({ deadline }: { deadline: number }) => ready().parked.finish({ deadline }),
  floorSubscribe: ({ url, channel }: { url: string; channel: string }) =>
    floor.subscribe(url, channel),
  floorExpect: () => floor.expect(),
  floorReceived: () => floor.received(),
  floorPublish: ({ url, channel, delayMs }: { url: string; channel: string; delayMs: number }) =>
    floor.publish(url, channel, delayMs),
  floorClose: () => floor.close(),
};

serveRequests(operations, () => Promise.allSettled([teardown(), floor.close()]));
