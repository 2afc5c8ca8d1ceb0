#!/bin/sh
# Prints the path of a Go toolchain new enough to build the tests' kube-apiserver and cnitool: the
# machine's (PATH, then /usr/local/go), else the pinned release taken from the Go module proxy
# (golang.org/toolchain, the module `go` itself downloads toolchains from) and cached by version.
set -eu
. "$(dirname "$0")/lib.sh"
minimum=1.26
pinned=1.26.8

new_enough() {
  version=$("$1" env GOVERSION 2>/dev/null | sed 's/^go//') || return 1
  [ "$(printf '%s\n%s\n' "$minimum" "$version" | sort -V | head -n 1)" = "$minimum" ]
}

for candidate in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && new_enough "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done

# The SHA-256 of each zip as the proxy serves it: a changed or corrupted download is refused before
# it runs (the zips' contents match the h1: hashes sum.golang.org records). A new `pinned` needs new ones.
case "$(uname -m)" in
  x86_64) arch=amd64; sha256=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7 ;;
  aarch64) arch=arm64; sha256=02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99 ;;
  *) say "no Go toolchain for $(uname -m)"; exit 1 ;;
esac
root="${XDG_CACHE_HOME:-$HOME/.cache}/netplug/go$pinned.linux-$arch"
if [ ! -x "$root/bin/go" ]; then
  cache_lock "$root.lock"
fi
if [ ! -x "$root/bin/go" ]; then
  ensure_debian_packages curl unzip ca-certificates
  say "fetching Go $pinned from the Go module proxy"
  work=$(mktemp -d)
  module="golang.org/toolchain@v0.0.1-go$pinned.linux-$arch"
  curl -fsSL -o "$work/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$pinned.linux-$arch.zip"
  actual=$(sha256sum "$work/go.zip" | cut -d' ' -f1)
  if [ "$actual" != "$sha256" ]; then
    rm -rf "$work"
    say "the Go $pinned toolchain zip for linux-$arch has SHA-256 $actual, expected $sha256 (pinned in scripts/go.sh); not using it"
    exit 1
  fi
  unzip -q "$work/go.zip" -d "$work"
  # Module zips keep no file modes: make the toolchain's programs executable, as `go` does.
  chmod +x "$work/$module/bin/"* "$work/$module/pkg/tool/"*/*
  rm -rf "$root"
  mv "$work/$module" "$root"
  rm -rf "$work"
fi
echo "$root/bin/go"
