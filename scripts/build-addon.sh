#!/bin/sh
# Builds the N-API addon into native/ and regenerates ts/native/binding.d.ts.
#   npm run build:addon                                        # this machine
#   npm run build:addon -- --target aarch64-unknown-linux-gnu  # cross-build for arm64 Linux (on x86-64)
#   npm run build:addon -- --target x86_64-unknown-linux-gnu   # cross-build for x86-64 Linux (on arm64)
# Extra arguments go to `napi build`. Cross-building: use_cross_toolchain in lib.sh.
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

# Debian's linker for another architecture's target, and its rustc when rustup lacks the target;
# the shared target directory either way.
use_cross_toolchain "$target"

case "${target:-$(uname -m)}" in
  aarch64*) node_arch=arm64 ;;
  x86_64*) node_arch=x64 ;;
  *) say "no addon name is known for ${target:-$(uname -m)}"; exit 2 ;;
esac
built="native/netplug-dataplane.linux-$node_arch-gnu.node"

# Copied from the cache when these sources were built before (scripts/lib.sh).
key="addon-$(rust_build_key addon "$@" "$(grep -m1 '"version"' node_modules/@napi-rs/cli/package.json)")"
[ -f "$rust_cache_root/$key/complete" ] || cache_lock "$rust_cache_root/$key.lock"
rust_cache_restore "$key" "$built" ts/native/binding.d.ts && exit 0

node_modules/.bin/napi build --platform --release \
  --manifest-path crates/netplug-dataplane-napi/Cargo.toml \
  --output-dir native --no-js --dts ../ts/native/binding.d.ts --target-dir "$build_target_dir" "$@"
rust_cache_store "$key" "$built" ts/native/binding.d.ts
