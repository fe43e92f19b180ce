import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster, Redis } from 'ioredis';
import { clusterMasterOf } from './cluster-slot';

/**
 * The helper that turns a Redis TIME reply into its microseconds as a string (`timeMicros`): a
 * prelude of the fence counter, of the line of waiting processes and of the rate limiter.
 */
export const TIME_MICROS_PRELUDE = join(__dirname, 'scripts', 'time-micros.lua');

/** Replies and failures that an ioredis `Cluster` follows or retries by itself. */
const CLUSTER_RETRIED =
  /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) |Connection is closed|Stream isn't writeable/;

/**
 * The scripts sent on each connection since it (re)connected. A connection's first call of a
 * script is an EVAL, which caches it, and the later ones EVALSHA: Redis then runs every call in
 * the order it was sent. Falling back only on a NOSCRIPT reply would send the EVAL after that
 * reply, behind every command written meanwhile — a release meant to undo the call would run
 * before it. A restarted server, a promoted replica (whose cache is empty) and a new Cluster node
 * are all reached on a new connection, or a reconnected one, which starts empty.
 */
const sentOn = new WeakMap<Redis, Set<string>>();

function scriptsSentOn(client: Redis): Set<string> {
  let sent = sentOn.get(client);
  if (!sent) {
    const fresh = new Set<string>();
    // What a server had is not known once the connection closed: the next calls EVAL again.
    const forget = () => fresh.clear();
    client.on('close', forget);
    client.on('ready', forget);
    sentOn.set(client, fresh);
    sent = fresh;
  }
  return sent;
}

function isCluster(client: Redis | Cluster): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true;
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

function isClusterRetried(err: unknown): boolean {
  return err instanceof Error && CLUSTER_RETRIED.test(err.message);
}

/**
 * Sends a connection's first call of a script by EVAL and marks it sent. An EVAL refused before it
 * ran (BUSY, LOADING, MOVED, a refused permission) cached nothing: the mark is taken back, so the
 * next call is an EVAL again rather than an EVALSHA answered NOSCRIPT, whose EVAL would come after
 * the calls sent behind it.
 */
function evalFirst(sent: Set<string>, sha: string, call: Promise<unknown>): Promise<unknown> {
  sent.add(sha);
  return call.catch((err: unknown) => {
    sent.delete(sha);
    throw err;
  });
}

/**
 * One Lua script file. A connection's first call of it is an EVAL and the later ones EVALSHA
 * (`sentOn`); through a `Cluster` instance, which picks the connection itself, every call is an
 * EVAL (only its retries and a slot map not yet known go that way). A NOSCRIPT reply on a
 * connection that had it (a SCRIPT FLUSH on a live connection) is answered by sending it again
 * with EVAL. Keys go only through KEYS so the call is routed (and allowed) on Cluster.
 */
export class LuaScript {
  readonly source: string;
  readonly sha: string;

  /**
   * @param file absolute path of the `.lua` file
   * @param preludes absolute paths of `.lua` files of helpers the script shares with others, put
   *   before it in this order (one EVAL body; see lib/waiting/scripts/includes/fence-counter.lua)
   */
  constructor(
    readonly name: string,
    file: string,
    ...preludes: string[]
  ) {
    // A prelude that several others need is named by each of them: it is put in once, first.
    this.source = [...new Set([...preludes, file])].map((f) => readFileSync(f, 'utf8')).join('\n');
    this.sha = createHash('sha1').update(this.source).digest('hex');
  }

  run(
    client: Redis | Cluster,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    // Not an async function: the hot paths make tens of thousands of calls a second, and each
    // layer of promise costs.
    if (isCluster(client)) return client.eval(this.source, keys.length, ...keys, ...args);
    const sent = scriptsSentOn(client);
    if (!sent.has(this.sha)) {
      return evalFirst(sent, this.sha, client.eval(this.source, keys.length, ...keys, ...args));
    }
    return client.evalsha(this.sha, keys.length, ...keys, ...args).catch((err: unknown) => {
      if (!isNoScript(err)) throw err;
      // The server lost its scripts on this connection: the others go by EVAL again too.
      sent.clear();
      return evalFirst(sent, this.sha, client.eval(this.source, keys.length, ...keys, ...args));
    });
  }

