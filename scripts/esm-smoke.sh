#!/usr/bin/env bash
# Smoke check of the NestJS 12 (ESM-only) matrix entry: packs the built library (run `npm run build`
# first), installs it with @nestjs/* 12 (and @bull-board/api, for the nestjs-redis-lock/bull-board
# subpath) into a temporary "type": "module" app, compiles
# test/esm-smoke/src/main.ts as NodeNext ESM, and runs it against a private redis-server.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$root/dist/index.js" ] || { echo "esm-smoke: build the library first (npm run build)" >&2; exit 1; }
work=$(mktemp -d)
redis_pid=""
cleanup() { [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

cd "$root"
tarball=$(npm pack --silent --pack-destination "$work" 2>/dev/null | tail -n 1)
cp -r test/esm-smoke/package.json test/esm-smoke/tsconfig.json test/esm-smoke/src "$work/"
cd "$work"
npm install --no-audit --no-fund --loglevel=error "./$tarball" \
  @nestjs/common@^12 @nestjs/core@^12 ioredis@^6 reflect-metadata@^0.2 rxjs@^7 @types/node@^20 \
  @bull-board/api@^9.10.2 >/dev/null
node "$root/node_modules/typescript/bin/tsc" -p tsconfig.json

port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
"${REDIS_SERVER_BIN:-redis-server}" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --logfile "$work/redis.log" &
redis_pid=$!
# Ready when its own log says so (no redis-cli needed); fail with the log if it died or stalled.
for _ in $(seq 100); do
  grep -q 'Ready to accept connections' "$work/redis.log" 2>/dev/null && break
  kill -0 "$redis_pid" 2>/dev/null || { echo "esm-smoke: redis-server exited:" >&2; cat "$work/redis.log" >&2; exit 1; }
  sleep 0.05
done
grep -q 'Ready to accept connections' "$work/redis.log" || { echo "esm-smoke: redis-server not ready in 5 s" >&2; exit 1; }
REDIS_URL="redis://127.0.0.1:$port" node dist/main.js
