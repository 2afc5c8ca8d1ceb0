#!/bin/sh
# Prints the path of a build of the project's Node version for the other architecture (arm64 on
# x86-64, x64 on arm64) that runs here through qemu-user: Debian's qemu-user-static and that
# architecture's C/C++ runtime (multi-arch), and Node's official binary from the npm registry
# (package node-linux-<arch>), cached by version outside the repository. Used to run the
# cross-built addon for real.
#   sh scripts/foreign-node.sh            # prints the node path
#   sh scripts/foreign-node.sh --qemu     # prints the qemu-user program that runs it
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
require_root "installs Debian packages"

case "$(uname -m)" in
  x86_64) node_arch=arm64 debian_arch=arm64 qemu=qemu-aarch64-static ;;
  aarch64) node_arch=x64 debian_arch=amd64 qemu=qemu-x86_64-static ;;
  *) say "no foreign architecture is set up for $(uname -m)"; exit 2 ;;
esac
if [ "${1:-}" = "--qemu" ]; then
  echo "$qemu"
  exit 0
fi

version=$(sed -n 's/^ *"node": "\([0-9.]*\)".*/\1/p' package.json | head -n 1)
[ -n "$version" ] || { say "no pinned node version in package.json"; exit 1; }
enable_foreign_arch "$debian_arch"
ensure_debian_packages qemu-user-static "libc6:$debian_arch" "libstdc++6:$debian_arch"

package="node-linux-$node_arch"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/netplug/$package-$version"
[ -x "$cache/bin/node" ] || cache_lock "$cache.lock"
if [ ! -x "$cache/bin/node" ]; then
  say "fetching $package@$version from the npm registry"
  work=$(mktemp -d)
  (cd "$work" && npm pack --silent "$package@$version" >/dev/null && tar xzf "$package-$version.tgz")
  mkdir -p "$(dirname "$cache")"
  rm -rf "$cache"
  mv "$work/package" "$cache"
  rm -rf "$work"
fi
echo "$cache/bin/node"
