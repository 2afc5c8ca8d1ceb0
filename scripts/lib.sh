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
# targets here; Debian ships both through its package archive). Sets build_target_dir to the
# target directory the build uses (shared_target_dir). Nothing else to do for "" or this machine's
# triple; exits 2 for a pair that is not set up.
use_cross_toolchain() {
  build_target_dir=$(shared_target_dir build-target)
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
    # Another compiler: its artifacts apart, or each build would replace the other's.
    build_target_dir=$(shared_target_dir build-target-debian-rustc)
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

# Built Rust artifacts (the addon, the shim, for this machine and cross-built) are cached outside
# the repository, keyed by what they are built from: every file under crates/, the workspace's
# Cargo.toml and Cargo.lock, the compiler's version and the build's own arguments. A fresh clone
# of the same sources (CI) copies them in seconds instead of compiling for minutes; any change to
# a source, the lockfile, the toolchain or the flags is another key, so a stale artifact is never
# used. The newest RUST_CACHE_KEEP entries are kept.
rust_cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/netplug/rust"
RUST_CACHE_KEEP=12

# rust_build_key WHAT ARG... : prints the cache key of the build WHAT with ARG... (run from the root).
rust_build_key() {
  {
    find crates Cargo.toml Cargo.lock -type f -not -path '*/target/*' -print0 | sort -z | xargs -0 sha256sum
    "${RUSTC:-rustc}" -vV
    printf '%s\n' "$@" "RUSTFLAGS=${RUSTFLAGS:-}"
    env | grep '^CARGO_PROFILE_' | sort
  } | sha256sum | cut -c1-24
}

# rust_cache_restore KEY FILE... : copies the cached FILEs of KEY into place (paths relative to the
# root, as stored); false if KEY is not complete in the cache.
rust_cache_restore() {
  entry="$rust_cache_root/$1"; shift
  [ -f "$entry/complete" ] || return 1
  for file in "$@"; do
    mkdir -p "$(dirname "$file")"
    cp "$entry/files/$file" "$file.tmp" && mv "$file.tmp" "$file" || return 1
  done
  touch "$entry" # the newest used is kept longest
}

# rust_cache_store KEY FILE... : stores the built FILEs under KEY, then drops the oldest entries.
rust_cache_store() {
  entry="$rust_cache_root/$1"; shift
  rm -rf "$entry.tmp"
  for file in "$@"; do
    mkdir -p "$entry.tmp/files/$(dirname "$file")"
    cp "$file" "$entry.tmp/files/$file"
  done
  touch "$entry.tmp/complete"
  rm -rf "$entry" && mv "$entry.tmp" "$entry"
  # shellcheck disable=SC2012 # entry names are hex keys
  ls -1t "$rust_cache_root" | grep -v '\.' | tail -n +$((RUST_CACHE_KEEP + 1)) | while read -r old; do
    rm -rf "${rust_cache_root:?}/$old" "${rust_cache_root:?}/$old.lock"
  done
}

# shared_target_dir NAME : prints a cargo target directory kept beside the Rust cache, and makes
# it. Builds from a fresh clone (CI) then compile only the crates that changed, not every
# dependency again (a cold addon and cross-build took 5 min here); cargo's lock on the directory
# keeps two clones from building in it at once. Each clone's path makes its own artifacts of the
# workspace's crates, so a directory past 6 GB is emptied first.
shared_target_dir() {
  dir="$(dirname "$rust_cache_root")/$1"
  if [ -d "$dir" ] && [ "$(du -sm "$dir" | cut -f1)" -gt 6144 ]; then
    say "emptying $dir (over 6 GB)"
    rm -rf "$dir"
  fi
  mkdir -p "$dir"
  echo "$dir"
}
