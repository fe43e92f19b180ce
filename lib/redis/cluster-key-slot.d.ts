// cluster-key-slot (the slot calculator ioredis uses) ships no type declarations.
declare module 'cluster-key-slot' {
  /**
   * The Redis Cluster hash slot (0–16383) of a key: CRC16 of the key, or of its hash tag.
   * A string is encoded by the package itself; a Buffer is hashed byte for byte.
   */
  function generate(key: string | Buffer): number;
  namespace generate {
    /** The common slot of all the keys, or `-1` when they map to different slots. */
    function generateMulti(keys: ReadonlyArray<string | Buffer>): number;
  }
  export = generate;
}
