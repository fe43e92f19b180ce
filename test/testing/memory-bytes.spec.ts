import { MemoryRedis, MemoryRedisServer } from '../../lib/testing';

// The in-memory Redis is binary-safe, as Redis is: a value is a string of bytes. Every byte
// 0..255 and UTF-8 text (non-ASCII, emoji) round-trip exactly through each place a value crosses:
// commands (string and Buffer arguments, text and `…Buffer` replies), Lua and pub/sub.

/** Every byte, 0 to 255: not valid UTF-8 (a UTF-8 round trip would change it). */
const ALL_BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
const TEXT = 'café ☕ 🎉 naïve — 日本語';

describe('MemoryRedis: values are bytes, as in Redis', () => {
  let server: MemoryRedisServer;
  let client: MemoryRedis;

  beforeEach(() => {
    server = new MemoryRedisServer();
    client = new MemoryRedis(server);
  });
  afterEach(() => client.disconnect());

  it('SET/GET: every byte and UTF-8 text come back exactly; STRLEN counts bytes', async () => {
    await client.set(ALL_BYTES, ALL_BYTES);
    expect(await client.getBuffer(ALL_BYTES)).toEqual(ALL_BYTES);
    expect(await client.strlen(ALL_BYTES)).toBe(256);
    // Read as text, as ioredis reads it: invalid UTF-8 becomes U+FFFD.
    expect(await client.get(ALL_BYTES)).toBe(ALL_BYTES.toString());

    await client.set(`text:${TEXT}`, TEXT);
    expect(await client.get(`text:${TEXT}`)).toBe(TEXT);
    expect(await client.getBuffer(Buffer.from(`text:${TEXT}`))).toEqual(Buffer.from(TEXT));
    expect(await client.strlen(`text:${TEXT}`)).toBe(Buffer.byteLength(TEXT));
    expect(await client.keys('text:*')).toEqual([`text:${TEXT}`]);
    expect(await client.mget(`text:${TEXT}`, 'none')).toEqual([TEXT, null]);
  });

  it('HSET/HGET: binary and text fields and values; HSTRLEN counts bytes', async () => {
    await client.hset('h', ALL_BYTES, ALL_BYTES);
    await client.hset('h', { [TEXT]: TEXT });
    expect(await client.hgetBuffer('h', ALL_BYTES)).toEqual(ALL_BYTES);
    expect(await client.hget('h', TEXT)).toBe(TEXT);
    expect(await client.hstrlen('h', ALL_BYTES)).toBe(256);
    expect(await client.hstrlen('h', TEXT)).toBe(Buffer.byteLength(TEXT));
    const all = (await client.hgetallBuffer('h')) as Record<string, Buffer>;
    expect(all[TEXT]).toEqual(Buffer.from(TEXT));
    expect(all[ALL_BYTES.toString()]).toEqual(ALL_BYTES);
    expect((await client.hgetall('h'))[TEXT]).toBe(TEXT);
  });

  it("a Lua script: KEYS, ARGV, redis.call and the script's reply carry bytes; # counts bytes", async () => {
    const script = `
      redis.call('SET', KEYS[1], ARGV[1])
      local v = redis.call('GET', KEYS[1])
      return { #v, #ARGV[2], v, ARGV[2], string.char(0, 127, 128, 255), redis.call('HGET', KEYS[2], ARGV[2]) }`;
    await client.hset(Buffer.from('h:é'), TEXT, TEXT);
    const reply = (await client.evalBuffer(script, 2, `k:${TEXT}`, 'h:é', ALL_BYTES, TEXT)) as [
      number,
      number,
      Buffer,
      Buffer,
      Buffer,
      Buffer,
    ];
    expect(reply).toEqual([
      256,
      Buffer.byteLength(TEXT),
      ALL_BYTES,
      Buffer.from(TEXT),
      Buffer.from([0, 127, 128, 255]),
      Buffer.from(TEXT),
    ]);
    expect(await client.getBuffer(`k:${TEXT}`)).toEqual(ALL_BYTES);
    expect(await client.eval('return ARGV[1]', 0, TEXT)).toBe(TEXT);
    // A script's bytes written with string.char read back with GETBUFFER (as record-metrics.lua).
    await client.eval("redis.call('SET', KEYS[1], string.char(33, 200, 11, 1))", 1, 'blob');
    expect(await client.getBuffer('blob')).toEqual(Buffer.from([33, 200, 11, 1]));
  });

  it('cjson in a script: text stays UTF-8 bytes through encode and decode, \\u escapes too', async () => {
    const script = `
      local t = cjson.decode(ARGV[1])
      return { t.text, t.escaped, cjson.encode({ text = t.text }) }`;
    const json = `{"text":${JSON.stringify(TEXT)},"escaped":"\\u00e9\\ud83c\\udf89"}`;
    expect(await client.eval(script, 0, json)).toEqual([
      TEXT,
      'é🎉',
      JSON.stringify({ text: TEXT }),
    ]);
  });

  it('cjson.decode refuses an escaped surrogate without its pair, as lua-cjson does', async () => {
    const script = `
      local ok, err = pcall(cjson.decode, ARGV[1])
      return { tostring(ok), type(err) == 'string' and err or err.s }`;
    const decode = (json: string) => client.eval(script, 0, json);
    expect(await decode('{"s":"ab\\ud83d"}')).toEqual([
      'false',
      'Expected value but found invalid unicode escape code at character 9',
    ]);
    for (const json of ['"\\udc00"', '"\\ud83d\\ud83d"', '"\\ud83d\\u0041"'])
      expect(await decode(json)).toEqual([
        'false',
        'Expected value but found invalid unicode escape code at character 2',
      ]);
    // A pair, and a backslash escaped before 'u' (no escape at all), decode.
    expect(await decode('{"s":"\\ud83d\\ude00 \\\\ud83d"}')).toEqual(['true', '\u{1F600} \\ud83d']);
  });

  it('pub/sub: a message arrives as the text sent (message) and as its bytes (messageBuffer)', async () => {
    const subscriber = new MemoryRedis(server);
    const texts: Array<[string, string]> = [];
    const buffers: Array<[Buffer, Buffer]> = [];
    const patterned: Buffer[] = [];
    const all = new Promise<void>((resolve) =>
      subscriber.on('pmessageBuffer', (_pattern: string, _channel: Buffer, message: Buffer) => {
        patterned.push(message);
        if (patterned.length === 3) resolve();
      }),
    );
    subscriber.on('message', (channel: string, message: string) => texts.push([channel, message]));
    subscriber.on('messageBuffer', (channel: Buffer, message: Buffer) =>
      buffers.push([channel, message]),
    );
    await subscriber.subscribe(`ch:${TEXT}`);
    await subscriber.psubscribe('ch:*');
    await client.publish(`ch:${TEXT}`, TEXT);
    await client.publish(Buffer.from(`ch:${TEXT}`), ALL_BYTES);
    await client.eval("redis.call('PUBLISH', KEYS[1], ARGV[1])", 1, `ch:${TEXT}`, ALL_BYTES);
    await all;
    expect(texts.map(([channel]) => channel)).toEqual(Array(3).fill(`ch:${TEXT}`));
    expect(texts[0][1]).toBe(TEXT);
    expect(buffers.map(([, message]) => message)).toEqual([
      Buffer.from(TEXT),
      ALL_BYTES,
      ALL_BYTES,
    ]);
    expect(buffers[0][0]).toEqual(Buffer.from(`ch:${TEXT}`));
    expect(patterned).toEqual([Buffer.from(TEXT), ALL_BYTES, ALL_BYTES]);
    subscriber.disconnect();
  });

  it('orders sorted set members by their bytes, as Redis compares them (ZRANGE, BYLEX)', async () => {
    // UTF-16 order differs: '😀' (a surrogate pair) sorts before '\uffff' there, after it in bytes.
    await client.zadd('z', 0, '😀', 0, '\uffff', 0, 'é', 0, 'a', 0, Buffer.from([0x80]));
    const inBytes = [
      Buffer.from('a'),
      Buffer.from([0x80]),
      Buffer.from('é'),
      Buffer.from('\uffff'),
      Buffer.from('😀'),
    ];
    expect(await client.zrangeBuffer('z', 0, -1)).toEqual(inBytes);
    expect(await client.zrangebylex('z', '(é', '+')).toEqual(['\uffff', '😀']);
    expect(await client.zrangebylexBuffer('z', '-', '(é')).toEqual(inBytes.slice(0, 2));
  });
});

describe("MemoryRedis streams: XTRIM, as obliterate empties a queue's events", () => {
  it('keeps the last entries and the last id given out: the next XADD * id still rises', async () => {
    const client = new MemoryRedis(new MemoryRedisServer());
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await client.xadd('s', '*', 'n', String(i)))!);
      expect(await client.xtrim('s', 'MAXLEN', 1)).toBe(2);
      const left = (await client.xrange('s', '-', '+')) as [string, string[]][];
      expect(left.map((entry) => entry[0])).toEqual([ids[2]]);
      expect(await client.xtrim('s', 'MAXLEN', '=', 0)).toBe(1);
      expect(await client.xlen('s')).toBe(0);
      const next = (await client.xadd('s', '*', 'n', 'after'))!;
      const [ms, seq] = next.split('-').map(Number);
      const [lastMs, lastSeq] = ids[2].split('-').map(Number);
      expect(ms > lastMs || (ms === lastMs && seq > lastSeq)).toBe(true);
      await expect(client.xtrim('s', 'MINID' as never, 0)).rejects.toThrow(/MAXLEN/);
    } finally {
      client.disconnect();
    }
  });
});
