#!/bin/sh
# Builds the N-API addon into native/ and regenerates ts/native/binding.d.ts.
#   npm run build:addon                                        # this machine
#   npm run build:addon -- --target aarch64-unknown-linux-gnu  # cross-build for arm64 Linux
# Extra arguments go to `napi build`. Cross-building on x86-64 uses Debian's aarch64 linker and,
# unless rustup already has the target, Debian's rustc with its arm64 standard library: rustup
# cannot download targets here, and Debian ships both through its package archive.
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
if [ "$target" = "aarch64-unknown-linux-gnu" ] && [ "$host_arch" != "aarch64" ]; then
  ensure_debian_packages gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
  if ! (command -v rustup >/dev/null && rustup target list --installed | grep -qx aarch64-unknown-linux-gnu); then
    enable_foreign_arch arm64
    ensure_debian_packages rustc-web libstd-rust-web-dev:arm64
    export RUSTC=/usr/bin/rustc
    set -- "$@" --target-dir target/cross-debian
  fi
elif [ -n "$target" ] && [ "$target" != "x86_64-unknown-linux-gnu" ] && [ "$target" != "$host_arch-unknown-linux-gnu" ]; then
  say "cross-building for $target is not set up here; supported: aarch64-unknown-linux-gnu, x86_64-unknown-linux-gnu"
  exit 2
fi

exec node_modules/.bin/napi build --platform --release \
  --manifest-path crates/netplug-dataplane-napi/Cargo.toml \
  --output-dir native --no-js --dts ../ts/native/binding.d.ts "$@"
