#!/bin/sh
# Prints the path of the flanneld the flannel install variant runs (deploy/manifests/netplug-flannel.yaml,
# its image by scripts/build-flannel-image.ts), built from the Go module proxy at the release
# scripts/flannel/go.mod pins and cached outside the repository, keyed by version and the module's
# files, so later runs skip the build (some 3 minutes on two cores).
set -eu
. "$(dirname "$0")/lib.sh"
module="$(cd "$(dirname "$0")/flannel" && pwd)"
version=$(sed -n 's/^require github\.com\/flannel-io\/flannel \(v[0-9.]*\)$/\1/p' "$module/go.mod")
key=$(cat "$module/go.mod" "$module/go.sum" "$module/tools.go" "$module"/tencentcloud-vpc-stub/go.mod "$module"/tencentcloud-vpc-stub/v20170312/*.go | sha256sum | cut -c1-8)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/netplug"
dir="$cache/flannel-$version-$key"
[ -x "$dir/flanneld" ] || cache_lock "$dir.lock"
if [ ! -x "$dir/flanneld" ]; then
  # cgo: flannel's UDP backend is C on amd64; linked statically, as flannel's own release is.
  ensure_debian_packages gcc libc6-dev
  go=$(sh "$(dirname "$0")/go.sh")
  say "building flanneld $version from the Go module proxy"
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  (
    cd "$module"
    export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=https://proxy.golang.org
    # netgo, osusergo: Go's resolver and user lookup, not glibc's, which a static binary cannot load.
    CGO_ENABLED=1 nice -n 10 "$go" build -trimpath -tags netgo,osusergo \
      -ldflags "-s -w -extldflags -static -X github.com/flannel-io/flannel/pkg/version.Version=$version" \
      -o "$dir.partial/flanneld" github.com/flannel-io/flannel
  ) >&2
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
fi
echo "$dir/flanneld"
