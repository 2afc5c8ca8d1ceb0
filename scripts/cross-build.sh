#!/bin/sh
# Cross-builds the addon and the shim for the other architecture (arm64 on x86-64, x86-64 on
# arm64) and prints the path of the built module, or with --shim the path of the built shim
# (native/netplug.linux-<arch>-gnu, static as dist/cni/netplug is). npm test runs it before the
# tests (a cold cross-build compiles every crate, too long for a test's time limit); the
# cross-build tests run it again, then a no-op.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
case "$(uname -m)" in
  x86_64) triple=aarch64-unknown-linux-gnu node_arch=arm64 ;;
  aarch64) triple=x86_64-unknown-linux-gnu node_arch=x64 ;;
  *) echo "netplug: no cross-build is set up from $(uname -m)" >&2; exit 2 ;;
esac
# The addon cross-built here is checked (it builds, and under qemu-user loads and wires a pod), not
# shipped (the release workflow builds its own): unoptimized, a cold build took 1.6 min here
# against 3.2 optimized without LTO, which npm test pays whenever a crate changed. (The shim stays
# optimized: its test holds it to the size it ships at.)
CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256 \
  sh scripts/build-addon.sh --target "$triple" >&2

# The shim with the toolchain the addon used (scripts/build.ts builds this machine's the same way).
built_shim=$(sh scripts/build-shim.sh "$triple")
shim="native/netplug.linux-$node_arch-gnu"
cp "$built_shim" "$shim.tmp"
mv "$shim.tmp" "$shim"

if [ "${1:-}" = "--shim" ]; then
  echo "$PWD/$shim"
else
  echo "$PWD/native/netplug-dataplane.linux-$node_arch-gnu.node"
fi
