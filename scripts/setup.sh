#!/bin/sh
# Installs what netplug's build, tests, demo and benchmarks need, and builds the addon.
# Idempotent and quick when everything is in place; npm's pre-scripts run it before
# `npm test`, `npm run demo` and `npm run bench:*`, so a fresh clone needs nothing else.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh

require_root "netplug configures network namespaces and links"

# Debian packages: iproute2 (test observer, baseline), nftables (observer of netplug's nftables
# table, and the source of its golden encodings; netplug itself never runs nft), ping (traffic
# checks), the reference CNI plugins (host-local, portmap, ptp: delegates, chain partners,
# baseline) with the iptables portmap drives, procps (sysctl), binutils (strip, for the single
# executable), etcd (the datastore the tests and the demo start on loopback), openssl (their TLS
# certificates), tinyproxy (the proxy the Kubernetes client is tested through) and python3 (its
# http.server is a real HTTP/1.0 server).
ensure_debian_packages iproute2 nftables iputils-ping ca-certificates containernetworking-plugins iptables procps binutils \
  etcd-server openssl tinyproxy-bin python3

# A Rust toolchain: rustup's if present, else Debian's (recent enough for our rust-version).
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    say "using the Rust toolchain in $HOME/.cargo/bin (add it to PATH to silence this)"
  else
    ensure_debian_packages cargo-web rustc-web gcc libc6-dev
  fi
fi

# npm dependencies, Node 24 among them (the `node` package), exactly as package-lock.json has them:
# npm ci refuses a lockfile that does not match package.json, installs the locked versions only and
# checks each package against its integrity hash. Reinstalled when the lockfile changes.
lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -x node_modules/.bin/node ] || [ "$(cat node_modules/.netplug-lock 2>/dev/null)" != "$lock_hash" ]; then
  say "installing npm dependencies (with Node 24)"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_hash" > node_modules/.netplug-lock
fi

# The native addon for this machine; cargo rebuilds only what changed.
sh scripts/build-addon.sh