  /**
   * Cluster: runs the script on `node`, the connection of the master that serves the keys' slot
   * (`clusterMasterOf`), instead of through the `Cluster` instance, which costs a few µs of client
   * CPU per command (its routing and retry wrappers; bench/cluster-cpu.ts). Whatever the Cluster
   * instance would have followed or retried — `MOVED`/`ASK` (the slot moved: Redis ran nothing),
   * `TRYAGAIN`, `CLUSTERDOWN`, a closed connection — is sent again through `cluster`, which
   * refreshes its slot map.
   */
  runOn(
    node: Redis,
    cluster: Cluster,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return this.run(node, keys, args).catch((err: unknown) => {
      if (isClusterRetried(err)) return this.run(cluster, keys, args);
      throw err;
    });
  }

  /**
   * Runs the script and, right behind it on the same connection, `WAIT replicas timeoutMs`:
   * resolves with the script's reply and the number of replicas that acknowledged every write
   * sent so far on that connection. On Cluster both go to the connection of the master of the
   * keys' slot, as `runOn`; what the `Cluster` instance would follow or retry goes through it, in
   * one pipeline (so on one node).
   * @param onRan called once the script's reply (or failure) is in, before `WAIT` answers (through
   *   the `Cluster` instance, when both are in): what the caller sends next on another connection
   *   then reaches Redis after the script
   */
  async runThenWait(
    client: Redis | Cluster,
    keys: readonly string[],
    args: readonly (string | number)[],
    replicas: number,
    timeoutMs: number,
    onRan?: () => void,
  ): Promise<[reply: unknown, acknowledged: number]> {
    if (!isCluster(client))
      return this.sendThenWait(client, keys, args, replicas, timeoutMs, onRan);
    const node = clusterMasterOf(client, keys[0]);
    if (node !== undefined) {
      let retried = false;
      try {
        return await this.sendThenWait(node, keys, args, replicas, timeoutMs, (err) => {
          // Refused before it ran: sent again below, and only then has it run.
          if (isClusterRetried(err)) retried = true;
          else onRan?.();
        });
      } catch (err) {
        if (!retried) throw err;
      }
    }
    try {
      return await this.pipelineThenWait(client, keys, args, replicas, timeoutMs);
    } finally {
      onRan?.();
    }
  }

  /** The script then `WAIT`, back to back on one connection: still one round trip. */
  private async sendThenWait(
    client: Redis,
    keys: readonly string[],
    args: readonly (string | number)[],
    replicas: number,
    timeoutMs: number,
    onRan?: (err?: unknown) => void,
  ): Promise<[reply: unknown, acknowledged: number]> {
    const known = scriptsSentOn(client);
    const send = (byEval: boolean) => {
      const ran = byEval
        ? evalFirst(known, this.sha, client.eval(this.source, keys.length, ...keys, ...args))
        : client.evalsha(this.sha, keys.length, ...keys, ...args);
      const acknowledged = client.wait(replicas, timeoutMs);
      // Awaited only after the script succeeded.
      acknowledged.catch(() => undefined);
      return { ran, acknowledged };
    };
    let sent = send(!known.has(this.sha));
    let reply: unknown;
    try {
      // The script's own reply tells when it ran.
      reply = await sent.ran.catch((err: unknown) => {
        if (!isNoScript(err)) throw err;
        known.clear();
        // That WAIT covered nothing of this call: the EVAL gets its own.
        sent = send(true);
        return sent.ran;
      });
    } catch (err) {
      onRan?.(err);
      throw err;
    }
    onRan?.();
    return [reply, Number(await sent.acknowledged)];
  }

  /**
   * Through the `Cluster` instance: the script and `WAIT` in one pipeline, which ioredis sends to
   * the keys' node. The script goes by EVAL, as every call through the instance (see `run`).
   */
  private async pipelineThenWait(
    client: Cluster,
    keys: readonly string[],
    args: readonly (string | number)[],
    replicas: number,
    timeoutMs: number,
  ): Promise<[reply: unknown, acknowledged: number]> {
    const pipeline = client.pipeline();
    pipeline.eval(this.source, keys.length, ...keys, ...args);
    pipeline.wait(replicas, timeoutMs);
    const results = (await pipeline.exec()) ?? [];
    for (const [err] of results) if (err) throw err;
    return [results[0][1], Number(results[1][1])];
  }
}
