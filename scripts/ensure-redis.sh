#!/usr/bin/env bash
# Makes sure a redis-server binary (>= 6.2) is available for the tests, the sample and the
# benchmarks. Uses REDIS_SERVER_BIN or the one on PATH; otherwise installs Debian's
# redis-server (and redis-tools / redis-sentinel) with apt-get when it can.
set -euo pipefail

source "$(dirname "$0")/ensure-common.sh"

use_env_binary REDIS_SERVER_BIN
# Redis >= 6.2 is required; Cluster tests and sharded pub/sub need 7.0.
check_version() {
  local v
  v=$(redis-server --version | sed -n 's/.*v=\([0-9]*\.[0-9]*\).*/\1/p')
  case "$v" in
    "" ) return 0 ;;
    [0-5].* | 6.[01]) echo "redis-server $v is too old: Redis >= 6.2 is required" >&2; return 1 ;;
    6.*) echo "ensure-redis: redis-server $v works, but Redis Cluster support needs >= 7.0" >&2 ;;
  esac
  return 0
}

if have redis-server && have redis-cli && have redis-sentinel; then check_version; exit $?; fi

if apt_install ensure-redis redis-server redis-tools redis-sentinel; then
  # Debian's packages may start a system-wide server (6379) and sentinel (26379); we never use
  # them, stop them if they run.
  (have service && $SUDO service redis-server stop >/dev/null 2>&1) || true
  (have service && $SUDO service redis-sentinel stop >/dev/null 2>&1) || true
  have redis-server && check_version && exit 0
fi
echo "redis-server was not found and could not be installed. Install Redis >= 6.2" \
  "(Debian/Ubuntu: 'apt-get install redis-server redis-tools redis-sentinel'; macOS: 'brew install redis')" \
  "or set REDIS_SERVER_BIN to the redis-server binary." >&2
exit 1
