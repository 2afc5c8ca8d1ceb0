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

# use_cross_toolchain TRIPLE : sets cargo up to build for TRIPLE, another architecture's Linux
# (aarch64 from x86-64, x86_64 from arm64): Debian's linker for it and, unless rustup already has
# the target, Debian's rustc with that architecture's standard library (rustup cannot download
# targets here; Debian ships both through its package archive). Sets cross_target_dir to the
# target directory such a build must use, "" for cargo's own. Nothing to do for "" or this
# machine's triple; exits 2 for a pair that is not set up.
use_cross_toolchain() {
  cross_target_dir=""
  case "$(uname -m):$1" in
    *:"" | "$(uname -m):$(uname -m)-unknown-linux-gnu") return 0 ;;
    x86_64:aarch64-unknown-linux-gnu) set -- "$1" arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross ;;
    aarch64:x86_64-unknown-linux-gnu) set -- "$1" amd64 gcc-x86-64-linux-gnu libc6-dev-amd64-cross ;;
    *)
      say "cross-building for $1 is not set up on $(uname -m); supported: aarch64-unknown-linux-gnu from x86-64, x86_64-unknown-linux-gnu from arm64"
      exit 2
      ;;
  esac
  ensure_debian_packages "$3" "$4"
  linker_var=$(echo "CARGO_TARGET_$1_LINKER" | tr 'a-z-' 'A-Z_')
  export "$linker_var=$(echo "$1" | sed 's/-unknown-/-/')-gcc"
  if ! (command -v rustup >/dev/null && rustup target list --installed | grep -qx "$1"); then
    enable_foreign_arch "$2"
    ensure_debian_packages rustc-web "libstd-rust-web-dev:$2"
    export RUSTC=/usr/bin/rustc
    cross_target_dir=target/cross-debian
  fi
}

# cache_lock FILE : holds an exclusive lock on FILE until the script exits. Test files run at
# once and may ask for the same cached build together: the first builds, the others wait for it
# and then find it built.
cache_lock() {
  mkdir -p "$(dirname "$1")"
  exec 9>"$1"
  flock 9
}
