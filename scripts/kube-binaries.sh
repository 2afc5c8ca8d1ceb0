#!/bin/sh
# Prints the directory holding the test cluster's kubelet, kube-controller-manager, kube-scheduler,
# kube-proxy, kubectl and the sandbox image's static pause program, built from the Go module proxy
# (test/kube-binaries, at the Kubernetes release test/kube-apiserver/go.mod pins) and cached outside
# the repository, keyed by version, so later runs skip the build (some 5 minutes on two cores).
# Installs first the Debian packages the cluster runs on (containerd 1.6, runc, busybox for the
# test image, iptables + conntrack for kube-proxy, etcd, the reference CNI plugins, curl for
# requests from the node, jq for the upgrade procedures' literal pipelines).
set -eu
. "$(dirname "$0")/lib.sh"
require_root "the test cluster runs a kubelet and containerd"
ensure_debian_packages containerd runc busybox-static iptables conntrack etcd-server containernetworking-plugins openssl curl jq
tests="$(cd "$(dirname "$0")/../test" && pwd)"
module="$tests/kube-binaries"
pin() { sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$1/go.mod"; }
version=$(pin "$tests/kube-apiserver")
if [ "$(pin "$module")" != "$version" ]; then
  say "test/kube-binaries/go.mod requires k8s.io/kubernetes $(pin "$module"), test/kube-apiserver/go.mod $version: pin both to one release"
  exit 1
fi
# The version names the build; a short hash of the module's files tells apart two builds of it.
key=$(cat "$module/go.mod" "$module/go.sum" "$module/tools.go" "$module/pause/main.go" | sha256sum | cut -c1-8)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/netplug"
dir="$cache/kube-binaries-$version-$key"
# One lock with kube-apiserver.sh: two Kubernetes builds at once would compile the same packages
# twice over on a small machine; one after the other, the second finds most of them in GOCACHE.
[ -f "$dir/complete" ] || cache_lock "$cache/kube-apiserver.lock"
if [ ! -f "$dir/complete" ]; then
  go=$(sh "$(dirname "$0")/go.sh")
  say "building kubelet, kube-controller-manager, kube-scheduler, kube-proxy and kubectl $version from the Go module proxy"
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  minor=$(echo "$version" | cut -d. -f2)
  # Without these a plain `go build` stamps v0.0.0-master, and the Node would report that version.
  stamp=""
  for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp="$stamp -X $package.gitVersion=$version -X $package.gitMajor=1 -X $package.gitMinor=$minor -X $package.gitTreeState=clean"
  done
  # GOTOOLCHAIN=local: the Go that is here (the release needs 1.26), not one go.mod may name.
  (
    cd "$module"
    GOTOOLCHAIN=local GOFLAGS=-mod=mod nice -n 10 "$go" build -ldflags "$stamp" -o "$dir.partial/" \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl
    CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod nice -n 10 "$go" build -ldflags "-s -w" -o "$dir.partial/pause" ./pause
  ) >&2
  touch "$dir.partial/complete"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
fi
echo "$dir"
