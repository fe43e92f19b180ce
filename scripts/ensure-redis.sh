#!/usr/bin/env bash
# Makes sure a redis-server binary (>= 6.2) is available for the tests, the sample and the
# benchmarks. Uses REDIS_SERVER_BIN or the one on PATH; otherwise installs Debian's
# redis-server (and redis-tools / redis-sentinel) with apt-get when it can.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

if [ -n "${REDIS_SERVER_BIN:-}" ]; then
  [ -x "$REDIS_SERVER_BIN" ] && exit 0
  echo "REDIS_SERVER_BIN=$REDIS_SERVER_BIN is not an executable file" >&2
  exit 1
fi
if have redis-server && have redis-cli && have redis-sentinel; then exit 0; fi

if have apt-get; then
  SUDO=""
  if [ "$(id -u)" != "0" ]; then
    if have sudo; then SUDO="sudo -n"; else
      echo "redis-server is missing and installing it needs root: run 'sudo apt-get install redis-server redis-tools redis-sentinel'" >&2
      exit 1
    fi
  fi
  echo "ensure-redis: installing Debian's redis-server (apt-get)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq redis-server redis-tools redis-sentinel >/dev/null
  # Debian's package may start a system-wide server on 6379; we never use it, stop it if it runs.
  (have service && $SUDO service redis-server stop >/dev/null 2>&1) || true
  have redis-server && exit 0
fi
echo "redis-server was not found and could not be installed. Install Redis >= 6.2" \
  "(Debian/Ubuntu: 'apt-get install redis-server redis-tools redis-sentinel'; macOS: 'brew install redis')" \
  "or set REDIS_SERVER_BIN to the redis-server binary." >&2
exit 1
