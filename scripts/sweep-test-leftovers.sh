#!/bin/sh
# Deletes network namespaces left by test processes that died without their teardown (a test
# worker killed on timeout, say); their veths go with them. Test namespaces are named
# nptest-<label>-<pid>-<n>; only those whose process is gone are touched.
set -eu
ip netns list 2>/dev/null | awk '{print $1}' | while read -r name; do
  case "$name" in
    nptest-*)
      pid=$(echo "$name" | sed -n 's/^nptest-.*-\([0-9][0-9]*\)-[0-9][0-9]*$/\1/p')
      if [ -n "$pid" ] && [ ! -d "/proc/$pid" ]; then ip netns del "$name" 2>/dev/null || true; fi
      ;;
  esac
done
