#!/bin/sh
# Deletes what test processes left when they died without their teardown (a test worker killed
# on timeout, say): network namespaces named nptest-<label>-<pid>-<n>, whose veths go with them,
# and temporary directories named nptest-<label>-<pid>-<random>. Only leftovers of processes that
# are gone are touched. Test clusters (scripts/lib/cluster.ts: directories and network namespaces
# named npcluster-<pid>-<random>, and npcluster-<pid>-<random>-<suffix> for the other nodes and the
# router of a cluster of several, with daemons, containers and mounts) are swept first, by the same
# code their stop() runs.
set -eu
node="$(dirname "$0")/../node_modules/.bin/node"
[ -x "$node" ] || node=node
"$node" "$(dirname "$0")/lib/cluster-leftovers.ts"
ip netns list 2>/dev/null | awk '{print $1}' | while read -r name; do
  case "$name" in
    nptest-*)
      pid=$(echo "$name" | sed -n 's/^nptest-.*-\([0-9][0-9]*\)-[0-9][0-9]*$/\1/p')
      if [ -n "$pid" ] && [ ! -d "/proc/$pid" ]; then ip netns del "$name" 2>/dev/null || true; fi
      ;;
  esac
done
for dir in "${TMPDIR:-/tmp}"/nptest-*; do
  [ -d "$dir" ] || continue
  pid=$(basename "$dir" | sed -n 's/^nptest-.*-\([0-9][0-9]*\)-[^-]*$/\1/p')
  if [ -n "$pid" ] && [ ! -d "/proc/$pid" ]; then rm -rf "$dir"; fi
done
