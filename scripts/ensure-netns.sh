#!/usr/bin/env bash
# Makes sure the partition suite (test/partitions/) can build its network: `ip` (iproute2) and
# `iptables`, installed with apt-get when missing. Network namespaces also need root: without it
# this says so, and the suite skips every scenario (loudly).
set -euo pipefail

source "$(dirname "$0")/ensure-common.sh"

missing=()
have ip || missing+=(iproute2)
have iptables || missing+=(iptables)
if [ ${#missing[@]} -gt 0 ]; then
  apt_install ensure-netns "${missing[@]}" || true
fi
if ! have ip || ! have iptables; then
  echo "ensure-netns: 'ip' (iproute2) and 'iptables' are needed by the partition suite" \
    "(Debian/Ubuntu: 'apt-get install iproute2 iptables'); its scenarios will be skipped." >&2
  exit 1
fi
if [ "$(id -u)" != "0" ]; then
  echo "ensure-netns: the partition suite makes network namespaces and needs root;" \
    "its scenarios will be skipped." >&2
  exit 1
fi
