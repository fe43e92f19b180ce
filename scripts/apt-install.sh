# Sourced by the ensure-*.sh scripts: apt_install <who> <package>... installs Debian packages with
# apt-get (as root, or through a password-less sudo). It sets SUDO for the caller's follow-up
# commands and fails (saying what to run) when neither apt-get nor root is available.
have() { command -v "$1" >/dev/null 2>&1; }

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
