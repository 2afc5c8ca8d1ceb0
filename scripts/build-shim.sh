#!/bin/sh
# Builds the shim (crates/netplug-shim) for TRIPLE, linked statically (glibc's crt-static: it runs
# on any host's libc, loads nothing at start-up, and the image needs no library for it), and prints
# the path of the built executable. An explicit --target keeps the flag off build scripts and the
# addon's host build. Copied from the cache when these sources were built before (scripts/lib.sh).
#   sh scripts/build-shim.sh x86_64-unknown-linux-gnu
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
triple="$1"
with_cargo_on_path
use_cross_toolchain "$triple"
export RUSTFLAGS='-C target-feature=+crt-static'
built="native/shim/$triple/netplug"

key="shim-$(rust_build_key shim "$triple")"
[ -f "$rust_cache_root/$key/complete" ] || cache_lock "$rust_cache_root/$key.lock"
if ! rust_cache_restore "$key" "$built"; then
  cargo build --quiet --release -p netplug-shim --target "$triple" --target-dir "$build_target_dir" >&2
  mkdir -p "$(dirname "$built")"
  cp "$build_target_dir/$triple/release/netplug" "$built"
  rust_cache_store "$key" "$built"
fi
echo "$PWD/$built"
