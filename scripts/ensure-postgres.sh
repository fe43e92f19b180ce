#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, postgres) are available for the sample's tests,
# `npm run sample:load -- --database postgres` and the bench's flash-sale shape, which start a
# private server each (initdb + postgres on a free loopback port, see scripts/postgres-server.ts).
# Uses POSTGRES_BIN_DIR, or initdb on PATH, or Debian's /usr/lib/postgresql/<n>/bin; otherwise
# installs Debian's postgresql with apt-get when it can (and stops the system-wide cluster it
# starts: we never use it).
set -euo pipefail

source "$(dirname "$0")/ensure-common.sh"

found() {
  if [ -n "${POSTGRES_BIN_DIR:-}" ]; then
    [ -x "$POSTGRES_BIN_DIR/initdb" ] && [ -x "$POSTGRES_BIN_DIR/postgres" ] && return 0
    echo "POSTGRES_BIN_DIR=$POSTGRES_BIN_DIR has no initdb and postgres" >&2
    exit 1
  fi
  if have initdb; then
    local dir
    dir=$(dirname "$(readlink -f "$(command -v initdb)")")
    [ -x "$dir/postgres" ] && return 0
  fi
  compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

report() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -n "${POSTGRES_BIN_DIR:-}" ]; then dir=$POSTGRES_BIN_DIR; fi
  if [ -n "$dir" ]; then "$dir/postgres" --version; else postgres --version 2>/dev/null || initdb --version; fi
}

if found; then report; exit 0; fi

if apt_install ensure-postgres postgresql; then
  (have service && $SUDO service postgresql stop >/dev/null 2>&1) || true
  found && { report; exit 0; }
fi
echo "PostgreSQL was not found and could not be installed. Install it" \
  "(Debian/Ubuntu: 'apt-get install postgresql'; macOS: 'brew install postgresql')" \
  "or set POSTGRES_BIN_DIR to the folder of its initdb and postgres binaries." >&2
exit 1
