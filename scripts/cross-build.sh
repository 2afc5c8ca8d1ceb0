#!/bin/sh
# Cross-builds the addon for the other architecture (arm64 on x86-64, x86-64 on arm64) and prints
# the path of the built module. npm test runs it before the tests (a cold cross-build compiles
# every crate, too long for a test's time limit); the cross-build test runs it again, then a no-op.
set -eu
cd "$(dirname "$0")/.."
case "$(uname -m)" in
  x86_64) triple=aarch64-unknown-linux-gnu node_arch=arm64 ;;
  aarch64) triple=x86_64-unknown-linux-gnu node_arch=x64 ;;
  *) echo "netplug: no cross-build is set up from $(uname -m)" >&2; exit 2 ;;
esac
sh scripts/build-addon.sh --target "$triple" >&2
echo "$PWD/native/netplug-dataplane.linux-$node_arch-gnu.node"
