import type { Cluster, Redis } from 'ioredis';

/** Number of hash slots of a Redis Cluster. */
export const CLUSTER_SLOTS = 16_384;

/** CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0) lookup table, as Redis uses. */
const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    }
    table[i] = crc & 0xffff;
  }
  return table;
})();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc;
}

/**
 * The Redis Cluster hash slot of `key`, computed like Redis does: CRC16 of the key's UTF-8 bytes
 * modulo 16384 — or, when the key has a hash tag (the first `{` followed later by a `}` with at
 * least one byte between them), of the tag only.
 *
 * Written here rather than taken from `cluster-key-slot` (the calculator ioredis depends on): that
 * package, unmaintained, hashes the wrong bytes when an empty tag is followed by another `}`
 * (`'{}}'`, `'a{}b}c'`), where Redis hashes the whole key; the property test against
 * `CLUSTER KEYSLOT` (test/scaling/cluster.spec.ts) tries those keys on every run.
 * @example
 * clusterKeySlot('lock:{order:42}') === clusterKeySlot('lock:{order:42}:fence') // true
 */
export function clusterKeySlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8');
  const open = bytes.indexOf(0x7b); // '{'
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // '}'
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % CLUSTER_SLOTS;
  }
  return crc16(bytes) % CLUSTER_SLOTS;
}

/** Per slot, the shortest base-36 number whose CRC16 falls in it (built on first use). */
let slotTags: string[] | undefined;

/**
 * A short hash tag that Redis hashes to `slot` (`'{' + slotTag(s) + '}'` in a key puts the key in
 * slot `s`), so that one key per slot can be addressed from any other key of that slot. The table
 * is built once, on first use: about 160,000 CRC16s of 1–4 bytes, a few ms.
 * @example
 * clusterKeySlot(`fence:{${slotTag(clusterKeySlot('lock:{a}'))}}`) === clusterKeySlot('lock:{a}') // true
 */
export function slotTag(slot: number): string {
  if (!slotTags) {
    const tags = new Array<string>(CLUSTER_SLOTS);
    let missing = CLUSTER_SLOTS;
    for (let i = 0; missing > 0; i++) {
      const tag = i.toString(36);
      const s = crc16(Buffer.from(tag, 'latin1')) % CLUSTER_SLOTS;
      if (tags[s] === undefined) {
        tags[s] = tag;
        missing--;
      }
    }
    slotTags = tags;
  }
  return slotTags[slot];
}

/** What `clusterMasterOf` uses of ioredis' (undocumented) connection pool of a Cluster. */
interface ConnectionPool {
  getInstanceByKey(key: string): Redis | undefined;
}

/**
 * The connection of the master that serves `key`'s slot as `cluster`'s slot map says now (the
 * one ioredis would write a command on `key` to), when the Cluster and that connection are ready;
 * else `undefined`.
 */
export function clusterMasterOf(cluster: Cluster, key: string): Redis | undefined {
  if (cluster.status !== 'ready') return undefined;
  const node = cluster.slots[clusterKeySlot(key)]?.[0];
  if (node === undefined) return undefined;
  const pool = (cluster as unknown as { connectionPool?: ConnectionPool }).connectionPool;
  const redis = pool?.getInstanceByKey(node);
  return redis?.status === 'ready' ? redis : undefined;
}
