#!/bin/sh
# Prints the path of kube-apiserver, built from the Go module proxy (k8s.io/kubernetes at the
# release test/kube-apiserver/go.mod pins) and cached outside the repository, keyed by version, so
# later runs skip the build (some 4 minutes on two cores, and 700 MB of modules the first time).
set -eu
. "$(dirname "$0")/lib.sh"
module="$(cd "$(dirname "$0")/../test/kube-apiserver" && pwd)"
version=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$module/go.mod")
dir="${XDG_CACHE_HOME:-$HOME/.cache}/netplug"
binary="$dir/kube-apiserver-$version"
[ -x "$binary" ] || cache_lock "$dir/kube-apiserver.lock"
if [ ! -x "$binary" ]; then
  go=$(sh "$(dirname "$0")/go.sh")
  say "building kube-apiserver $version from the Go module proxy"
  mkdir -p "$dir"
  # GOTOOLCHAIN=local: the Go that is here (the release needs 1.26), not one go.mod may name.
  (cd "$module" && GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go" build -o "$binary.partial" k8s.io/kubernetes/cmd/kube-apiserver) >&2
  mv "$binary.partial" "$binary"
fi
echo "$binary"
