# Shared shell helpers for scripts/*.sh (sourced, not run).

say() { printf 'netplug: %s\n' "$*" >&2; }

require_root() {
  if [ "$(id -u)" != 0 ]; then
    say "run as root: $1"
    exit 1
  fi
}

# ensure_debian_packages PKG... : installs the packages that are not installed yet.
ensure_debian_packages() {
  missing=""
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $pkg"
  done
  [ -z "$missing" ] && return 0
  say "installing Debian packages:$missing"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# enable_foreign_arch ARCH : lets apt install ARCH's packages beside the native ones (multi-arch).
enable_foreign_arch() {
  dpkg --print-foreign-architectures | grep -qx "$1" && return 0
  say "enabling Debian multi-arch for $1"
  dpkg --add-architecture "$1"
  apt-get update -qq
}

# Puts cargo on PATH when it is only in rustup's default location.
with_cargo_on_path() {
  command -v cargo >/dev/null 2>&1 || PATH="$HOME/.cargo/bin:$PATH"
  export PATH
}

# cache_lock FILE : holds an exclusive lock on FILE until the script exits. Test files run at
# once and may ask for the same cached build together: the first builds, the others wait for it
# and then find it built.
cache_lock() {
  mkdir -p "$(dirname "$1")"
  exec 9>"$1"
  flock 9
}
