#!/bin/sh
# Builds the N-API addon into native/ and regenerates ts/native/binding.d.ts.
#   npm run build:addon                                        # this machine
#   npm run build:addon -- --target aarch64-unknown-linux-gnu  # cross-build for arm64 Linux (on x86-64)
#   npm run build:addon -- --target x86_64-unknown-linux-gnu   # cross-build for x86-64 Linux (on arm64)
# Extra arguments go to `napi build`. Cross-building uses Debian's linker for the other
# architecture and, unless rustup already has the target, Debian's rustc with that architecture's
# standard library: rustup cannot download targets here, and Debian ships both through its
# package archive.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
with_cargo_on_path

target=""
previous=""
for arg in "$@"; do
  [ "$previous" = "--target" ] || [ "$previous" = "-t" ] && target="$arg"
  case "$arg" in --target=*) target="${arg#--target=}" ;; esac
  previous="$arg"
done

host_arch=$(uname -m)

# cross_toolchain TRIPLE DEBIAN_ARCH GCC_PACKAGE LIBC_PACKAGE: Debian's linker for TRIPLE and,
# without a rustup target for it, Debian's rustc with DEBIAN_ARCH's standard library.
cross_toolchain() {
  ensure_debian_packages "$3" "$4"
  linker_var=$(echo "CARGO_TARGET_$1_LINKER" | tr 'a-z-' 'A-Z_')
  export "$linker_var=$(echo "$1" | sed 's/-unknown-/-/')-gcc"
  if ! (command -v rustup >/dev/null && rustup target list --installed | grep -qx "$1"); then
    enable_foreign_arch "$2"
    ensure_debian_packages rustc-web "libstd-rust-web-dev:$2"
    export RUSTC=/usr/bin/rustc
    extra="--target-dir target/cross-debian"
  fi
}

extra=""
case "$host_arch:$target" in
  *:"" | "$host_arch:$host_arch-unknown-linux-gnu") ;;
  x86_64:aarch64-unknown-linux-gnu) cross_toolchain "$target" arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross ;;
  aarch64:x86_64-unknown-linux-gnu) cross_toolchain "$target" amd64 gcc-x86-64-linux-gnu libc6-dev-amd64-cross ;;
  *)
    say "cross-building for $target is not set up on $host_arch; supported: aarch64-unknown-linux-gnu from x86-64, x86_64-unknown-linux-gnu from arm64"
    exit 2
    ;;
esac

# shellcheck disable=SC2086 # $extra is empty or two words
exec node_modules/.bin/napi build --platform --release \
  --manifest-path crates/netplug-dataplane-napi/Cargo.toml \
  --output-dir native --no-js --dts ../ts/native/binding.d.ts $extra "$@"
