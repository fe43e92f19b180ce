import { Redis } from 'ioredis';
import { monotonicMs, sleep } from '../support/monotonic-clock';
import { uncountedClient } from '../support/request-counter';

/**
 * One process's part in the pub/sub floor probe: plain ioredis `PUBLISH` in one process,
 * `SUBSCRIBE` in another, with the same idle gaps as the handoff shape. What a wake-up by
 * pub/sub can cost at the least on this machine, without any lock logic.
 */
export class PubSubFloorRole {
  private subscriber?: Redis;
  private publisher?: Redis;
  private next?: Promise<number>;

  /** Subscriber: subscribes to `channel`; resolves once the subscription is active. */
  async subscribe(url: string, channel: string): Promise<void> {
    this.subscriber = uncountedClient(new Redis(url));
    await this.subscriber.subscribe(channel);
  }

  /** Subscriber: starts waiting for the next message. */
  expect(): void {
    const subscriber = this.subscriber;
    if (!subscriber) throw new Error('expect before subscribe');
    this.next = new Promise((resolve) => subscriber.once('message', () => resolve(monotonicMs())));
  }

  /** Subscriber: monotonic ms at which the expected message arrived. */
  received(): Promise<number> {
    if (!this.next) throw new Error('received before expect');
    return this.next;
  }

  /** Publisher: after `delayMs`, notes the time and publishes on `channel`. */
  async publish(url: string, channel: string, delayMs: number): Promise<number> {
    if (!this.publisher) {
      this.publisher = uncountedClient(new Redis(url));
      await this.publisher.ping();
    }
    await sleep(delayMs);
    const sentAt = monotonicMs();
    await this.publisher.publish(channel, 'x');
    return sentAt;
  }

  /** Closes this role's connections. */
  async close(): Promise<void> {
    const clients = [this.subscriber, this.publisher];
    this.subscriber = this.publisher = this.next = undefined;
    await Promise.allSettled(clients.map((c) => c?.quit()));
  }
}
