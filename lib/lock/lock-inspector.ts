// What `LockService.inspect` reads of a lock (one Lua script, then the owner records), and the
// owner record that maps this instance's token tag to its `instanceId` so that others can read it.
import type { RedisLockConnection } from '../redis/redis-connection';
import type { LockInspection } from './lock-inspection';
import type { LockRedisKeys } from './lock-keys';
import { LOCK_SCRIPTS } from './lock-scripts';
import { tokenTag, tokenTime } from './lock-tokens';

/** How long an instance's owner record lives, and how often it is written again, in ms. */
const OWNER_TTL_MS = 60_000;
const OWNER_REFRESH_MS = 20_000;

/** At most this many line entries are shown by `inspect`. */
const INSPECT_LINE_MAX = 100;

/** Reads locks for `inspect` and keeps this instance's owner record (single-node stores only). */
export class LockInspector {
  private ownerTimer?: NodeJS.Timeout;

  /**
   * @param tag this instance's token tag
   * @param warn told when writing the owner record fails
   */
  constructor(
    private readonly connection: RedisLockConnection,
    private readonly tag: string,
    private readonly warn: (what: string, err: unknown) => void,
  ) {}

  /** Registers this instance's tag -> `instanceId` now, and again while it runs. */
  register(): void {
    const write = () =>
      this.connection
        .call('lock owner SET', (c) =>
          c.set(this.ownerKey(this.tag), this.connection.options.instanceId, 'PX', OWNER_TTL_MS),
        )
        .catch((err) => this.warn('registering the instance id failed', err));
    this.ownerTimer = setInterval(write, OWNER_REFRESH_MS);
    this.ownerTimer.unref();
    // Not awaited: a slow Redis must not hold up the start (connectTimeoutMs decides that).
    void write();
  }

  /** Stops refreshing the owner record (module shutdown). */
  close(): void {
    clearInterval(this.ownerTimer);
  }

  /**
   * What Redis shows of the lock `k` (named `name`) right now.
   * @param localWaiters this instance's callers waiting for it, read once Redis has answered
   */
  async inspect(
    k: LockRedisKeys,
    name: string,
    localWaiters: () => number,
  ): Promise<LockInspection> {
    const reply = (await this.connection.run(
      LOCK_SCRIPTS.inspect,
      [k.value, k.fence, k.line, k.entries, k.shared],
      [INSPECT_LINE_MAX],
    )) as Array<string | number | null>;
    const [value, pttl, fence, lineLength, sharedCount] = reply;
    const token = typeof value === 'string' ? value.replace(/\*$/, '') : undefined;
    const holders = reply.slice(5, 5 + Number(sharedCount)).map(String);
    const holder = holders.length > 0 ? undefined : token;
    const waiting: Array<{ token: string; mode: string }> = [];
    for (let i = 5 + holders.length; i < reply.length; i += 2) {
      waiting.push({ token: String(reply[i]), mode: String(reply[i + 1]).split(':')[3] });
    }
    const owners = await this.owners([holder, ...holders, ...waiting.map((w) => w.token)]);
    return {
      key: name,
      held: token !== undefined,
      ...(holder !== undefined && {
        owner: owners.get(tokenTag(holder)),
        since: tokenTime(holder),
      }),
      ...(token !== undefined && { ttlMs: Number(pttl) >= 0 ? Number(pttl) : undefined }),
      ...(holders.length > 0 && {
        sharedHolders: holders.map((t) => ({
          owner: owners.get(tokenTag(t)),
          since: tokenTime(t),
        })),
      }),
      fence: fence === null ? undefined : Number(fence),
      lineLength: Number(lineLength),
      line: waiting.map((w) => ({
        owner: owners.get(tokenTag(w.token)),
        since: tokenTime(w.token),
        mode: w.mode === 'h' ? 'handoff' : 'wake',
      })),
      localWaiters: localWaiters(),
    };
  }

  private ownerKey(tag: string): string {
    return `${this.connection.options.lock.keyPrefix}owner:{${tag}}`;
  }

  /** Instance ids by tag, for the tags of `tokens` (one GET per distinct tag, pipelined). */
  private async owners(tokens: Array<string | undefined>): Promise<Map<string, string>> {
    const tags = [...new Set(tokens.filter((t) => t !== undefined).map((t) => tokenTag(t!)))];
    const owners = new Map<string, string>();
    if (tags.length === 0) return owners;
    const ids = await this.connection.call('lock owner GET', (c) =>
      Promise.all(tags.map((tag) => c.get(this.ownerKey(tag)))),
    );
    tags.forEach((tag, i) => ids[i] !== null && owners.set(tag, ids[i]!));
    return owners;
  }
}
