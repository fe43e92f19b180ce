import { createHash } from 'node:crypto';
import { bufferToBytes, bytesToBuffer, textToBytes } from './memory-bytes';
import { MemoryReplyError, MemoryStatus, type MemoryReply } from './memory-replies';

type LuaState = unknown;

interface Fengari {
  // fengari ships no types.
  lua: any;
  lauxlib: any;
  lualib: any;
  to_luastring(s: string): Uint8Array;
  to_jsstring(s: Uint8Array, from?: number, to?: number, replacement?: boolean): string;
}

let fengari: Fengari | undefined;

/**
 * Loads fengari (Lua 5.3 in plain JavaScript, an optional peer dependency) with integral floats
 * printed without `.0`, as Lua 5.1 (Redis's) prints every number.
 */
function loadFengari(): Fengari {
  if (fengari) return fengari;
  const before = process.env.FENGARICONF;
  process.env.FENGARICONF = JSON.stringify({ LUA_COMPAT_FLOATSTRING: true });
  try {
    fengari = require('fengari') as Fengari;
  } catch (err) {
    throw new Error(
      "nestjs-redis-lock/testing runs the library's Lua scripts in fengari: install it as a dev dependency (npm install --save-dev fengari)",
      { cause: err },
    );
  } finally {
    if (before === undefined) delete process.env.FENGARICONF;
    else process.env.FENGARICONF = before;
  }
  return fengari;
}

/**
 * Lua 5.1 as Redis runs it, over fengari's Lua 5.3: every number a double (fengari's integers
 * are 32-bit, and Redis's Lua has none: `tonumber`, `math.floor`/`ceil` and replies give floats),
 * `unpack`, and `string.format('%d', x)` truncating `x` as 5.1 does.
 */
const PRELUDE = `
unpack = table.unpack
local _tonumber, floor, ceil, format, pack = tonumber, math.floor, math.ceil, string.format, table.pack
tonumber = function(v, base)
  local n
  if base == nil then n = _tonumber(v) else n = _tonumber(v, base) end
  if n == nil then return nil end
  return n + 0.0
end
math.floor = function(x) return floor(x) + 0.0 end
math.ceil = function(x) return ceil(x) + 0.0 end
string.format = function(fmt, ...)
  local args, i = pack(...), 0
  local out = string.gsub(fmt, '%%([-+ #0]*%d*%.?%d*)([a-zA-Z%%])', function(flags, conv)
    if conv == '%' then return nil end
    i = i + 1
    if conv == 'd' or conv == 'i' then
      local v = _tonumber(args[i])
      if v ~= nil then
        if v >= 0 then args[i] = floor(v) + 0.0 else args[i] = ceil(v) + 0.0 end
      end
      return '%' .. flags .. '.0f'
    end
    return nil
  end)
  return format(out, table.unpack(args, 1, args.n))
end
`;

/** Runs one command of the in-memory Redis for a script; throws `MemoryReplyError`. */
export type ScriptCommand = (args: string[]) => MemoryReply;

/** A `cjson.decode` error worded as lua-cjson words it, raised as it is. */
class CjsonDecodeError extends Error {}

/**
 * JSON text (bytes) with its `\uXXXX` escapes replaced by the UTF-8 bytes they stand for, as
 * cjson decodes them: `JSON.parse` of the result gives byte strings. Escaped pairs (`\\`) are
 * skipped whole; a byte that must stay escaped in JSON (`"`, `\`, control) is escaped again.
 * Throws `CjsonDecodeError` for an escaped surrogate that is not a high one followed by a low one
 * (`\ud83d` alone, as `JSON.stringify` writes half an emoji): lua-cjson refuses those, where
 * `JSON.parse` would accept them.
 */
