/**
 * The in-memory Redis holds every key, value, member, channel and message as Redis does: a string
 * of bytes. Inside it (the keyspace, the commands, the Lua engine) a byte string is a JavaScript
 * string of one char per byte (char codes 0..255, Node's `latin1`), so comparing two of them
 * compares their bytes and `length` is their size in bytes. Text crosses in and out as UTF-8 at
 * the client (`MemoryRedis`, as ioredis writes and reads a socket); Buffers cross as their bytes.
 */

/** Any char outside ASCII (where UTF-8 text and its bytes differ). */
const NON_ASCII = /[\u0080-\uffff]/;

/** The UTF-8 bytes of `text`, as ioredis sends a string argument. */
export function textToBytes(text: string): string {
  return NON_ASCII.test(text) ? Buffer.from(text, 'utf8').toString('latin1') : text;
}

/** `bytes` read as UTF-8, as ioredis reads a string reply (invalid sequences become U+FFFD). */
export function bytesToText(bytes: string): string {
  return NON_ASCII.test(bytes) ? Buffer.from(bytes, 'latin1').toString('utf8') : bytes;
}

/** The bytes of a Buffer (or any Uint8Array, e.g. a Lua string of fengari). */
export function bufferToBytes(buffer: Uint8Array): string {
  return Buffer.from(buffer.buffer, buffer.byteOffset, buffer.byteLength).toString('latin1');
}

/** `bytes` as a Buffer, as ioredis gives a reply of a `…Buffer` command. */
export function bytesToBuffer(bytes: string): Buffer {
  return Buffer.from(bytes, 'latin1');
}
