#!/bin/sh
# Prints the path of the helm the chart tests and `npm run build:chart` drive, built from the Go
# module proxy at the release test/helm/go.mod pins and cached outside the repository, keyed by
# version and the module's files, so later runs skip the build (some minutes on two cores).
set -eu
. "$(dirname "$0")/lib.sh"
module="$(cd "$(dirname "$0")/../test/helm" && pwd)"
version=$(sed -n 's/^require helm\.sh\/helm\/v3 \(v[0-9.]*\)$/\1/p' "$module/go.mod")
key=$(cat "$module/go.mod" "$module/go.sum" "$module/tools.go" | sha256sum | cut -c1-8)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/netplug"
dir="$cache/helm-$version-$key"
[ -x "$dir/helm" ] || cache_lock "$dir.lock"
if [ ! -x "$dir/helm" ]; then
  go=$(sh "$(dirname "$0")/go.sh")
  say "building helm $version from the Go module proxy"
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  (
    cd "$module"
    export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=https://proxy.golang.org
    # What helm's Makefile stamps: its version (else `helm version` says v3.22), and the Kubernetes
    # release of its client-go, which `helm template` and `helm lint` assume of the cluster.
    kube=$("$go" list -m -f '{{.Version}}' k8s.io/client-go)
    minor=$(echo "$kube" | cut -d. -f2)
    stamp="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
    for package in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
      stamp="$stamp -X $package.k8sVersionMajor=1 -X $package.k8sVersionMinor=$minor"
    done
    CGO_ENABLED=0 nice -n 10 "$go" build -trimpath -ldflags "$stamp" -o "$dir.partial/helm" helm.sh/helm/v3/cmd/helm
  ) >&2
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
fi
echo "$dir/helm"