function unescapeToBytes(json: string): string {
  return json.replace(/(?:\\u[0-9a-fA-F]{4})+|\\[^u]/g, (m, at: number) => {
    if (m[1] !== 'u') return m;
    for (let i = 0; i < m.length; i += 6) {
      const unit = parseInt(m.slice(i + 2, i + 6), 16);
      if (unit < 0xd800 || unit > 0xdfff) continue;
      const next = i + 6 < m.length ? parseInt(m.slice(i + 8, i + 12), 16) : 0;
      if (unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) i += 6;
      else
        throw new CjsonDecodeError(
          `Expected value but found invalid unicode escape code at character ${at + i + 1}`,
        );
    }
    return JSON.stringify(textToBytes(JSON.parse(`"${m}"`) as string)).slice(1, -1);
  });
}

const NULL_KEY = 'nestjs-redis-lock:cjson.null';

/**
 * One Lua state running the library's scripts as Redis does (EVAL/EVALSHA): KEYS and ARGV,
 * `redis.call`/`pcall` on the in-memory commands, `redis.sha1hex`, `error_reply`/`status_reply`,
 * `cjson`; replies converted as Redis converts them (numbers truncated to integers, false to
 * nil, tables to arrays cut at the first nil, `{ok=}`, `{err=}`). Strings cross as byte strings
 * (memory-bytes.ts), one char per byte of the Lua string, so binary values pass unchanged.
 */
export class LuaEngine {
  private readonly f = loadFengari();
  private readonly L: LuaState;
  private readonly functions = new Map<string, number>();
  private command!: ScriptCommand;

  constructor() {
    const { lua, lauxlib, lualib } = this.f;
    this.L = lauxlib.luaL_newstate();
    lualib.luaL_openlibs(this.L);
    this.installRedis();
    this.installCjson();
    this.runChunk(PRELUDE, '=prelude');
    if (this.evalString('return tostring(3 / 1)') !== '3')
      throw new Error('fengari was loaded before nestjs-redis-lock/testing set its options');
    void lua;
  }

  /** The SHA1 of a script's source (bytes), as SCRIPT LOAD answers. */
  static sha(source: string): string {
    return createHash('sha1').update(source, 'latin1').digest('hex');
  }

  /** True when the script of `sha` is loaded. */
  has(sha: string): boolean {
    return this.functions.has(sha);
  }

  /** Compiles `source` (bytes; SCRIPT LOAD, EVAL); returns its SHA1. */
  load(source: string): string {
    const sha = LuaEngine.sha(source);
    if (this.functions.has(sha)) return sha;
    const { lua, lauxlib } = this.f;
    const status = lauxlib.luaL_loadbuffer(
      this.L,
      bytesToBuffer(source),
      null,
      this.f.to_luastring('@user_script'),
    );
    if (status !== lua.LUA_OK) {
      const message = this.popString();
      throw new MemoryReplyError(`ERR Error compiling script (new function): ${message}`);
    }
    this.functions.set(sha, lauxlib.luaL_ref(this.L, lua.LUA_REGISTRYINDEX));
    return sha;
  }

  flush(): void {
    const { lua, lauxlib } = this.f;
    for (const ref of this.functions.values())
      lauxlib.luaL_unref(this.L, lua.LUA_REGISTRYINDEX, ref);
    this.functions.clear();
  }

