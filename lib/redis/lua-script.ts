import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';

/**
 * One Lua script file, loaded once and called by EVALSHA; when Redis answers NOSCRIPT (restart,
 * SCRIPT FLUSH, a new Cluster node) it is sent once with EVAL, which also caches it again.
 * Keys go only through KEYS so the call is routed (and allowed) on Cluster.
 */
export class LuaScript {
  readonly source: string;
  readonly sha: string;

  /** @param file absolute path of the `.lua` file */
  constructor(
    readonly name: string,
    file: string,
  ) {
    this.source = readFileSync(file, 'utf8');
    this.sha = createHash('sha1').update(this.source).digest('hex');
  }

  async run(
    client: Redis | Cluster,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    try {
      return await client.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
        return client.eval(this.source, keys.length, ...keys, ...args);
      }
      throw err;
    }
  }
}
