#!/usr/bin/env bash
# Makes sure a Chromium is available for the dashboard's browser tests (driven by playwright-core,
# which never downloads a browser here). Uses CHROMIUM_BIN, or chromium / chromium-browser on
# PATH; otherwise installs Debian's chromium with apt-get when it can. Exits non-zero when there
# is none: the browser tests then skip, saying so.
set -euo pipefail

source "$(dirname "$0")/ensure-common.sh"

use_env_binary CHROMIUM_BIN
if have chromium || have chromium-browser; then exit 0; fi

if apt_install ensure-chromium chromium; then
  if have chromium || have chromium-browser; then exit 0; fi
fi
echo "chromium was not found and could not be installed (Debian/Ubuntu: 'apt-get install chromium')," \
  "or set CHROMIUM_BIN to a Chromium binary; the dashboard's browser tests will be skipped." >&2
exit 1
