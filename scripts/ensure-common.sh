# Sourced by the ensure-*.sh scripts (shell functions only).
have() { command -v "$1" >/dev/null 2>&1; }

# use_env_binary VAR: when $VAR is set, exits 0 if it names an executable file, else 1 (saying so).
use_env_binary() {
  local value=${!1:-}
  [ -n "$value" ] || return 0
  [ -x "$value" ] && exit 0
  echo "$1=$value is not an executable file" >&2
  exit 1
}

# apt_install <who> <package>...: installs Debian packages with apt-get (as root, or through a
# password-less sudo). Sets SUDO for the caller's follow-up commands; fails (saying what to run)
# when neither apt-get nor root is available.

apt_install() {
  local who=$1
  shift
  have apt-get || return 1
  SUDO=""
  if [ "$(id -u)" != "0" ]; then
    if have sudo && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
      echo "$who: installing needs root: run 'sudo apt-get install $*'" >&2
      return 1
    fi
  fi
  echo "$who: installing $* (apt-get)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq "$@" >/dev/null
}
