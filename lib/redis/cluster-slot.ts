import generateSlot = require('cluster-key-slot');

/**
 * The Redis Cluster hash slot of `key`, computed like Redis does: CRC16 of the key's UTF-8 bytes
 * modulo 16384 — or, when the key has a hash tag (the first `{` followed later by a `}` with at
 * least one byte between them), of the tag only. The bytes are the ones ioredis sends (Node's
 * UTF-8 encoding, which turns a lone surrogate into U+FFFD), so they are hashed as a Buffer.
 * @example
 * clusterKeySlot('lock:{order:42}') === clusterKeySlot('lock:{order:42}:fence') // true
 */
export function clusterKeySlot(key: string): number {
  return generateSlot(Buffer.from(key, 'utf8'));
}