  /** Runs the loaded script `sha` (NOSCRIPT if not loaded), its commands through `command`. */
  run(sha: string, keys: string[], argv: string[], command: ScriptCommand): MemoryReply {
    const ref = this.functions.get(sha);
    if (ref === undefined)
      throw new MemoryReplyError('NOSCRIPT No matching script. Please use EVAL.');
    const { lua } = this.f;
    const L = this.L;
    this.command = command;
    this.setArray('KEYS', keys);
    this.setArray('ARGV', argv);
    lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, ref);
    const status = lua.lua_pcall(L, 0, 1, 0);
    if (status !== lua.LUA_OK) {
      const reply = this.toReply(-1);
      lua.lua_pop(L, 1);
      if (reply instanceof MemoryReplyError) throw reply;
      throw new MemoryReplyError(
        `ERR ${typeof reply === 'string' ? reply : 'script error'} script: ${sha}`,
      );
    }
    const reply = this.toReply(-1);
    lua.lua_pop(L, 1);
    if (reply instanceof MemoryReplyError) throw reply;
    return reply;
  }

  // ------------------------------------------------------------------ Lua → JS

  /** The Lua string (or number) at `index` as a byte string. */
  private str(index: number): string {
    return bufferToBytes(this.f.lua.lua_tolstring(this.L, index) as Uint8Array);
  }

  /** Pushes the byte string `bytes` as a Lua string. */
  private pushBytes(bytes: string): void {
    this.f.lua.lua_pushstring(this.L, bytesToBuffer(bytes));
  }

  private popString(): string {
    const s = this.str(-1);
    this.f.lua.lua_pop(this.L, 1);
    return s;
  }

  /** The value at `index` as Redis turns a script's value into a reply. */
  private toReply(index: number): MemoryReply | MemoryReplyError {
    const { lua } = this.f;
    const L = this.L;
    const t = lua.lua_type(L, index);
    switch (t) {
      case lua.LUA_TNUMBER:
        return Math.trunc(lua.lua_tonumber(L, index));
      case lua.LUA_TSTRING:
        return this.str(index);
      case lua.LUA_TBOOLEAN:
        return lua.lua_toboolean(L, index) ? 1 : null;
      case lua.LUA_TTABLE: {
        const abs = lua.lua_absindex(L, index);
        lua.lua_getfield(L, abs, this.f.to_luastring('err'));
        if (lua.lua_type(L, -1) === lua.LUA_TSTRING) {
          const err = this.popString();
          return new MemoryReplyError(err);
        }
        lua.lua_pop(L, 1);
        lua.lua_getfield(L, abs, this.f.to_luastring('ok'));
        if (lua.lua_type(L, -1) === lua.LUA_TSTRING) return new MemoryStatus(this.popString());
        lua.lua_pop(L, 1);
        const out: MemoryReply[] = [];
        for (let i = 1; ; i++) {
          lua.lua_rawgeti(L, abs, i);
          if (lua.lua_type(L, -1) === lua.LUA_TNIL) {
            lua.lua_pop(L, 1);
            break;
          }
          const item = this.toReply(-1);
          lua.lua_pop(L, 1);
          out.push(item instanceof MemoryReplyError ? item : item);
        }
        return out;
      }
      default:
        return null;
    }
  }

  // ------------------------------------------------------------------ JS → Lua

  private pushReply(reply: MemoryReply): void {
    const { lua } = this.f;
    const L = this.L;
    if (reply === null) lua.lua_pushboolean(L, false);
    else if (typeof reply === 'number') lua.lua_pushnumber(L, reply);
    else if (typeof reply === 'string') this.pushBytes(reply);
    else if (reply instanceof MemoryStatus) this.pushField('ok', reply.status);
    else if (reply instanceof MemoryReplyError) this.pushField('err', reply.message);
    else {
      lua.lua_createtable(L, reply.length, 0);
      reply.forEach((item, i) => {
        this.pushReply(item);
        lua.lua_rawseti(L, -2, i + 1);
      });
    }
  }

  /** Pushes `{ [name] = value }` (`value` in bytes). */
  private pushField(name: string, value: string): void {
    const { lua } = this.f;
    lua.lua_createtable(this.L, 0, 1);
    this.pushBytes(value);
    lua.lua_setfield(this.L, -2, this.f.to_luastring(name));
  }

  private setArray(name: string, values: string[]): void {
    const { lua } = this.f;
    lua.lua_createtable(this.L, values.length, 0);
    values.forEach((v, i) => {
      this.pushBytes(v);
      lua.lua_rawseti(this.L, -2, i + 1);
    });
    lua.lua_setglobal(this.L, this.f.to_luastring(name));
  }

  /** The arguments of `redis.call`, as Redis converts them (numbers with `%.17g`). */
  private commandArgs(): string[] {
    const { lua, lauxlib } = this.f;
    const L = this.L;
    const n = lua.lua_gettop(L);
    if (n === 0)
      lauxlib.luaL_error(
        L,
        this.f.to_luastring('Please specify at least one argument for this redis lib call'),
      );
    const args: string[] = [];
    for (let i = 1; i <= n; i++) {
      const t = lua.lua_type(L, i);
      if (t === lua.LUA_TNUMBER) args.push(String(lua.lua_tonumber(L, i)));
      else if (t === lua.LUA_TSTRING) args.push(this.str(i));
      else
        lauxlib.luaL_error(
          L,
          this.f.to_luastring('Lua redis lib command arguments must be strings or integers'),
        );
    }
    return args;
  }

  private installRedis(): void {
    const { lua } = this.f;
    const L = this.L;
    const call = (raise: boolean) => (state: LuaState) => {
      const args = this.commandArgs();
      let reply: MemoryReply;
      try {
        reply = this.command(args);
      } catch (err) {
        if (!(err instanceof MemoryReplyError)) throw err;
        this.pushField('err', err.message);
        if (raise) return lua.lua_error(state);
        return 1;
      }
      this.pushReply(reply);
      return 1;
    };
    lua.lua_createtable(L, 0, 8);
    const fn = (name: string, f: (state: LuaState) => number) => {
      lua.lua_pushjsfunction(L, f);
      lua.lua_setfield(L, -2, this.f.to_luastring(name));
    };
    fn('call', call(true));
    fn('pcall', call(false));
    fn('sha1hex', () => {
      this.pushBytes(LuaEngine.sha(this.str(1)));
      return 1;
    });
    fn('error_reply', () => (this.pushField('err', this.str(1)), 1));
    fn('status_reply', () => (this.pushField('ok', this.str(1)), 1));
    fn('log', () => 0);
    fn('replicate_commands', () => (lua.lua_pushboolean(L, true), 1));
    fn('set_repl', () => 0);
    fn('setresp', () => 0);
    for (const [name, level] of [
      ['LOG_DEBUG', 0],
      ['LOG_VERBOSE', 1],
      ['LOG_NOTICE', 2],
      ['LOG_WARNING', 3],
    ] as const) {
      lua.lua_pushnumber(L, level);
      lua.lua_setfield(L, -2, this.f.to_luastring(name));
    }
    lua.lua_setglobal(L, this.f.to_luastring('redis'));
  }

  // ------------------------------------------------------------------ cjson

  private installCjson(): void {
    const { lua, lauxlib } = this.f;
    const L = this.L;
    lua.lua_createtable(L, 0, 3);
    lua.lua_pushjsfunction(L, () => {
      let value: unknown;
      try {
        value = JSON.parse(unescapeToBytes(this.str(1)));
      } catch (err) {
        const message =
          err instanceof CjsonDecodeError
            ? err.message
            : `Expected value but found invalid token: ${(err as Error).message}`;
        return lauxlib.luaL_error(L, bytesToBuffer(message));
      }
      this.pushJson(value);
      return 1;
    });
    lua.lua_setfield(L, -2, this.f.to_luastring('decode'));
    lua.lua_pushjsfunction(L, () => {
      this.pushBytes(this.encodeJson(1, 0));
      return 1;
    });
    lua.lua_setfield(L, -2, this.f.to_luastring('encode'));
    lua.lua_pushlightuserdata(L, NULL_KEY);
    lua.lua_setfield(L, -2, this.f.to_luastring('null'));
    lua.lua_setglobal(L, this.f.to_luastring('cjson'));
  }

  /** Pushes a value of `JSON.parse`, its strings and keys in bytes (`unescapeToBytes`). */
  private pushJson(value: unknown): void {
    const { lua } = this.f;
    const L = this.L;
    if (value === null) lua.lua_pushlightuserdata(L, NULL_KEY);
    else if (typeof value === 'number') lua.lua_pushnumber(L, value);
    else if (typeof value === 'string') this.pushBytes(value);
    else if (typeof value === 'boolean') lua.lua_pushboolean(L, value);
    else if (Array.isArray(value)) {
      lua.lua_createtable(L, value.length, 0);
      value.forEach((v, i) => {
        this.pushJson(v);
        lua.lua_rawseti(L, -2, i + 1);
      });
    } else {
      const entries = Object.entries(value as object);
      lua.lua_createtable(L, 0, entries.length);
      for (const [k, v] of entries) {
        this.pushBytes(k);
        this.pushJson(v);
        lua.lua_rawset(L, -3);
      }
    }
  }

  /**
   * cjson.encode of the value at `index` (bytes; as cjson, a string's bytes are written as they
   * are): a table with keys 1..n is an array, `{}` when empty.
   */
  private encodeJson(index: number, depth: number): string {
    const { lua, lauxlib } = this.f;
    const L = this.L;
    if (depth > 1000)
      lauxlib.luaL_error(L, this.f.to_luastring('Cannot serialise, excessive nesting (1001)'));
    const abs = lua.lua_absindex(L, index);
    const t = lua.lua_type(L, abs);
    if (t === lua.LUA_TNIL) return 'null';
    if (t === lua.LUA_TBOOLEAN) return lua.lua_toboolean(L, abs) ? 'true' : 'false';
    if (t === lua.LUA_TNUMBER) {
      const n = lua.lua_tonumber(L, abs);
      return Number.isFinite(n) ? String(Number(n.toPrecision(14))) : 'null';
    }
    if (t === lua.LUA_TSTRING) return JSON.stringify(this.str(abs));
    if (t === lua.LUA_TLIGHTUSERDATA) return 'null';
    if (t !== lua.LUA_TTABLE)
      lauxlib.luaL_error(
        L,
        this.f.to_luastring(
          `Cannot serialise ${this.f.to_jsstring(lua.lua_typename(L, t))}: type not supported`,
        ),
      );
    const entries: Array<[string | number, string]> = [];
    let allIntegers = true;
    let max = 0;
    lua.lua_pushnil(L);
    while (lua.lua_next(L, abs) !== 0) {
      let key: string | number;
      if (lua.lua_type(L, -2) === lua.LUA_TNUMBER) {
        key = lua.lua_tonumber(L, -2);
        if (!Number.isInteger(key) || (key as number) < 1) allIntegers = false;
        else max = Math.max(max, key as number);
      } else {
        allIntegers = false;
        lua.lua_pushvalue(L, -2);
        key = this.str(-1);
        lua.lua_pop(L, 1);
      }
      entries.push([key, this.encodeJson(-1, depth + 1)]);
      lua.lua_pop(L, 1);
    }
    if (entries.length === 0) return '{}';
    if (allIntegers && max === entries.length) {
      const items = new Array<string>(max);
      for (const [k, v] of entries) items[(k as number) - 1] = v;
      return `[${items.join(',')}]`;
    }
    return `{${entries.map(([k, v]) => `${JSON.stringify(String(k))}:${v}`).join(',')}}`;
  }

  // ------------------------------------------------------------------ helpers

  private runChunk(source: string, name: string): void {
    const { lua, lauxlib } = this.f;
    const status = lauxlib.luaL_loadbuffer(
      this.L,
      this.f.to_luastring(source),
      null,
      this.f.to_luastring(name),
    );
    if (status !== lua.LUA_OK || lua.lua_pcall(this.L, 0, 0, 0) !== lua.LUA_OK)
      throw new Error(`nestjs-redis-lock/testing: Lua prelude failed: ${this.popString()}`);
  }

  private evalString(source: string): string {
    const { lua, lauxlib } = this.f;
    lauxlib.luaL_loadbuffer(
      this.L,
      this.f.to_luastring(source),
      null,
      this.f.to_luastring('=check'),
    );
    lua.lua_pcall(this.L, 0, 1, 0);
    return this.popString();
  }
}
