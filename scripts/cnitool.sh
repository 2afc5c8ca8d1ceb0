#!/bin/sh
# Prints the path of cnitool (containernetworking/cni's own client, libcni inside), built from the
# Go module proxy at a pinned version and cached outside the repository so later runs skip it.
set -eu
. "$(dirname "$0")/lib.sh"
version=v1.3.1
dir="${XDG_CACHE_HOME:-$HOME/.cache}/netplug/cnitool-$version"
[ -x "$dir/cnitool" ] || cache_lock "$dir.lock"
if [ ! -x "$dir/cnitool" ]; then
  go=$(sh "$(dirname "$0")/go.sh")
  say "building cnitool $version from the Go module proxy"
  # GOTOOLCHAIN=local: use the Go that is here rather than download the one go.mod may name.
  GOTOOLCHAIN=local GOBIN="$dir" "$go" install "github.com/containernetworking/cni/cnitool@$version" >&2
fi
echo "$dir/cnitool"
